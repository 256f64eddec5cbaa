"""Scaled dot-product attention, written out step by step.

This is the course's reference: it follows
:func:`torch.nn.functional.scaled_dot_product_attention` (same argument names,
same mask convention, same results) but materialises the ``L x S`` weight matrix
on purpose, so that it can be returned, plotted and taught.

Mask convention (SDPA's, used everywhere in ``qkv``): a bool mask is ``True``
where attention is **allowed**. ``nn.MultiheadAttention`` uses the opposite
convention; convert with :func:`qkv.masking.from_torch_mask`.

Fully masked rows (a query that may attend to nothing) get all-zero weights and
a zero output, as PyTorch's SDPA does since 2.5, rather than NaN.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _validate as v
from .masking import causal_mask

_LEGEND = "query (..., L, E), key (..., S, E), value (..., S, Ev)"


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Numerically stable softmax along ``dim``.

    Subtracting the maximum first leaves the result unchanged (softmax is
    invariant to adding a constant) but keeps ``exp`` from overflowing on large
    logits. Half-precision inputs are computed in float32 and cast back.

    Args:
        x: logits, any shape, floating point.
        dim: the dimension that sums to one.

    Returns:
        Tensor of the same shape, dtype and device as ``x``. A slice that is
        ``-inf`` throughout gives NaN, as :func:`torch.softmax` does.

    Shape:
        - x: ``(*)``
        - output: ``(*)``
    """
    v.require_tensor("x", x)
    v.require_float("x", x)
    if not -x.dim() <= dim < max(x.dim(), 1):
        raise ValueError(f"dim={dim} is out of range for x of shape {v.shape_str(x)}")
    work = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    shifted = work - work.amax(dim=dim, keepdim=True)
    e = shifted.exp()
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)


def _check_inputs(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor],
    is_causal: bool,
    dropout_p: float,
    scale: Optional[float],
) -> None:
    for name, t in (("query", query), ("key", key), ("value", value)):
        v.require_tensor(name, t)
        v.require_min_dim(name, t, 2, _LEGEND)
        v.require_float(name, t)
    v.require_same(("query", "key", "value"), (query, key, value), "dtype")
    v.require_same(("query", "key", "value"), (query, key, value), "device")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must have the same last dim E, got query {v.shape_str(query)} "
            f"and key {v.shape_str(key)}; expected {_LEGEND}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same sequence length S (dim -2), got key "
            f"{v.shape_str(key)} and value {v.shape_str(value)}; expected {_LEGEND}"
        )
    v.broadcast_batch(("query", "key", "value"), (query, key, value), _LEGEND)
    if is_causal and attn_mask is not None:
        raise ValueError(
            "pass either attn_mask or is_causal=True, not both; to combine a causal mask with "
            "another bool mask, pass attn_mask=qkv.causal_mask(L, S) & your_mask"
        )
    batch = v.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    v.check_mask(attn_mask, query.shape[-2], key.shape[-2], query.dtype, query.device, batch)
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    if scale is not None and not (isinstance(scale, (int, float)) and scale > 0):
        raise ValueError(f"scale must be a positive number or None (1/sqrt(E)), got {scale!r}")


def attention_scores(
    query: Tensor,
    key: Tensor,
    attn_mask: Optional[Tensor] = None,
    is_causal: bool = False,
    scale: Optional[float] = None,
) -> Tensor:
    """Masked, scaled scores ``query @ key^T * scale`` (the softmax's input).

    Args:
        query: queries.
        key: keys.
        attn_mask: bool (True = may attend) or float (added) mask.
        is_causal: apply an upper-left aligned causal mask.
        scale: factor applied to the scores; ``None`` means ``1 / sqrt(E)``.

    Returns:
        Scores, with ``-inf`` where attention is not allowed.

    Shape:
        - query: ``(..., L, E)``, key: ``(..., S, E)``
        - attn_mask: broadcastable to ``(..., L, S)``
        - output: ``(..., L, S)``
    """
    L, S = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    # Half precision overflows easily in the product; compute the scores in float32.
    work = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    scores = (query.to(work) * scale) @ key.to(work).transpose(-2, -1)
    if is_causal:
        allowed = causal_mask(L, S, device=query.device)
        scores = scores.masked_fill(~allowed, float("-inf"))
    elif attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask.to(work)
    return scores


def attention_weights(scores: Tensor, inplace: bool = False) -> Tensor:
    """Row-wise softmax of the scores; rows that allow no key give zeros.

    With ``inplace=True`` (for scores the caller just made) and no gradient
    needed, the scores' memory is reused: three fewer ``L x S`` allocations
    halve the time on CPU, where fresh memory is slow to touch.
    """
    row_max = scores.amax(dim=-1, keepdim=True)
    # A row with no allowed key has max -inf; pin it to 0 so exp gives zeros, not NaN.
    empty = row_max == float("-inf")
    shift = row_max.masked_fill(empty, 0.0)
    if inplace and not scores.requires_grad:
        e = scores.sub_(shift).exp_()
        return e.div_(e.sum(dim=-1, keepdim=True).masked_fill_(empty, 1.0))
    e = (scores - shift).exp()
    total = e.sum(dim=-1, keepdim=True)
    return e / total.masked_fill(empty, 1.0)


def scaled_dot_product_attention_with_weights(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor] = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Optional[float] = None,
) -> Tuple[Tensor, Tensor]:
    """Attention output together with the attention weights.

    Same arguments as :func:`scaled_dot_product_attention`.

    Returns:
        ``(output, weights)``; the weights are those before dropout, and each
        row sums to one (or is all zero when the row is fully masked).

    Shape:
        - output: ``(..., L, Ev)``
        - weights: ``(..., L, S)``
    """
    _check_inputs(query, key, value, attn_mask, is_causal, dropout_p, scale)
    scores = attention_scores(query, key, attn_mask, is_causal, scale)
    weights = attention_weights(scores, inplace=True)
    used = torch.dropout(weights, dropout_p, train=True) if dropout_p > 0 else weights
    out = used @ value.to(weights.dtype)
    return out.to(query.dtype), weights.to(query.dtype)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor] = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Optional[float] = None,
) -> Tensor:
    """``softmax(query @ key^T * scale + mask) @ value``, as PyTorch's SDPA computes it.

    Args:
        query: queries.
        key: keys.
        value: values.
        attn_mask: optional mask broadcastable to ``(..., L, S)``. Bool: ``True``
            where attention is allowed (``nn.MultiheadAttention`` uses the
            opposite). Float (the query's dtype): added to the scores.
        dropout_p: dropout probability on the weights (applied whenever > 0,
            as SDPA does; pass 0.0 in evaluation).
        is_causal: causal mask aligned to the upper left: query ``i`` may attend
            to keys ``0..i``. Not together with ``attn_mask``.
        scale: factor for the scores; ``None`` means ``1 / sqrt(E)``.

    Returns:
        The attention output.

    Shape:
        - query: ``(..., L, E)``
        - key: ``(..., S, E)``
        - value: ``(..., S, Ev)``
        - output: ``(..., L, Ev)``
    """
    return scaled_dot_product_attention_with_weights(
        query, key, value, attn_mask, dropout_p, is_causal, scale
    )[0]
