"""Memory-efficient attention for training: the online softmax with its own backward pass.

:func:`qkv.chunked_attention` never builds the ``L x S`` weights in the forward
pass, but autograd still keeps every block it made for the backward pass, so its
*training* memory is as quadratic as the reference's. FlashAttention's answer is a
custom backward: save only the output ``O`` and, per query, the log-sum-exp of its
scores, ``lse = m + log(l)``; in the backward pass recompute the weights of one
block at a time, ``P = exp(S - lse)``, and use

- ``dV = P^T dO`` and ``dP = dO V^T``,
- ``dS = P * (dP - rowsum(dO * O))`` (the softmax's backward: ``rowsum(P * dP)``
  equals ``rowsum(dO * O)``, which needs no weights at all),
- ``dQ = dS K * scale`` and ``dK = dS^T Q * scale``.

Everything saved, and every gradient, has ``L`` or ``S`` rows: memory grows linearly
in the sequence length, at the price of computing the scores twice. This module is
plain PyTorch (any device, any float dtype); :func:`qkv.triton_attention` is the same
algorithm as GPU kernels.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _validate as v
from .efficient import _LOG2_E, _check_chunking, _mask_block
from .scaling import _check_inputs

__all__ = ["memory_efficient_attention"]


def memory_efficient_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor] = None,
    is_causal: bool = False,
    scale: Optional[float] = None,
    chunk_size: int = 256,
    query_chunk_size: Optional[int] = None,
) -> Tensor:
    """Exact attention whose forward *and* backward passes use memory linear in the length.

    Equal (up to rounding) to :func:`qkv.scaled_dot_product_attention` with the same
    arguments, gradients included; a fully masked row gives a zero output and zero
    gradients, as the reference does. The forward pass is the online softmax of
    :func:`qkv.chunked_attention`; the backward pass recomputes the weights block by
    block from the saved log-sum-exp (see the module's docstring).

    Args:
        query: queries.
        key: keys.
        value: values.
        attn_mask: bool (True = may attend) or float (added) mask, broadcastable to
            ``(..., L, S)``. It gets no gradient: a float mask that requires grad is refused.
        is_causal: upper-left causal mask; blocks wholly in the future are skipped in
            both passes.
        scale: factor for the scores; ``None`` means ``1 / sqrt(E)``.
        chunk_size: keys per block (any positive int).
        query_chunk_size: queries per block; ``None`` means ``chunk_size``.

    Returns:
        The attention output, in the query's dtype.

    Shape:
        - query: ``(..., L, E)``, key: ``(..., S, E)``, value: ``(..., S, Ev)``
        - output: ``(..., L, Ev)``
    """
    _check_inputs(query, key, value, attn_mask, is_causal, 0.0, scale)
    _check_chunking(chunk_size, None, is_causal)
    query_chunk_size = chunk_size if query_chunk_size is None else query_chunk_size
    v.require_int("query_chunk_size", query_chunk_size)
    if attn_mask is not None and attn_mask.requires_grad:
        raise ValueError(
            "memory_efficient_attention gives no gradient to attn_mask, but this float mask "
            "requires grad; pass attn_mask.detach(), or use qkv.scaled_dot_product_attention "
            "to learn the mask"
        )
    scale = v.default_scale(query.shape[-1]) if scale is None else float(scale)
    return _MemoryEfficientAttention.apply(
        query, key, value, attn_mask, bool(is_causal), scale, chunk_size, query_chunk_size
    )


class _MemoryEfficientAttention(torch.autograd.Function):
    """Saves ``(query, key, value, out, lse)``: nothing of size ``L x S``."""

    @staticmethod
    def forward(ctx, query, key, value, attn_mask, is_causal, scale, block_k, block_q):
        out, lse2 = _forward(query, key, value, attn_mask, is_causal, scale, block_k, block_q)
        ctx.save_for_backward(query, key, value, out, lse2)
        ctx.attn_mask, ctx.is_causal, ctx.scale = attn_mask, is_causal, scale
        ctx.blocks = (block_k, block_q)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        query, key, value, out, lse2 = ctx.saved_tensors
        dq, dk, dv = _backward(
            query, key, value, out, lse2, grad_out, ctx.attn_mask, ctx.is_causal, ctx.scale, *ctx.blocks
        )
        return dq, dk, dv, None, None, None, None, None


def _setup(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor]):
    """Common batch shape, float32-or-wider work dtype and the mask broadcast to ``(..., L, S)``."""
    L, S = query.shape[-2], key.shape[-2]
    batch = v.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    # Accumulate in float32 at least: half-precision running sums lose digits fast.
    work = torch.promote_types(query.dtype, torch.float32)
    if attn_mask is not None:
        attn_mask = attn_mask.broadcast_to(*attn_mask.shape[:-2], L, S)
    return batch, work, attn_mask


def _forward(query, key, value, attn_mask, is_causal, scale, block_k, block_q) -> Tuple[Tensor, Tensor]:
    """Online softmax (base 2, as in :func:`qkv.chunked_attention`); returns ``(out, lse2)``.

    ``lse2 = m + log2(l)`` per query, in the base-2 units of the scaled scores; ``+inf``
    for a fully masked row, so that the backward pass's ``exp2(s - lse2)`` is 0 there.
    """
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    batch, work, attn_mask = _setup(query, key, value, attn_mask)
    q_scale = scale * _LOG2_E
    out = torch.empty(*batch, L, value.shape[-1], dtype=query.dtype, device=query.device)
    lse2 = torch.empty(*batch, L, 1, dtype=work, device=query.device)
    for i0 in range(0, L, block_q):
        i1 = min(i0 + block_q, L)
        q = (query[..., i0:i1, :].to(work) * q_scale).expand(*batch, i1 - i0, E)
        m = torch.full((*batch, i1 - i0, 1), float("-inf"), dtype=work, device=query.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(*batch, i1 - i0, value.shape[-1], dtype=work, device=query.device)
        for j0 in range(0, min(S, i1) if is_causal else S, block_k):
            j1 = min(j0 + block_k, S)
            s = _mask_block(q @ key[..., j0:j1, :].to(work).transpose(-2, -1), attn_mask,
                            is_causal, None, (i0, i1), (j0, j1))
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            m_safe = m_new.masked_fill(m_new == float("-inf"), 0.0)  # no -inf - -inf
            p = (s - m_safe).exp2()
            correction = (m - m_safe).exp2()
            l = l * correction + p.sum(dim=-1, keepdim=True)
            acc = acc * correction + p @ value[..., j0:j1, :].to(work)
            m = m_new
        out[..., i0:i1, :] = (acc / l.masked_fill(l == 0, 1.0)).to(query.dtype)
        # l = 0: no allowed key. lse = +inf makes every recomputed weight of the row 0.
        lse2[..., i0:i1, :] = torch.where(l == 0, float("inf"), m + l.log2())
    return out, lse2


def _backward(query, key, value, out, lse2, grad_out, attn_mask, is_causal, scale, block_k, block_q):
    """Gradients of query, key and value, one ``(block_q, block_k)`` tile of weights at a time."""
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    batch, work, attn_mask = _setup(query, key, value, attn_mask)
    q_scale = scale * _LOG2_E
    q_all = query.to(work).expand(*batch, L, E)
    do_all = grad_out.to(work).expand(*batch, L, value.shape[-1])
    # rowsum(dO * O) = rowsum(P * dP): the softmax backward's correction, with no weights.
    delta = (do_all * out.to(work)).sum(dim=-1, keepdim=True)
    dq = torch.zeros(*batch, L, E, dtype=work, device=query.device)
    dk = torch.zeros(*batch, S, E, dtype=work, device=query.device)
    dv = torch.zeros(*batch, S, value.shape[-1], dtype=work, device=query.device)
    for j0 in range(0, S, block_k):
        j1 = min(j0 + block_k, S)
        k = key[..., j0:j1, :].to(work)
        vv = value[..., j0:j1, :].to(work)
        # Under is_causal query i sees keys 0..i: query blocks ending before j0 see none of these keys.
        for i0 in range((j0 // block_q) * block_q if is_causal else 0, L, block_q):
            i1 = min(i0 + block_q, L)
            q, do = q_all[..., i0:i1, :], do_all[..., i0:i1, :]
            s = _mask_block((q * q_scale) @ k.transpose(-2, -1), attn_mask, is_causal, None,
                            (i0, i1), (j0, j1))
            p = (s - lse2[..., i0:i1, :]).exp2()  # the weights of this tile, recomputed
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do
            ds = p * (do @ vv.transpose(-2, -1) - delta[..., i0:i1, :])
            dq[..., i0:i1, :] += (ds @ k) * scale
            dk[..., j0:j1, :] += (ds.transpose(-2, -1) @ q) * scale
    return (_sum_to(dq, query), _sum_to(dk, key), _sum_to(dv, value))


def _sum_to(grad: Tensor, like: Tensor) -> Tensor:
    """Reduce a gradient computed at the broadcast batch shape back to ``like``'s shape and dtype."""
    extra = grad.dim() - like.dim()
    if extra:
        grad = grad.sum(dim=tuple(range(extra)))
    dims = tuple(i for i, n in enumerate(like.shape) if n == 1 and grad.shape[i] != 1)
    if dims:
        grad = grad.sum(dim=dims, keepdim=True)
    return grad.to(like.dtype)
