"""Attention that never materialises the ``L x S`` matrix: the online softmax.

FlashAttention's algorithm in plain PyTorch. Keys and values are visited one
chunk at a time; for each query we keep a running maximum ``m``, a running
softmax denominator ``l`` and a running weighted sum ``acc`` of values. When a
new chunk raises the maximum from ``m`` to ``m'``, everything accumulated so far
was computed relative to ``m`` and is multiplied by ``exp(m - m')``: that
rescale is what makes the result exact rather than approximate.

Queries are processed in blocks of the same size, so the largest temporary is
``(..., chunk_size, chunk_size)`` and the extra memory does not grow with ``L * S``.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

from . import _validate as v
from .functional import _check_inputs


def chunked_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor] = None,
    is_causal: bool = False,
    scale: Optional[float] = None,
    chunk_size: int = 256,
) -> Tensor:
    """Exact attention computed chunk by chunk with the online softmax.

    Equal (up to rounding) to :func:`qkv.scaled_dot_product_attention` with the
    same arguments, including all-zero output for fully masked rows.

    Args:
        query: queries.
        key: keys.
        value: values.
        attn_mask: bool (True = may attend) or float (added) mask,
            broadcastable to ``(..., L, S)``.
        is_causal: upper-left causal mask; key chunks wholly in a query block's
            future are skipped, which halves the work.
        scale: factor for the scores; ``None`` means ``1 / sqrt(E)``.
        chunk_size: keys (and queries) per block; any positive int, it need not
            divide the sequence length.

    Returns:
        The attention output.

    Shape:
        - query: ``(..., L, E)``, key: ``(..., S, E)``, value: ``(..., S, Ev)``
        - output: ``(..., L, Ev)``
    """
    _check_inputs(query, key, value, attn_mask, is_causal, 0.0, scale)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size <= 0:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    batch = v.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    # Accumulate in float32 at least: half-precision running sums lose digits fast.
    acc_dtype = torch.promote_types(query.dtype, torch.float32)
    if attn_mask is not None:
        attn_mask = attn_mask.broadcast_to(*attn_mask.shape[:-2], L, S)
    out = torch.empty(*batch, L, value.shape[-1], dtype=query.dtype, device=query.device)

    for i0 in range(0, L, chunk_size):
        i1 = min(i0 + chunk_size, L)
        q = query[..., i0:i1, :].to(acc_dtype) * scale
        m = torch.full((*batch, i1 - i0, 1), float("-inf"), dtype=acc_dtype, device=query.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(*batch, i1 - i0, value.shape[-1], dtype=acc_dtype, device=query.device)
        # Under a causal mask query i sees keys 0..i, so later key chunks are skipped.
        stop = min(S, i1) if is_causal else S
        for j0 in range(0, stop, chunk_size):
            j1 = min(j0 + chunk_size, stop)
            s = q @ key[..., j0:j1, :].to(acc_dtype).transpose(-2, -1)
            if is_causal and j1 > i0:
                rows = torch.arange(i0, i1, device=query.device)[:, None]
                cols = torch.arange(j0, j1, device=query.device)[None, :]
                s = s.masked_fill(cols > rows, float("-inf"))
            if attn_mask is not None:
                block = attn_mask[..., i0:i1, j0:j1]
                if block.dtype == torch.bool:
                    s = s.masked_fill(~block, float("-inf"))
                else:
                    s = s + block.to(acc_dtype)
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            # Rows that have seen only masked keys keep m = -inf; use 0 there so that
            # exp() gives 0 instead of NaN (exp(-inf - -inf)).
            m_safe = m_new.masked_fill(m_new == float("-inf"), 0.0)
            p = (s - m_safe).exp()
            correction = (m - m_safe).exp()
            l = l * correction + p.sum(dim=-1, keepdim=True)
            acc = acc * correction + p @ value[..., j0:j1, :].to(acc_dtype)
            m = m_new
        # A fully masked row has l = 0 and acc = 0: dividing by 1 leaves it zero, as SDPA does.
        out[..., i0:i1, :] = (acc / l.masked_fill(l == 0, 1.0)).to(query.dtype)
    return out
