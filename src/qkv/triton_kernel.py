"""A fused attention forward kernel in Triton, FlashAttention-2 style.

Imported only by :func:`qkv.efficient.triton_attention`, on first use, because it
needs the ``triton`` package and a CUDA GPU. The algorithm is the one of
:func:`qkv.chunked_attention`, mapped onto the GPU:

- one *program* per block of ``BLOCK_M`` queries of one (batch, head): the grid
  is ``(ceil(L / BLOCK_M), B * H)``;
- the program loads its queries once, then walks over the keys and values in
  blocks of ``BLOCK_N``, keeping the running maximum ``m``, the running sum ``l``
  and the output accumulator ``acc`` in registers, in float32;
- the scores of a block are ``tl.dot(q, k^T)`` on the tensor cores and never
  touch global memory, which is where the time of the unfused version goes;
- ``exp2`` replaces ``exp`` (the scale absorbs ``log2 e``), one multiply cheaper;
- under ``is_causal`` the key blocks after the diagonal are never visited, and
  only the blocks that straddle the diagonal (or the end of the keys) pay for a
  mask: the loop is split into an unmasked part and a masked part; the query
  blocks with the most keys to visit are started first;
- it also writes each query's log-sum-exp (base 2), all that the backward pass
  (:mod:`qkv.triton_backward`) needs to recompute the weights.

The launch parameters are fixed per head dimension (:func:`forward_config`)
rather than autotuned: autotuning compiles and times every candidate for every
new shape, which costs more than it gains in a course's benchmark run.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import torch
import triton
import triton.language as tl
from torch import Tensor

_LOG2_E = 1.4426950408889634  # exp(x) = exp2(x * log2(e))
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)
SUPPORTED_HEAD_DIMS = (16, 32, 64, 128)


@triton.jit
def _visit_keys(
    acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_ke, stride_vs, stride_ve,
    offs_m, start, stop, S, qk_scale,
    MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
):
    # Online-softmax update of (acc, l_i, m_i) with the key blocks in [start, stop).
    offs_n = tl.arange(0, BLOCK_N)
    offs_e = tl.arange(0, HEAD_DIM)
    for start_n in range(start, stop, BLOCK_N):
        cols = start_n + offs_n
        k_ptrs = k_base + cols[:, None] * stride_ks + offs_e[None, :] * stride_ke
        v_ptrs = v_base + cols[:, None] * stride_vs + offs_e[None, :] * stride_ve
        if MASKED:
            k = tl.load(k_ptrs, mask=cols[:, None] < S, other=0.0)
            v = tl.load(v_ptrs, mask=cols[:, None] < S, other=0.0)
        else:
            k = tl.load(k_ptrs)
            v = tl.load(v_ptrs)
        # Scores in log2 units, accumulated in float32 by the tensor cores.
        s = tl.dot(q, tl.trans(k)) * qk_scale
        if MASKED:
            keep = cols[None, :] < S
            if IS_CAUSAL:
                keep = keep & (cols[None, :] <= offs_m[:, None])
            s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        if MASKED:
            # A row that has seen only masked keys keeps m = -inf: shift by 0 there (no NaN).
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        else:
            m_safe = m_new  # every score of an unmasked block is finite
        p = tl.exp2(s - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)  # the rescale of everything accumulated so far
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, l_i, m_i


# Launch parameters of the forward kernel per (head dimension, is_causal), chosen by the
# benchmark's sweep on an H100, the GPU chapter 8 plots (benchmarks/attention_gpu.py records
# the sweep and its winners, "tuned", in its results file). BLOCK_M queries per program,
# BLOCK_N keys per step (a divisor of BLOCK_M: the causal split relies on it).
FORWARD_CONFIGS = {
    (64, False): {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 4},
    (64, True): {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3},
    (128, False): {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3},
    (128, True): {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3},
}


def forward_config(head_dim: int, is_causal: bool = False) -> dict:
    """Launch parameters of the forward kernel (head dims up to 64 use those of 64)."""
    return dict(FORWARD_CONFIGS[(64 if head_dim <= 64 else 128, bool(is_causal))])


def launch(kernel, grid, args: tuple, constants: dict, config: dict, fallbacks: Sequence[dict] = ()):
    """Launch ``kernel`` with ``config``; on a resource error (shared memory, registers) try the fallbacks.

    A configuration that fits one GPU may not fit another; the error would otherwise
    surface only on that GPU, in the middle of a benchmark.
    """
    from triton.runtime.errors import OutOfResources

    for i, cfg in enumerate([config, *fallbacks]):
        try:
            return kernel[grid(cfg)](*args, **constants, **cfg)
        except OutOfResources:
            if i == len(fallbacks):
                raise


@triton.jit
def _attention_forward_kernel(
    Q, K, V, O, LSE,
    stride_qb, stride_qh, stride_ql, stride_qe,
    stride_kb, stride_kh, stride_ks, stride_ke,
    stride_vb, stride_vh, stride_vs, stride_ve,
    stride_ob, stride_oh, stride_ol, stride_oe,
    H, L, S, qk_scale,
    IS_CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid_m = tl.program_id(0)
    if IS_CAUSAL:
        # Under a causal mask the last query blocks have the most keys to visit: start them
        # first, so that the short blocks fill the GPU at the end instead of a long tail.
        pid_m = tl.num_programs(0) - 1 - pid_m
    # int64 offsets: B * H * L * E can pass 2**31 at long sequence lengths.
    pid_bh = tl.program_id(1).to(tl.int64)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_e = tl.arange(0, HEAD_DIM)
    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_ql + offs_e[None, :] * stride_qe
    q = tl.load(q_ptrs, mask=offs_m[:, None] < L, other=0.0)
    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    # Key blocks that need no mask: whole blocks before the end of the keys and,
    # under is_causal, before this query block's first row (upper-left diagonal).
    full_end = (S // BLOCK_N) * BLOCK_N
    stop = S
    if IS_CAUSAL:
        full_end = tl.minimum(full_end, pid_m * BLOCK_M)
        stop = tl.minimum(S, (pid_m + 1) * BLOCK_M)  # later blocks lie in the future: skipped
    acc, l_i, m_i = _visit_keys(
        acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_ke, stride_vs, stride_ve,
        offs_m, 0, full_end, S, qk_scale,
        MASKED=False, IS_CAUSAL=IS_CAUSAL, BLOCK_N=BLOCK_N, HEAD_DIM=HEAD_DIM,
    )
    acc, l_i, m_i = _visit_keys(
        acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_ke, stride_vs, stride_ve,
        offs_m, full_end, stop, S, qk_scale,
        MASKED=True, IS_CAUSAL=IS_CAUSAL, BLOCK_N=BLOCK_N, HEAD_DIM=HEAD_DIM,
    )
    # A row with no allowed key (l = 0) gets a zero output, as SDPA and qkv give.
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc / l_safe[:, None]
    # The log-sum-exp in base 2 for the backward pass; +inf for such a row makes its weights 0 there.
    lse = tl.where(l_i == 0.0, float("inf"), m_i + tl.log2(l_safe))
    tl.store(LSE + pid_bh * L + offs_m, lse, mask=offs_m < L)
    o_ptrs = O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_ol + offs_e[None, :] * stride_oe
    tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=offs_m[:, None] < L)


def attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    is_causal: bool = False,
    scale: Optional[float] = None,
    config: Optional[dict] = None,
) -> Tuple[Tensor, Tensor]:
    """Launch the kernel; see :func:`qkv.efficient.triton_attention` for the contract.

    Args:
        query: ``(B, H, L, E)`` CUDA tensor, float16 or bfloat16.
        key: ``(B, H, S, E)``, same dtype and device.
        value: ``(B, H, S, E)``, same dtype and device.
        is_causal: upper-left causal mask.
        scale: factor for the scores; ``None`` means ``1 / sqrt(E)``.
        config: launch parameters (``BLOCK_M``, ``BLOCK_N`` and optionally ``num_warps``,
            ``num_stages``) instead of :func:`forward_config`'s; ``BLOCK_M`` must be a
            multiple of ``BLOCK_N``. Used by tests (small blocks in Triton's CPU
            interpreter) and by the benchmark's sweep.

    Returns:
        ``(out, lse)``: the ``(B, H, L, E)`` output in the inputs' dtype and the
        ``(B, H, L)`` float32 log-sum-exp of each query's scaled scores in base 2.
    """
    check_inputs(query, key, value)
    B, H, L, E = query.shape
    S = key.shape[2]
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    out = torch.empty(B, H, L, E, dtype=query.dtype, device=query.device)
    lse = torch.empty(B, H, L, dtype=torch.float32, device=query.device)
    if L == 0 or B * H == 0:
        return out, lse
    config = dict(config or forward_config(E, is_causal))
    if config["BLOCK_M"] % config["BLOCK_N"]:
        raise ValueError(f"BLOCK_M must be a multiple of BLOCK_N, got {config}")
    smaller = dict(config, num_stages=2)
    launch(
        _attention_forward_kernel,
        lambda cfg: (triton.cdiv(L, cfg["BLOCK_M"]), B * H),
        (query, key, value, out, lse,
         *query.stride(), *key.stride(), *value.stride(), *out.stride(), H, L, S, scale * _LOG2_E),
        {"IS_CAUSAL": bool(is_causal), "HEAD_DIM": E},
        config, [smaller],
    )
    return out, lse


def check_inputs(query: Tensor, key: Tensor, value: Tensor) -> None:
    """The kernels' own limits (dtype, 4-D, no broadcasting, head dimension), in plain words."""
    if query.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"triton_attention supports float16 and bfloat16, got {query.dtype}")
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise ValueError(
            f"triton_attention needs 4-D tensors query (B, H, L, E), key (B, H, S, E), "
            f"value (B, H, S, E); got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
        )
    B, H, L, E = query.shape
    if key.shape[:2] != (B, H) or value.shape[:2] != (B, H) or value.shape[-1] != E:
        raise ValueError(
            f"triton_attention needs key and value of shape (B, H, S, E) = (B={B}, H={H}, S, E={E}) "
            f"without broadcasting; got key {tuple(key.shape)} and value {tuple(value.shape)}"
        )
    if E not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"triton_attention supports E in {SUPPORTED_HEAD_DIMS}, got E={E}")
