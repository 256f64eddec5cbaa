"""Attention masks in one convention: a bool mask is ``True`` where attention is allowed.

That is the convention of :func:`torch.nn.functional.scaled_dot_product_attention`.
``nn.MultiheadAttention`` uses the opposite one (``True`` = masked out) for both
its ``attn_mask`` and ``key_padding_mask``; :func:`from_torch_mask` converts.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import torch
from torch import Tensor

from . import _validate as v

__all__ = [
    "causal_mask",
    "from_torch_mask",
    "padding_mask",
    "sliding_window_mask",
    "to_additive_mask",
    "to_torch_mask",
]


def _sizes(L: object, S: object) -> tuple:
    """``(L, S)`` checked as sizes (``S=None`` means ``L``)."""
    L = v.require_int("L", L, minimum=0)
    return L, (L if S is None else v.require_int("S", S, minimum=0))


def causal_mask(L: int, S: Optional[int] = None, device: Optional[torch.device] = None) -> Tensor:
    """Causal mask aligned to the upper left, as SDPA's ``is_causal=True``.

    Query ``i`` may attend to keys ``0..i``. With ``L != S`` the diagonal still
    starts at the top-left corner (not the bottom-right one that a KV cache would
    want, as chapter 8 explains).

    Args:
        L: number of queries.
        S: number of keys (default ``L``).
        device: where to create the mask.

    Returns:
        Bool mask, ``True`` where attention is allowed.

    Shape:
        - output: ``(L, S)``
    """
    L, S = _sizes(L, S)
    device = v.require_device("device", device)
    v.require_fits("the causal mask", (L, S), torch.bool, device or torch.device("cpu"))
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()


def padding_mask(lengths: Union[Tensor, Sequence[int]], S: Optional[int] = None) -> Tensor:
    """Key mask for a batch of sequences padded at the end.

    Args:
        lengths: the true length of each sequence (ints or a 1-D integer tensor;
            the mask is created on its device).
        S: padded length (default ``max(lengths)``).

    Returns:
        Bool mask, ``True`` for real tokens (may be attended to), ``False`` for
        padding. Index it as ``mask[:, None, None, :]`` to broadcast over heads
        and queries of a ``(B, H, L, S)`` score tensor.

    Shape:
        - lengths: ``(B,)``
        - output: ``(B, S)``
    """
    lengths = v.require_lengths("lengths", lengths)
    longest = int(lengths.max()) if lengths.numel() else 0
    S = longest if S is None else v.require_int("S", S, minimum=0)
    if longest > S:
        raise ValueError(f"a length ({longest}) exceeds the padded length S={S}")
    v.require_fits(
        f"the padding mask for lengths up to {longest} and S={S}", (lengths.shape[0], S), torch.bool,
        lengths.device, hint="check lengths and S: they are token counts",
    )
    # The positions 0..S-1 are int64, eight times the mask's bytes per key (and all of it when B = 0).
    v.require_fits(f"the {S} key positions", (S,), torch.long, lengths.device,
                   hint="check S: it is a token count")
    positions = torch.arange(S, device=lengths.device)
    return positions[None, :] < lengths[:, None]


def from_torch_mask(mask: Optional[Tensor]) -> Optional[Tensor]:
    """Convert an ``nn.MultiheadAttention`` mask into the ``qkv``/SDPA convention.

    ``nn.MultiheadAttention`` marks *forbidden* positions with ``True``; SDPA and
    ``qkv`` mark *allowed* ones. Bool masks are inverted; float masks (added to
    the scores) mean the same in both and are returned unchanged.

    Args:
        mask: an ``attn_mask`` or ``key_padding_mask`` as ``nn.MultiheadAttention``
            takes it, or ``None``.

    Returns:
        The same mask in the ``qkv`` convention (``None`` stays ``None``).

    Shape:
        - mask: any
        - output: same as ``mask``
    """
    if mask is None:
        return None
    v.require_tensor("mask", mask)
    if mask.dtype != torch.bool and not mask.is_floating_point():
        # nn.MultiheadAttention takes bool or float masks only; an int 0/1 mask has no agreed meaning.
        raise TypeError(f"mask must be bool or floating point (as nn.MultiheadAttention takes it), "
                        f"got {mask.dtype}; for a 0/1 mask pass mask.bool() (1 = True)")
    return ~mask if mask.dtype == torch.bool else mask


def to_torch_mask(mask: Optional[Tensor]) -> Optional[Tensor]:
    """Convert a ``qkv`` bool mask into ``nn.MultiheadAttention``'s convention.

    The inverse of :func:`from_torch_mask` (the two are the same operation).

    Args:
        mask: a ``qkv`` mask or ``None``.

    Returns:
        The mask with ``True`` where attention is *forbidden*.

    Shape:
        - output: same as ``mask``
    """
    return from_torch_mask(mask)


def to_additive_mask(mask: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """Turn a bool mask into a float mask to add to the scores.

    Allowed positions become ``0`` and forbidden ones ``-inf``.

    Args:
        mask: bool mask, ``True`` where attention is allowed.
        dtype: floating dtype of the result (use the query's).

    Returns:
        Float mask of the same shape.

    Shape:
        - output: same as ``mask``
    """
    v.require_tensor("mask", mask)
    v.require_float_dtype("dtype", dtype)
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be bool (True = may attend), got {mask.dtype}")
    zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return zeros.masked_fill(~mask, float("-inf"))


def sliding_window_mask(
    L: int, S: Optional[int], window: int, device: Optional[torch.device] = None
) -> Tensor:
    """Causal sliding-window (local) mask: each query sees itself and the ``window - 1`` keys before it.

    Query ``i`` may attend to keys ``j`` with ``i - window < j <= i``. Aligned to
    the upper left like :func:`causal_mask` (and SDPA's ``is_causal``); with
    ``window >= S`` it equals ``causal_mask(L, S)``. ``nn.MultiheadAttention``
    wants the opposite convention: pass ``~mask`` (see :func:`to_torch_mask`).

    Applied as a dense ``attn_mask`` it saves no work: every score is still
    computed and then discarded. Only an implementation that skips the blocks
    outside the band, such as ``chunked_attention(..., window=...)``, does less.

    Args:
        L, S, device: as for :func:`causal_mask`.
        window: keys each query may see, itself included (a positive int).

    Returns:
        Bool mask, ``True`` where attention is allowed (inside the window).

    Shape:
        - output: ``(L, S)``
    """
    L, S = _sizes(L, S)
    v.require_int("window", window)
    device = v.require_device("device", device)
    v.require_fits("the sliding-window mask", (L, S), torch.bool, device or torch.device("cpu"))
    # The int64 positions of rows and columns: all there is to allocate when L or S is 0.
    v.require_fits(f"the L + S = {L + S} positions", (L + S,), torch.long, device or torch.device("cpu"),
                   hint="check L and S: they are token counts")
    rows = torch.arange(L, device=device)[:, None]
    cols = torch.arange(S, device=device)[None, :]
    return (cols <= rows) & (cols > rows - window)
