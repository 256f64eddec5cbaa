"""The backward pass of :func:`qkv.triton_attention` in Triton, FlashAttention-2 style.

Imported only by :func:`qkv.efficient.triton_attention`, on first use. The forward
kernel (:mod:`qkv.triton_kernel`) saved the output ``O`` and, per query, the
log-sum-exp ``lse`` of its scaled scores (base 2). Nothing of size ``L x S`` was
kept: each kernel here recomputes the weights of one tile, ``P = exp2(S - lse)``,
exactly as :func:`qkv.memory_efficient_attention` does in plain PyTorch.

Three launches:

1. ``delta = rowsum(dO * O)`` per query (it equals ``rowsum(P * dP)``, the softmax
   backward's correction, and needs no weights);
2. one program per block of ``BLOCK_N1`` *keys* walks over the queries and
   accumulates ``dV += P^T dO`` and ``dK += dS^T Q`` in registers, with
   ``dS = P * (dP - delta)`` and ``dP = dO V^T``;
3. one program per block of ``BLOCK_M2`` *queries* walks over the keys and
   accumulates ``dQ += dS K``.

Splitting 2 and 3 recomputes ``P`` and ``dP`` once more (seven matrix products
instead of five) but needs no atomic additions: every program owns what it writes.
Under ``is_causal`` blocks wholly in the future are skipped and only the tiles on
the diagonal pay for a mask, as in the forward kernel.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
import triton
import triton.language as tl
from torch import Tensor

from .triton_kernel import _LOG2_E, launch


@triton.jit
def _preprocess(O, DO, Delta, L, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    bh = tl.program_id(1).to(tl.int64)
    offs_e = tl.arange(0, HEAD_DIM)
    ptrs = bh * L * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_e[None, :]
    rows = offs_m[:, None] < L
    o = tl.load(O + ptrs, mask=rows, other=0.0).to(tl.float32)
    do = tl.load(DO + ptrs, mask=rows, other=0.0).to(tl.float32)
    tl.store(Delta + bh * L + offs_m, tl.sum(o * do, 1), mask=offs_m < L)


@triton.jit
def _dkdv_steps(
    dk, dv, k, v, Q, DO, LSE, Delta, offs_n, start, stop, L, qk_scale,
    MASKED: tl.constexpr, BLOCK_M1: tl.constexpr, HEAD_DIM: tl.constexpr,
):
    # Queries [start, stop) in steps of BLOCK_M1, against this program's keys offs_n.
    offs_e = tl.arange(0, HEAD_DIM)
    for start_m in range(start, stop, BLOCK_M1):
        offs_m = start_m + tl.arange(0, BLOCK_M1)
        rows = offs_m < L
        q_t = tl.load(Q + offs_m[None, :] * HEAD_DIM + offs_e[:, None], mask=rows[None, :], other=0.0)
        # lse = +inf past the end of the queries: their recomputed weights are exp2(-inf) = 0.
        lse = tl.load(LSE + offs_m, mask=rows, other=float("inf"))
        p_t = tl.exp2(tl.dot(k, q_t) * qk_scale - lse[None, :])  # P^T, keys x queries
        if MASKED:  # upper-left causal: query i sees key j <= i
            p_t = tl.where(offs_m[None, :] >= offs_n[:, None], p_t, 0.0)
        do = tl.load(DO + offs_m[:, None] * HEAD_DIM + offs_e[None, :], mask=rows[:, None], other=0.0)
        dv += tl.dot(p_t.to(do.dtype), do)
        delta = tl.load(Delta + offs_m, mask=rows, other=0.0)
        ds_t = p_t * (tl.dot(v, tl.trans(do)) - delta[None, :])
        dk += tl.dot(ds_t.to(q_t.dtype), tl.trans(q_t))
    return dk, dv


@triton.jit
def _dkdv_kernel(
    Q, K, V, DO, DK, DV, LSE, Delta, L, S, qk_scale, sm_scale,
    IS_CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr,
):
    start_n = tl.program_id(0) * BLOCK_N1
    bh = tl.program_id(1).to(tl.int64)  # int64: B * H * L * E can pass 2**31
    offs_n = start_n + tl.arange(0, BLOCK_N1)
    offs_e = tl.arange(0, HEAD_DIM)
    kv = bh * S * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_e[None, :]
    cols = offs_n[:, None] < S
    k = tl.load(K + kv, mask=cols, other=0.0)
    v = tl.load(V + kv, mask=cols, other=0.0)
    dk = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    Q += bh * L * HEAD_DIM
    DO += bh * L * HEAD_DIM
    LSE += bh * L
    Delta += bh * L
    start = 0
    if IS_CAUSAL:
        # Queries before start_n see none of these keys; the next BLOCK_N1 straddle the diagonal.
        start = start_n
        dk, dv = _dkdv_steps(dk, dv, k, v, Q, DO, LSE, Delta, offs_n, start, tl.minimum(start + BLOCK_N1, L),
                             L, qk_scale, MASKED=True, BLOCK_M1=BLOCK_M1, HEAD_DIM=HEAD_DIM)
        start = start + BLOCK_N1
    dk, dv = _dkdv_steps(dk, dv, k, v, Q, DO, LSE, Delta, offs_n, start, L,
                         L, qk_scale, MASKED=False, BLOCK_M1=BLOCK_M1, HEAD_DIM=HEAD_DIM)
    tl.store(DV + kv, dv.to(DV.dtype.element_ty), mask=cols)
    tl.store(DK + kv, (dk * sm_scale).to(DK.dtype.element_ty), mask=cols)


@triton.jit
def _dq_steps(
    dq, q, do, lse, delta, K, V, offs_m, start, stop, S, qk_scale,
    MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr, BLOCK_N2: tl.constexpr, HEAD_DIM: tl.constexpr,
):
    # Keys [start, stop) in steps of BLOCK_N2, against this program's queries offs_m.
    offs_e = tl.arange(0, HEAD_DIM)
    for start_n in range(start, stop, BLOCK_N2):
        offs_n = start_n + tl.arange(0, BLOCK_N2)
        ptrs = offs_n[None, :] * HEAD_DIM + offs_e[:, None]
        if MASKED:
            k_t = tl.load(K + ptrs, mask=offs_n[None, :] < S, other=0.0)
            v_t = tl.load(V + ptrs, mask=offs_n[None, :] < S, other=0.0)
        else:
            k_t = tl.load(K + ptrs)
            v_t = tl.load(V + ptrs)
        p = tl.exp2(tl.dot(q, k_t) * qk_scale - lse[:, None])
        if MASKED:
            keep = offs_n[None, :] < S
            if IS_CAUSAL:
                keep = keep & (offs_n[None, :] <= offs_m[:, None])
            p = tl.where(keep, p, 0.0)
        ds = p * (tl.dot(do, v_t) - delta[:, None])
        dq += tl.dot(ds.to(k_t.dtype), tl.trans(k_t))
    return dq


@triton.jit
def _dq_kernel(
    Q, K, V, DO, DQ, LSE, Delta, L, S, qk_scale, sm_scale,
    IS_CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M2: tl.constexpr, BLOCK_N2: tl.constexpr,
):
    start_m = tl.program_id(0) * BLOCK_M2
    bh = tl.program_id(1).to(tl.int64)
    offs_m = start_m + tl.arange(0, BLOCK_M2)
    offs_e = tl.arange(0, HEAD_DIM)
    qo = bh * L * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_e[None, :]
    rows = offs_m[:, None] < L
    q = tl.load(Q + qo, mask=rows, other=0.0)
    do = tl.load(DO + qo, mask=rows, other=0.0)
    lse = tl.load(LSE + bh * L + offs_m, mask=offs_m < L, other=float("inf"))
    delta = tl.load(Delta + bh * L + offs_m, mask=offs_m < L, other=0.0)
    K += bh * S * HEAD_DIM
    V += bh * S * HEAD_DIM
    dq = tl.zeros([BLOCK_M2, HEAD_DIM], dtype=tl.float32)
    # Whole key blocks that need no mask, then the ones on the diagonal or at the end of the keys.
    full_end = (S // BLOCK_N2) * BLOCK_N2
    stop = S
    if IS_CAUSAL:
        full_end = tl.minimum(full_end, start_m)
        stop = tl.minimum(S, start_m + BLOCK_M2)
    dq = _dq_steps(dq, q, do, lse, delta, K, V, offs_m, 0, full_end, S, qk_scale,
                   MASKED=False, IS_CAUSAL=IS_CAUSAL, BLOCK_N2=BLOCK_N2, HEAD_DIM=HEAD_DIM)
    dq = _dq_steps(dq, q, do, lse, delta, K, V, offs_m, full_end, stop, S, qk_scale,
                   MASKED=True, IS_CAUSAL=IS_CAUSAL, BLOCK_N2=BLOCK_N2, HEAD_DIM=HEAD_DIM)
    tl.store(DQ + qo, (dq * sm_scale).to(DQ.dtype.element_ty), mask=rows)


# Block sizes of the two gradient kernels per head dimension (BLOCK_N1 a multiple of
# BLOCK_M1, BLOCK_M2 of BLOCK_N2), chosen by the benchmark's sweep on an H100
# (benchmarks/attention_gpu.py; the results file records the sweep).
BACKWARD_CONFIGS = {
    64: {"BLOCK_M1": 64, "BLOCK_N1": 64, "BLOCK_M2": 64, "BLOCK_N2": 64, "num_warps": 4, "num_stages": 3},
    128: {"BLOCK_M1": 64, "BLOCK_N1": 128, "BLOCK_M2": 128, "BLOCK_N2": 64, "num_warps": 8, "num_stages": 3},
}


def backward_config(head_dim: int) -> dict:
    """Block sizes of the gradient kernels for one head dimension (those of 64 up to 64)."""
    return dict(BACKWARD_CONFIGS[64 if head_dim <= 64 else 128])


def attention_backward(
    query: Tensor, key: Tensor, value: Tensor, out: Tensor, lse: Tensor, grad_out: Tensor,
    is_causal: bool, scale: float, config: Optional[dict] = None,
) -> Tuple[Tensor, Tensor, Tensor]:
    """Gradients of ``query``, ``key`` and ``value`` from the forward's ``out`` and ``lse``.

    Args:
        query, key, value: the forward's inputs, ``(B, H, L, E)`` and ``(B, H, S, E)``.
        out: the forward's output ``(B, H, L, E)``.
        lse: the forward's ``(B, H, L)`` float32 base-2 log-sum-exp.
        grad_out: gradient of the loss with respect to ``out``.
        is_causal: as in the forward.
        scale: the forward's score scale (not ``None``).
        config: block sizes instead of :func:`backward_config`'s (tests use small ones).

    Returns:
        ``(dq, dk, dv)`` in the inputs' dtype, contiguous.
    """
    q, k, v, o, do = (t.contiguous() for t in (query, key, value, out, grad_out))
    B, H, L, E = q.shape
    S = k.shape[2]
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    if L == 0 or S == 0 or B * H == 0:
        return dq.zero_(), dk.zero_(), dv.zero_()
    cfg = dict(config or backward_config(E))
    if cfg["BLOCK_N1"] % cfg["BLOCK_M1"] or cfg["BLOCK_M2"] % cfg["BLOCK_N2"]:
        raise ValueError(f"BLOCK_N1 must be a multiple of BLOCK_M1 and BLOCK_M2 of BLOCK_N2, got {cfg}")
    launch_cfg = {k_: cfg[k_] for k_ in ("num_warps", "num_stages") if k_ in cfg}
    fallback = dict(launch_cfg, num_stages=1)
    delta = torch.empty(B, H, L, dtype=torch.float32, device=q.device)
    _preprocess[(triton.cdiv(L, 64), B * H)](o, do, delta, L, HEAD_DIM=E, BLOCK_M=64)
    qk_scale = scale * _LOG2_E
    common = {"IS_CAUSAL": bool(is_causal), "HEAD_DIM": E}
    launch(_dkdv_kernel, lambda c: (triton.cdiv(S, cfg["BLOCK_N1"]), B * H),
           (q, k, v, do, dk, dv, lse, delta, L, S, qk_scale, scale),
           dict(common, BLOCK_M1=cfg["BLOCK_M1"], BLOCK_N1=cfg["BLOCK_N1"]), launch_cfg, [fallback])
    launch(_dq_kernel, lambda c: (triton.cdiv(L, cfg["BLOCK_M2"]), B * H),
           (q, k, v, do, dq, lse, delta, L, S, qk_scale, scale),
           dict(common, BLOCK_M2=cfg["BLOCK_M2"], BLOCK_N2=cfg["BLOCK_N2"]), launch_cfg, [fallback])
    return dq, dk, dv


class TritonAttention(torch.autograd.Function):
    """:func:`qkv.triton_attention` with gradients: saves ``(q, k, v, out, lse)``, nothing ``L x S``."""

    @staticmethod
    def forward(ctx, query, key, value, is_causal, scale):
        from .triton_kernel import attention_forward

        out, lse = attention_forward(query, key, value, is_causal, scale)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.is_causal = is_causal
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad_out):
        query, key, value, out, lse = ctx.saved_tensors
        dq, dk, dv = attention_backward(query, key, value, out, lse, grad_out, ctx.is_causal, ctx.scale)
        return dq, dk, dv, None, None
