"""Attention that never materialises the ``L x S`` matrix: the online softmax.

FlashAttention's algorithm in plain PyTorch. Keys and values are visited one
chunk at a time; for each query we keep a running maximum ``m``, a running
softmax denominator ``l`` and a running weighted sum ``acc`` of values. When a
new chunk raises the maximum from ``m`` to ``m'``, everything accumulated so far
was computed relative to ``m`` and is multiplied by ``exp(m - m')``: that
rescale is what makes the result exact rather than approximate.

Queries are processed in blocks of the same size, so the largest temporary is
``(..., chunk_size, chunk_size)`` and the extra memory does not grow with ``L * S``.

Also here: :func:`kv_cache_step` (one decoding step with a key/value cache) and
:func:`triton_attention`, a fused GPU kernel used only when CUDA and Triton are
present (its code lives in :mod:`qkv.triton_kernel` and :mod:`qkv.triton_backward`,
imported on first use).
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _validate as v
from .scaling import _check_inputs, scaled_dot_product_attention

__all__ = [
    "chunked_attention",
    "kv_cache_step",
    "triton_attention",
]

_LOG2_E = 1.4426950408889634  # log2(e): exp(x) = exp2(x * _LOG2_E)


def chunked_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor] = None,
    is_causal: bool = False,
    scale: Optional[float] = None,
    chunk_size: int = 256,
    window: Optional[int] = None,
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
        window: with ``is_causal=True``, a sliding window: query ``i`` sees only
            keys ``i - window < j <= i`` (as ``qkv.sliding_window_mask``), and key
            chunks wholly outside the band are skipped, so the work grows as
            ``L * window`` instead of ``L * S``.

    Returns:
        The attention output.

    Shape:
        - query: ``(..., L, E)``, key: ``(..., S, E)``, value: ``(..., S, Ev)``
        - output: ``(..., L, Ev)``
    """
    _check_inputs(query, key, value, attn_mask, is_causal, 0.0, scale)
    _check_chunking(chunk_size, window, is_causal)
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    # Scores are kept in base 2: exp(x) = exp2(x * log2(e)), and exp2 is usually the cheaper
    # function (FlashAttention does the same on GPUs). Folding log2(e) into the scale makes
    # s, m and every correction base-2 quantities.
    q_scale = (v.default_scale(E) if scale is None else scale) * _LOG2_E
    batch = v.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    # Accumulate in float32 at least: half-precision running sums lose digits fast.
    acc_dtype = torch.promote_types(query.dtype, torch.float32)
    if attn_mask is not None:
        attn_mask = attn_mask.broadcast_to(*attn_mask.shape[:-2], L, S)
    out = torch.empty(*batch, L, value.shape[-1], dtype=query.dtype, device=query.device)

    for i0 in range(0, L, chunk_size):
        i1 = min(i0 + chunk_size, L)
        # Expanded to the full batch: value (or key) may have more batch dims than query,
        # and the in-place updates below need the scores at their final shape.
        q = (query[..., i0:i1, :].to(acc_dtype) * q_scale).expand(*batch, i1 - i0, E)
        m = torch.full((*batch, i1 - i0, 1), float("-inf"), dtype=acc_dtype, device=query.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(*batch, i1 - i0, value.shape[-1], dtype=acc_dtype, device=query.device)
        # Under a causal mask query i sees keys 0..i, so later key chunks are skipped;
        # with a window it sees nothing before i - window + 1 either.
        start = 0 if window is None else max(0, i0 - window + 1)
        stop = min(S, i1) if is_causal else S
        for j0 in range(start, stop, chunk_size):
            j1 = min(j0 + chunk_size, stop)
            s = q @ key[..., j0:j1, :].to(acc_dtype).transpose(-2, -1)
            s = _mask_block(s, attn_mask, is_causal, window, (i0, i1), (j0, j1))
            m = _online_softmax_step(m, l, acc, s, value[..., j0:j1, :].to(acc_dtype))
        # A fully masked row has l = 0 and acc = 0: dividing by 1 leaves it zero, as SDPA does.
        out[..., i0:i1, :] = (acc / l.masked_fill(l == 0, 1.0)).to(query.dtype)
    return out


def _mask_block(
    s: Tensor,
    attn_mask: Optional[Tensor],
    is_causal: bool,
    window: Optional[int],
    rows: Tuple[int, int],
    cols: Tuple[int, int],
) -> Tensor:
    """Set to ``-inf`` the scores of block ``s`` (queries ``rows``, keys ``cols``) that may not be seen."""
    (i0, i1), (j0, j1) = rows, cols
    if is_causal and (j1 > i0 + 1 or (window is not None and j0 < i1 - window)):
        r = torch.arange(i0, i1, device=s.device)[:, None]
        c = torch.arange(j0, j1, device=s.device)[None, :]
        hidden = c > r
        if window is not None:
            hidden |= c <= r - window
        s.masked_fill_(hidden, float("-inf"))
    if attn_mask is not None:
        block = attn_mask[..., i0:i1, j0:j1]
        # Not in place: the mask may widen s to batch dims that only value has.
        if block.dtype == torch.bool:
            s = s.masked_fill(~block, float("-inf"))
        else:
            s = s + block.to(s.dtype) * _LOG2_E
    return s


def _online_softmax_step(m: Tensor, l: Tensor, acc: Tensor, s: Tensor, value: Tensor) -> Tensor:
    """Fold one chunk of base-2 scores ``s`` and its ``value`` rows into ``l`` and ``acc``.

    ``l`` and ``acc`` are updated in place; ``s`` is overwritten. Returns the new running maximum.
    """
    # The shift m cancels between acc and l: the output does not depend on it, so it
    # is a constant for autograd (detach), and s may then be overwritten in place.
    m_new = torch.maximum(m, s.detach().amax(dim=-1, keepdim=True))
    # Rows that have seen only masked keys keep m = -inf; use 0 there so that
    # exp2() gives 0 instead of NaN (-inf - -inf).
    m_safe = m_new.masked_fill(m_new == float("-inf"), 0.0)
    p = s.sub_(m_safe).exp2_()  # in place: no second block-sized tensor
    correction = (m - m_safe).exp2()
    # Rescale what was summed relative to m, then add this chunk (in place: l and
    # acc are ours, and autograd needs only the constant correction to go through).
    l.mul_(correction).add_(p.sum(dim=-1, keepdim=True))
    acc.mul_(correction).add_(p @ value)
    return m_new


def _check_chunking(chunk_size: object, window: object, is_causal: bool) -> None:
    v.require_int("chunk_size", chunk_size)
    if window is None:
        return
    v.require_int("window", window)
    if not is_causal:
        raise ValueError("window is a causal sliding window: pass is_causal=True with it")


def kv_cache_step(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    k_cache: Optional[Tensor] = None,
    v_cache: Optional[Tensor] = None,
    scale: Optional[float] = None,
) -> Tuple[Tensor, Tensor, Tensor]:
    """One step of causal decoding with a key/value cache: append, then attend.

    The keys and values of earlier tokens never change, so they are kept instead
    of being recomputed: the new tokens' keys and values are appended to the
    cache and the new queries attend to everything in it. For one new token
    this costs ``O(S * E)`` instead of the ``O(S^2 * E)`` of rerunning the prefix.

    The causal mask here is aligned to the **bottom right**: new token ``i`` sits
    at position ``P + i`` (``P`` cached tokens) and sees keys ``0..P+i``. SDPA's
    ``is_causal`` (and :func:`qkv.causal_mask`) align to the upper left, which
    for ``L < S`` would hide almost the whole prefix from the new queries.

    ``torch.cat`` copies the cache at every step; inference servers preallocate
    it instead. This version keeps the idea visible.

    Args:
        query: queries of the ``L`` new tokens (``L = 1`` when decoding one at a time).
        key: keys of the new tokens.
        value: values of the new tokens.
        k_cache: keys of the ``P`` earlier tokens, or ``None`` when there are none.
        v_cache: values of the earlier tokens, or ``None`` (with ``k_cache``).
        scale: factor for the scores; ``None`` means ``1 / sqrt(E)``.

    Returns:
        ``(output, k_cache, v_cache)``: the new tokens' attention output and the
        caches with the new keys and values appended (``S = P + L`` rows).

    Shape:
        - query: ``(B, H, L, E)``, key: ``(B, H, L, E)``, value: ``(B, H, L, Ev)``
        - k_cache: ``(B, H, P, E)``, v_cache: ``(B, H, P, Ev)``
        - output: ``(B, H, L, Ev)``, returned caches ``(B, H, P + L, E)`` and ``(B, H, P + L, Ev)``
    """
    _check_cache_step(query, key, value, k_cache, v_cache)
    if k_cache is not None:
        key = torch.cat([k_cache, key], dim=-2)
        value = torch.cat([v_cache, value], dim=-2)
    L, S = query.shape[-2], key.shape[-2]
    # Bottom-right alignment: new token i may see keys 0 .. S - L + i. One new token sees all.
    mask = None if L == 1 else torch.ones(L, S, dtype=torch.bool, device=query.device).tril(S - L)
    out = scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale)
    return out, key, value


def _check_cache_step(
    query: Tensor, key: Tensor, value: Tensor, k_cache: Optional[Tensor], v_cache: Optional[Tensor]
) -> None:
    legend = "(..., L, E) for query and key, (..., L, Ev) for value"
    names, tensors = ["query", "key", "value"], [query, key, value]
    if (k_cache is None) != (v_cache is None):
        raise ValueError("k_cache and v_cache must both be tensors or both be None")
    if k_cache is not None:
        names, tensors = names + ["k_cache", "v_cache"], tensors + [k_cache, v_cache]
    for name, t in zip(names, tensors):
        v.require_float_tensor(name, t, legend, min_dim=2)
    # Before torch.cat, which would promote dtypes or fail on devices in its own words.
    v.require_same(names, tensors, "dtype")
    v.require_same(names, tensors, "device")
    if query.shape[-2] != key.shape[-2]:
        raise ValueError(
            f"query and key must hold the same new tokens, shapes (..., L, E); got query "
            f"{v.shape_str(query)} and key {v.shape_str(key)}"
        )
    if k_cache is None:
        return
    for name, cache, new in (("k_cache", k_cache, key), ("v_cache", v_cache, value)):
        if cache.dim() != new.dim() or cache.shape[:-2] + cache.shape[-1:] != new.shape[:-2] + new.shape[-1:]:
            raise ValueError(
                f"{name} must have the shape of the new tokens' keys/values except for the "
                f"sequence dim (-2); got {name} {v.shape_str(cache)} and new {v.shape_str(new)}"
            )


def triton_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    is_causal: bool = False,
    scale: Optional[float] = None,
) -> Tensor:
    """Fused attention forward pass on the GPU (a Triton kernel, FlashAttention-2 style).

    The same online softmax as :func:`chunked_attention`, but each block of
    queries is one GPU program that keeps ``m``, ``l`` and ``acc`` in registers
    and never writes a score to memory. It is differentiable: the backward pass
    is a second set of Triton kernels (:mod:`qkv.triton_backward`) that recompute
    the weights from the saved log-sum-exp, as :func:`qkv.memory_efficient_attention`
    does in plain PyTorch. Needs CUDA and the ``triton`` package, which are imported
    only when this function is called.

    Args:
        query: queries, float16 or bfloat16, on a CUDA device.
        key: keys (same dtype and device).
        value: values (same dtype and device).
        is_causal: upper-left causal mask (as SDPA's); future key blocks are skipped.
        scale: factor for the scores; ``None`` means ``1 / sqrt(E)``.

    Returns:
        The attention output, in the inputs' dtype.

    Raises:
        ValueError: the tensors are not on a CUDA device (or no GPU is available).
        RuntimeError: Triton is not available.

    Shape:
        - query: ``(B, H, L, E)``, key: ``(B, H, S, E)``, value: ``(B, H, S, E)``
          with ``E`` in 16, 32, 64, 128
        - output: ``(B, H, L, E)``
    """
    _check_inputs(query, key, value, None, is_causal, 0.0, scale)
    if not torch.cuda.is_available() or query.device.type != "cuda":
        # Wrong input (tensors on the CPU), so a ValueError, as for any other argument.
        raise ValueError(
            f"triton_attention needs query, key and value on a CUDA device; got query on "
            f"{query.device} (torch.cuda.is_available() = {torch.cuda.is_available()}). "
            f"Use qkv.chunked_attention on the CPU."
        )
    try:
        from . import triton_backward, triton_kernel
    except ImportError as err:  # triton missing, or too old for the kernel
        raise RuntimeError(
            f"triton_attention needs the triton package (pip install triton): {err}"
        ) from err
    triton_kernel.check_inputs(query, key, value)
    scale = v.default_scale(query.shape[-1]) if scale is None else float(scale)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)):
        return triton_backward.TritonAttention.apply(query, key, value, bool(is_causal), scale)
    return triton_kernel.attention_forward(query, key, value, is_causal, scale)[0]
