"""Attention as today's models use it (chapter 9): shared keys and values, aligned masks.

- :func:`grouped_query_attention`: several query heads share one key/value head
  (grouped-query attention, Ainslie et al. 2023; one shared head for all is multi-query
  attention, Shazeer 2019), with the conventions of SDPA's ``enable_gqa=True``;
  :func:`repeat_kv` is the copy that makes it ordinary multi-head attention.
- :func:`causal_mask_bottom_right`: the causal mask a KV cache needs when ``L < S``
  (SDPA's ``is_causal`` and :func:`qkv.causal_mask` align it to the top left).
- :func:`local_global_mask`: a sliding window plus a few global tokens (Longformer).

Linear attention lives in :mod:`qkv.linear`, FlexAttention's mask and score
functions in :mod:`qkv.flex`, the path-length measurements in :mod:`qkv.paths`.
Every bool mask is ``True`` where attention is allowed (SDPA's convention;
``nn.MultiheadAttention`` uses the opposite: pass ``~mask`` or :func:`qkv.to_torch_mask`).
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import torch
from torch import Tensor

from . import _validate as v
from .masking import _sizes, causal_mask, sliding_window_mask
from .scaling import scaled_dot_product_attention

__all__ = [
    "causal_mask_bottom_right",
    "grouped_query_attention",
    "local_global_mask",
    "repeat_kv",
]

_LEGEND = "query (..., Hq, L, E), key (..., Hkv, S, E), value (..., Hkv, S, Ev), Hq divisible by Hkv"


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """Repeat each key/value head ``n_rep`` times, in place next to itself.

    Heads ``[a, b]`` become ``[a, a, b, b]`` for ``n_rep=2`` (``repeat_interleave``,
    not ``repeat``, which would give ``[a, b, a, b]``): query head ``h`` then finds
    its key/value head at ``h // n_rep``, as SDPA's ``enable_gqa=True`` and Llama's
    ``repeat_kv`` group them. The result is a copy, ``n_rep`` times the memory.

    Args:
        x: keys or values.
        n_rep: how many query heads share each key/value head (``Hq // Hkv``).

    Returns:
        The heads repeated.

    Shape:
        - x: ``(..., Hkv, S, E)``
        - output: ``(..., Hkv * n_rep, S, E)``
    """
    v.require_float_tensor("x", x, "(..., Hkv, S, E)", min_dim=3)
    v.require_int("n_rep", n_rep)
    shape = (*x.shape[:-3], x.shape[-3] * n_rep, *x.shape[-2:])
    v.require_fits(f"the repeated heads (n_rep={n_rep})", shape, x.dtype, x.device,
                   hint="grouped_query_attention shares the heads without copying them")
    return x.repeat_interleave(n_rep, dim=-3)


def _check_gqa(query: Tensor, key: Tensor, value: Tensor) -> int:
    """The inputs checked; returns the group size ``Hq // Hkv``."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        v.require_float_tensor(name, t, _LEGEND, min_dim=3)
    Hq, Hkv = query.shape[-3], key.shape[-3]
    if value.shape[-3] != Hkv:
        raise ValueError(f"key and value must have the same number of heads (dim -3); got key "
                         f"{v.shape_str(key)} and value {v.shape_str(value)}")
    if Hkv == 0 or Hq % Hkv:
        raise ValueError(f"the query heads Hq={Hq} must be a multiple of the key/value heads "
                         f"Hkv={Hkv} (dim -3); expected {_LEGEND}")
    names, tensors = ("query", "key", "value"), (query, key, value)
    v.require_same(names, tensors, "dtype")
    v.require_same(names, tensors, "device")
    v.broadcast_batch(names, [t.flatten(-3, -2) for t in tensors], _LEGEND)  # the dims before the heads
    return Hq // Hkv


def _check_mask(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor],
                is_causal: bool) -> None:
    """``attn_mask`` against the ``(..., Hq, L, S)`` scores, and not together with ``is_causal``."""
    v.require_flag("is_causal", is_causal)
    if is_causal and attn_mask is not None:
        raise ValueError("pass either attn_mask or is_causal=True, not both; to combine them, pass "
                         "attn_mask=qkv.causal_mask(L, S) & your_mask")
    lead = v.broadcast_shapes(*(t.shape[:-3] for t in (query, key, value)))
    v.check_mask(attn_mask, query.shape[-2], key.shape[-2], query.dtype, query.device,
                 (*lead, query.shape[-3]))


def _group_mask(attn_mask: Optional[Tensor], is_causal: bool, Hkv: int, G: int, L: int, S: int,
                device: torch.device) -> Optional[Tensor]:
    """The mask (or ``is_causal``) for ``(..., Hq, L, S)`` scores, for the ``(..., Hkv, G * L, S)`` ones."""
    if is_causal:
        attn_mask = causal_mask(L, S, device=device)
    if attn_mask is None:
        return None
    m = attn_mask.broadcast_to(*attn_mask.shape[:-2], L, S)
    if m.dim() >= 3 and m.shape[-3] == Hkv * G:
        m = m.unflatten(-3, (Hkv, G))  # one row of masks per query head: split like the heads
    else:
        m = m.unsqueeze(-3)  # the same mask for every head of a group
    return m.expand(*m.shape[:-3], G, L, S).flatten(-3, -2)


def grouped_query_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor] = None,
    is_causal: bool = False,
    scale: Optional[float] = None,
) -> Tensor:
    """Grouped-query attention: ``Hq`` query heads share ``Hkv`` key/value heads.

    Query heads ``g * G .. g * G + G - 1`` (``G = Hq // Hkv``) all attend with key/value
    head ``g``: the result equals multi-head attention on :func:`repeat_kv`'s copies,
    and PyTorch's ``scaled_dot_product_attention(..., enable_gqa=True)``. ``Hkv = 1``
    is multi-query attention, ``Hkv = Hq`` ordinary multi-head attention. The keys and
    values are never copied: a group's queries are stacked and meet them together.

    Args:
        query: queries.
        key: keys, ``Hkv`` heads.
        value: values, ``Hkv`` heads.
        attn_mask: bool (True = may attend) or float (added) mask, broadcastable to
            ``(..., Hq, L, S)``.
        is_causal: causal mask aligned to the top left, as SDPA's.
        scale: factor for the scores; ``None`` means ``1 / sqrt(E)``.

    Returns:
        The attention output, one row per query head.

    Shape:
        - query: ``(..., Hq, L, E)``, key: ``(..., Hkv, S, E)``, value: ``(..., Hkv, S, Ev)``
        - output: ``(..., Hq, L, Ev)``
    """
    G = _check_gqa(query, key, value)
    _check_mask(query, key, value, attn_mask, is_causal)
    Hkv, L, S = key.shape[-3], query.shape[-2], key.shape[-2]
    # (..., Hq, L, E) -> (..., Hkv, G * L, E): the G query heads of a group become G * L rows
    # that all meet the same keys. Broadcasting (..., Hkv, G, L, E) against (..., Hkv, 1, S, E)
    # instead would make matmul expand, and so copy, every key G times.
    q = query.unflatten(-3, (Hkv, G)).flatten(-3, -2)
    mask = _group_mask(attn_mask, is_causal, Hkv, G, L, S, query.device)
    out = scaled_dot_product_attention(q, key, value, attn_mask=mask, scale=scale)
    return out.unflatten(-2, (G, L)).flatten(-4, -3)


def causal_mask_bottom_right(L: int, S: Optional[int] = None,
                             device: Optional[torch.device] = None) -> Tensor:
    """Causal mask aligned to the bottom right: the ``L`` queries are the last ``L`` of ``S``.

    Query ``i`` sits at position ``S - L + i`` and may attend to keys
    ``0 .. S - L + i``: what a KV cache (or a prompt processed in chunks) needs when
    ``L`` new tokens attend to ``S = P + L`` cached ones. For ``L == S`` it equals
    :func:`qkv.causal_mask` (SDPA's ``is_causal``, aligned to the top left); for
    ``L > S`` the first ``L - S`` queries may attend to nothing. PyTorch's name for it
    is ``torch.nn.attention.bias.causal_lower_right``.

    Args:
        L, S, device: as for :func:`qkv.causal_mask` (``S`` defaults to ``L``).

    Returns:
        Bool mask ``(L, S)``, ``True`` where attention is allowed.
    """
    L, S = _sizes(L, S)
    device = v.require_device("device", device)
    v.require_fits("the causal mask", (L, S), torch.bool, device or torch.device("cpu"))
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(S - L)


def _global_positions(global_tokens: object, n: int) -> Tensor:
    """``global_tokens`` checked as positions in ``0 .. n - 1``, as a ``long`` tensor."""
    if isinstance(global_tokens, Tensor):
        v.require_values("global_tokens", global_tokens, "the mask is made from the positions it holds")
        if global_tokens.is_floating_point() or global_tokens.is_complex() or global_tokens.dim() > 1 \
                or global_tokens.dtype == torch.bool:
            raise TypeError(f"global_tokens must be a sequence of ints or a 1-D integer tensor, got a "
                            f"{global_tokens.dtype} tensor of shape {v.shape_str(global_tokens)}")
        global_tokens = global_tokens.tolist() if global_tokens.dim() else [int(global_tokens)]
    idx = torch.as_tensor(v.require_int_sequence("global_tokens", global_tokens), dtype=torch.long)
    if idx.numel() and not (0 <= int(idx.min()) and int(idx.max()) < n):
        raise ValueError(f"global_tokens must lie in 0 .. n - 1 = {n - 1}, got {idx.tolist()}")
    return idx


def local_global_mask(
    n: int,
    window: int,
    global_tokens: Union[Sequence[int], Tensor] = (),
    is_causal: bool = False,
    device: Optional[torch.device] = None,
) -> Tensor:
    """Self-attention mask of a sliding window plus global tokens (Longformer's pattern).

    Local part: two-sided, query ``i`` sees keys ``j`` with ``|i - j| <= window // 2``
    (Longformer's window ``w``: ``w / 2`` tokens on each side); causal
    (``is_causal=True``), the window of :func:`qkv.sliding_window_mask`:
    ``i - window < j <= i``. A global token (a ``[CLS]``, a question) attends to every
    token and every token attends to it; under ``is_causal`` the future stays hidden.

    Args:
        n: sequence length (queries and keys).
        window: the local window's width in tokens (a positive int).
        global_tokens: positions of the global tokens (ints in ``0 .. n - 1``).
        is_causal: hide the future too.
        device: where to create the mask.

    Returns:
        Bool mask, ``True`` where attention is allowed.

    Shape:
        - output: ``(n, n)``
    """
    n, _ = _sizes(n, None)
    v.require_int("window", window)
    v.require_flag("is_causal", is_causal)
    idx = _global_positions(global_tokens, n)
    device = v.require_device("device", device)
    # a few (n, n) bool masks are alive at once: refuse what could never fit
    v.require_fits(f"the (n, n) mask for n={n}", (3, n, n), torch.bool, device or torch.device("cpu"))
    if is_causal:
        allowed = sliding_window_mask(n, n, window, device=device)
    else:  # a band of window // 2 diagonals on each side (bool all along: n * n bytes)
        r = window // 2
        allowed = torch.ones(n, n, dtype=torch.bool, device=device).triu(-r).tril(r)
    is_global = torch.zeros(n, dtype=torch.bool, device=device)
    is_global[idx.to(is_global.device)] = True
    allowed = allowed | is_global[:, None] | is_global[None, :]
    if is_causal:
        allowed = allowed & torch.ones(n, n, dtype=torch.bool, device=device).tril()
    return allowed
