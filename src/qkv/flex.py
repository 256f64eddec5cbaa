"""The course's masks and ALiBi as FlexAttention functions (chapter 9).

PyTorch's FlexAttention (``torch.nn.attention.flex_attention``, PyTorch 2.5 and later)
takes attention's variations as two small functions of indices instead of tensors:

- a ``mask_mod(b, h, q_idx, kv_idx) -> bool``: ``True`` where query ``q_idx`` may attend
  to key ``kv_idx`` (the course's convention, and SDPA's); ``create_block_mask`` turns it
  into a :class:`BlockMask` that lets a compiled kernel skip whole blocks;
- a ``score_mod(score, b, h, q_idx, kv_idx) -> score``: changes each scaled score before
  the softmax (ALiBi subtracts a distance penalty).

The indices arrive as tensors (``create_block_mask`` and ``flex_attention`` evaluate the
function for all of them at once with ``torch.vmap``), so these functions use tensor
operations only: ``&``, ``|``, comparisons and indexing, never ``if``. This module imports
nothing from FlexAttention, so it loads with any PyTorch; the functions are exactly what
``flex_attention`` and ``create_block_mask`` accept.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Union

import torch
from torch import Tensor

from . import _validate as v
from .variants import _global_positions

__all__ = [
    "alibi_score_mod",
    "bottom_right_mask_mod",
    "causal_mask_mod",
    "local_global_mask_mod",
    "padding_mask_mod",
    "sliding_window_mask_mod",
]

MaskMod = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]
ScoreMod = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]


def _check_indices(q_idx: object, kv_idx: object, b: object = 0, h: object = 0) -> None:
    """Integer index tensors whose shapes broadcast, as FlexAttention passes them (batched by vmap).

    Skipped while FlexAttention compiles the function: it passes its own indices then.
    """
    if torch.compiler.is_compiling():
        return
    for name, t in (("b", b), ("h", h)):
        if isinstance(t, bool) or not isinstance(t, (int, Tensor)):
            raise TypeError(f"{name} must be an index (an int or an integer tensor, as "
                            f"FlexAttention passes it), got {type(t).__name__} {t!r}")
    for name, t in (("q_idx", q_idx), ("kv_idx", kv_idx)):
        v.require_tensor(name, t)
        if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
            raise TypeError(f"{name} must be an integer index tensor, got {t.dtype}")
    try:
        v.broadcast_shapes(q_idx.shape, kv_idx.shape)
    except RuntimeError:
        raise ValueError(f"q_idx {v.shape_str(q_idx)} and kv_idx {v.shape_str(kv_idx)} must have "
                         f"shapes that broadcast") from None


def causal_mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
    """``qkv.causal_mask`` as a ``mask_mod``: query ``i`` sees keys ``0..i`` (top-left aligned)."""
    _check_indices(q_idx, kv_idx, b, h)  # b and h are not used: any batch and head
    return q_idx >= kv_idx


def bottom_right_mask_mod(L: int, S: int) -> MaskMod:
    """``qkv.causal_mask_bottom_right(L, S)`` as a ``mask_mod``: query ``i`` sits at ``S - L + i``.

    Args:
        L: number of queries.
        S: number of keys.

    Returns:
        The ``mask_mod``.
    """
    offset = v.require_int("S", S, minimum=0) - v.require_int("L", L, minimum=0)

    def bottom_right(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return q_idx + offset >= kv_idx

    return bottom_right


def padding_mask_mod(lengths: Tensor) -> MaskMod:
    """``qkv.padding_mask(lengths)`` as a ``mask_mod``: sequence ``b`` sees its first ``lengths[b]`` keys.

    Args:
        lengths: the true length of each sequence, a 1-D integer tensor.

    Returns:
        The ``mask_mod`` (it indexes ``lengths`` with the batch index ``b``).

    Shape:
        - lengths: ``(B,)``
    """
    v.require_tensor("lengths", lengths)  # indexed by b inside: a list would not do
    lengths = v.require_lengths("lengths", lengths)

    def padding(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return kv_idx < lengths[b]

    return padding


def sliding_window_mask_mod(window: int) -> MaskMod:
    """``qkv.sliding_window_mask(L, S, window)`` as a ``mask_mod``: keys ``i - window < j <= i``.

    Args:
        window: keys each query may see, itself included.

    Returns:
        The ``mask_mod``.
    """
    v.require_int("window", window)

    def sliding_window(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return (q_idx >= kv_idx) & (q_idx - kv_idx < window)

    return sliding_window


def local_global_mask_mod(n: int, window: int, global_tokens: Union[Sequence[int], Tensor] = (),
                          device: Optional[torch.device] = None) -> MaskMod:
    """``qkv.local_global_mask(n, window, global_tokens)`` (two-sided) as a ``mask_mod``.

    Args:
        n: sequence length.
        window: the local window (``window // 2`` keys on each side).
        global_tokens: positions that attend to, and are attended by, every token.
        device: the device of the indices it will be given (the queries').

    Returns:
        The ``mask_mod``.
    """
    n = v.require_int("n", n)
    v.require_int("window", window)
    idx = _global_positions(global_tokens, n)
    device = v.require_device("device", device)
    v.require_fits(f"the (n,) global flags for n={n}", (n,), torch.bool, device or torch.device("cpu"),
                   hint="check n: it is the sequence length")
    # One flag past the end, False: PyTorch 2.5's create_block_mask also asks about positions
    # up to its block size (128) beyond n, whose answers it drops; clamped there, they read it.
    is_global = torch.zeros(n + 1, dtype=torch.bool)
    is_global[idx] = True
    is_global = is_global.to(device)

    def local_global(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        near = (q_idx - kv_idx).abs() <= window // 2
        return near | is_global[q_idx.clamp(max=n)] | is_global[kv_idx.clamp(max=n)]

    return local_global


def alibi_score_mod(slopes: Tensor) -> ScoreMod:
    """ALiBi (Press et al. 2022) as a ``score_mod``: head ``h`` subtracts ``slopes[h] * (i - j)``.

    The penalty grows with the distance from query ``i`` back to key ``j``; it is meant
    for causal attention (``j <= i``): pair it with :func:`causal_mask_mod`. The score
    it receives is already scaled, so this equals an additive ``attn_mask`` of
    ``-slopes[h] * (i - j)``.

    Args:
        slopes: one slope per head (the paper's ``2 ** (-8 h / H)``, ``h = 1 .. H``, for ``H``
            a power of two).

    Returns:
        The ``score_mod``.

    Shape:
        - slopes: ``(H,)``
    """
    v.require_dim("slopes", slopes, 1, "(H,)")
    v.require_float("slopes", slopes)

    def alibi(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return score - slopes[h].to(score.dtype) * (q_idx - kv_idx)

    return alibi
