"""Scaled dot-product attention, written out step by step, and why it scales (chapter 4).

This is the course's reference: it follows
:func:`torch.nn.functional.scaled_dot_product_attention` (same argument names,
same mask convention, same results) but materialises the ``L x S`` weight matrix
on purpose, so that it can be returned, plotted and taught.

Mask convention (SDPA's, used everywhere in ``qkv``): a bool mask is ``True``
where attention is **allowed**. ``nn.MultiheadAttention`` uses the opposite
convention; convert with :func:`qkv.masking.from_torch_mask`.

Fully masked rows (a query that may attend to nothing) get all-zero weights and
a zero output, as PyTorch's SDPA does since 2.5, rather than NaN. NaN or infinite
values in the inputs are not refused: they propagate to the rows they touch, as in
torch's SDPA (a check would cost a pass over every input on every call).

Why ``1 / sqrt(E)``: :func:`dot_product_variance` measures that ``q·k`` of unit
random vectors has variance ``E``, which the scale brings back to 1.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _validate as v
from .lookup import attention_weights, softmax
from .masking import causal_mask

__all__ = [
    "attention_scores",
    "dot_product_variance",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_with_weights",
]

_LEGEND = "query (..., L, E), key (..., S, E), value (..., S, Ev)"


def _check_inputs(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor],
    is_causal: bool,
    dropout_p: float,
    scale: Optional[float],
) -> None:
    v.check_attention_inputs(("query", "key", "value"), (query, key, value), _LEGEND)
    batch = v.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    _check_options(query, key, attn_mask, is_causal, scale, batch)
    v.require_probability("dropout_p", dropout_p)


def _check_options(
    query: Tensor,
    key: Tensor,
    attn_mask: Optional[Tensor],
    is_causal: bool,
    scale: Optional[float],
    batch: Tuple[int, ...],
) -> None:
    """The mask (or ``is_causal``) and the scale, against queries and keys already checked."""
    v.require_flag("is_causal", is_causal)
    if is_causal and attn_mask is not None:
        raise ValueError(
            "pass either attn_mask or is_causal=True, not both; to combine a causal mask with "
            "another bool mask, pass attn_mask=qkv.causal_mask(L, S) & your_mask"
        )
    v.check_mask(attn_mask, query.shape[-2], key.shape[-2], query.dtype, query.device, batch)
    if scale is not None:
        v.require_positive_number("scale", scale, " or None (1/sqrt(E))")


def _check_scores(
    query: Tensor, key: Tensor, attn_mask: Optional[Tensor], is_causal: bool, scale: Optional[float]
) -> None:
    v.check_attention_inputs(("query", "key"), (query, key), _LEGEND)
    batch = v.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    _check_options(query, key, attn_mask, is_causal, scale, batch)


def attention_scores(
    query: Tensor,
    key: Tensor,
    attn_mask: Optional[Tensor] = None,
    is_causal: bool = False,
    scale: Optional[float] = None,
) -> Tensor:
    """Masked, scaled scores ``query @ key^T * scale`` (the softmax's input).

    Args:
        query: the queries, one row per position that asks.
        key: the keys, one row per position that may be looked at.
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
    _check_scores(query, key, attn_mask, is_causal, scale)
    L, S = query.shape[-2], key.shape[-2]
    scale = v.default_scale(query.shape[-1]) if scale is None else scale
    # Half precision overflows easily in the product; compute the scores in float32.
    work = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    batch = v.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    v.require_fits("the attention scores", (*batch, L, S), work, query.device)
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
            opposite). Float (the query's dtype): added to the scores. An integer
            mask, or a float mask of only 0s and 1s (a bool mask in disguise, whose
            1s would hide nothing), is refused: pass ``attn_mask.bool()``.
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


def dot_product_variance(
    d_k: int,
    n_samples: int,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float32,
) -> float:
    """Measured variance of ``q·k`` for ``q, k`` with independent N(0, 1) components.

    Each of the ``d_k`` products ``q_i k_i`` has mean 0 and variance
    ``E[q_i^2] E[k_i^2] = 1``, and the products are independent, so the sum has
    variance ``d_k``. This function estimates it from ``n_samples`` pairs, so
    its answer is ``d_k`` up to sampling error: the relative standard error is
    about ``sqrt((2 + 6 / d_k) / n_samples)``.

    Args:
        d_k: length of the vectors (positive int).
        n_samples: number of independent (q, k) pairs (at least 2).
        generator: the source of randomness; the samples are drawn on its
            device, so the same seed gives the same answer.
        dtype: floating-point dtype of the samples.

    Returns:
        The unbiased sample variance of the ``n_samples`` dot products.
    """
    v.require_int("d_k", d_k)
    v.require_int("n_samples", n_samples, minimum=2)
    v.require_instance("generator", generator, torch.Generator, "a torch.Generator",
                       "; make one with torch.Generator(device).manual_seed(0)")
    v.require_float_dtype("dtype", dtype)
    v.require_fits(f"one pair of d_k={d_k} vectors", (2, d_k), dtype, generator.device,
                   hint="d_k is the width of one query, typically 64 to 256")
    v.require_fits(f"the n_samples={n_samples} dot products", (n_samples,), dtype, generator.device,
                   hint="draw fewer samples: the estimate's error shrinks as 1/sqrt(n_samples)")
    # Draw in chunks of about 2**22 numbers so that d_k = 1024 with a million
    # samples does not need gigabytes at once.
    chunk = max(1, 2**22 // d_k)
    parts = []
    for start in range(0, n_samples, chunk):
        n = min(chunk, n_samples - start)
        q = torch.randn(n, d_k, generator=generator, device=generator.device, dtype=dtype)
        k = torch.randn(n, d_k, generator=generator, device=generator.device, dtype=dtype)
        parts.append((q * k).sum(dim=-1))
    return torch.cat(parts).var().item()
