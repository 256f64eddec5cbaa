"""Checks for assignment 8: ``chunked_attention`` (exact attention with the online softmax,
chunk by chunk) here; ``kv_cache_step`` in :mod:`._kv_cache`, ``attention_backward`` and the
sliding cache in :mod:`._efficient_extra`."""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, List

import torch
from torch import Tensor

import qkv

from ._efficient_extra import ATTENTION_BACKWARD, SLIDING_KV_CACHE_STEP
from ._kv_cache import KV_CACHE_STEP
from .mistakes.attention import FILL_HINT, TORCH_ATTENTION, attention_mistakes, qkv_inputs
from .harness import (bool_mask, Case, checks_of, close, Exercise, half_case, Mistake, make_check,
                      randn, via_float32)
from .mistakes.efficient import chunk_by_chunk, online_variant, short_chunks
from . import _beyond as b, _beyond_experiments as x
from ._experiment import ExperimentCheck

__all__ = [
    "check_attention_backward",
    "check_chunked_attention",
    "check_fp16_overflow_rate",
    "check_kv_cache_step",
    "check_sliding_kv_cache_step",
    "check_streaming_attention",
]

_RESCALE_HINT = ("when a chunk raises the running maximum from m to m_new, multiply both the "
                 "running sum l and the running output acc by exp(m - m_new) before adding the "
                 "chunk")


def _close_or_empty_row(got: Any, expected: Any, rtol: float, atol: float) -> bool:
    """:func:`close`, except for the rows of a query with nothing to attend to.

    A row where ``expected`` is all NaN matches any row: a query left with nothing to
    attend to by a mistake (a causal mask that hides the diagonal leaves query 0 no key);
    an answer with that mistake leaves it NaN, zero or a plain average, depending on its
    fill and guards, and is the same mistake each time.

    A row where ``expected`` is exactly zero (the reference's answer for a query whose
    every key is masked; random values never sum to exactly 0) matches any finite row:
    the text asks for zeros, and a finite fill (``finfo.min``, which the hints allow)
    gives the mean of the values there instead; NaN, the 0 / 0 of an unguarded
    ``acc / l``, is refused.
    """
    if not (isinstance(got, Tensor) and isinstance(expected, Tensor)) or got.dim() == 0 \
            or tuple(got.shape) != tuple(expected.shape):
        return close(got, expected, rtol, atol)
    empty = torch.isnan(expected).all(dim=-1, keepdim=True)
    if 2 * int(empty.sum()) > empty.numel():
        # Most rows empty: a mistake whose output is NaN throughout (a softmax over the
        # queries with a masked column) would match any answer at all.
        return close(got, expected, rtol, atol)
    unseen = (expected == 0).all(dim=-1, keepdim=True) & torch.isfinite(got).all(
        dim=-1, keepdim=True)
    empty = empty | unseen
    return close(got.masked_fill(empty, 0.0), expected.masked_fill(empty, 0.0), rtol, atol)


def _sdpa_order(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Adapt an SDPA-ordered mistake to chunked_attention's arguments (no dropout_p)."""
    def adapted(query, key, value, attn_mask=None, is_causal=False, scale=None, chunk_size=256):
        return fn(query, key, value, attn_mask, 0.0, is_causal, scale)
    return adapted


def _negative_scores(gen, device, dtype):
    q, k, v = qkv_inputs(gen, device, dtype, (2,), 4, 7, 4, 3)
    # A shared component with opposite signs: every score is about -45**2 / sqrt(4).
    q, k = q.clone(), k.clone()
    q[..., 0], k[..., 0] = 45.0, -45.0
    return (q, k, v), {"chunk_size": 3}


def _later_chunk_far_above(gen, device, dtype):
    """L=4, S=7, chunk_size=3: the first chunk's scores near 0, the later chunks' near 800
    (a running maximum kept from the first chunk overflows: exp(800) is inf in float64)."""
    q, k, v = qkv_inputs(gen, device, dtype, (2,), 4, 7, 4, 3)
    q, k = q.clone(), k.clone()
    q[..., 0] = 40.0
    k[..., :3, 0], k[..., 3:, 0] = 0.0, 40.0
    return (q, k, v), {"chunk_size": 3}


def _hidden_first_chunk(gen, device, dtype):
    """A bool mask (L=4, S=7, chunk_size=3) that hides query 0's first chunk: its keys come
    later. (No row with no key at all: the fill the hints allow, finfo.min, gives such a row
    the mean of the values where PyTorch gives zeros.)"""
    q, k, v = qkv_inputs(gen, device, dtype, (2,), 4, 7, 4, 3)
    mask = bool_mask(gen, 4, 7)
    mask[0, :3], mask[0, 5] = False, True
    return (q, k, v), {"attn_mask": mask.to(device), "chunk_size": 3}


def _no_key_for_query_1(gen, device, dtype):
    """A bool mask (L=4, S=7, chunk_size=3) under which query 1 may attend to no key at all:
    the text asks for zeros there (as PyTorch gives)."""
    q, k, v = qkv_inputs(gen, device, dtype, (2,), 4, 7, 4, 3)
    mask = bool_mask(gen, 4, 7)
    mask[1] = False
    return (q, k, v), {"attn_mask": mask.to(device), "chunk_size": 3}


def _nan_where_no_key(query: Tensor, key: Tensor, value: Tensor, attn_mask: Any = None,
                      is_causal: bool = False, scale: Any = None, chunk_size: int = 256) -> Tensor:
    """The reference with NaN for a query whose every key is masked (an unguarded acc / l)."""
    out = qkv.chunked_attention(query, key, value, attn_mask=attn_mask, is_causal=is_causal,
                                scale=scale, chunk_size=chunk_size)
    if isinstance(attn_mask, Tensor) and attn_mask.dtype == torch.bool:
        out = out.masked_fill(~attn_mask.any(dim=-1, keepdim=True), float("nan"))
    return out


def _cases() -> List[Case]:
    def make(batch, L, S, E, Ev, chunk, mask=None, big=0.0, **kw):
        def build(gen, device, dtype):
            q, k, v = qkv_inputs(gen, device, dtype, batch, L, S, E, Ev, big)
            kwargs = dict(kw, chunk_size=chunk)
            if mask == "bool":
                kwargs["attn_mask"] = bool_mask(gen, L, S, device=device)
            elif mask == "bool per sequence":  # (B, 1, L, S): the chunks cut its last axis
                kwargs["attn_mask"] = torch.stack(
                    [bool_mask(gen, L, S, device=device) for _ in range(batch[0])])[:, None]
            elif mask == "float":
                kwargs["attn_mask"] = randn(gen, L, S, device=device, dtype=dtype)
            return (q, k, v), kwargs
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("batched input (B=2, H=2) with L=7, S=9, E=4, Ev=3, chunk_size=2",
             make((2, 2), 7, 9, 4, 3, 2), f32),
        Case("batched input (B=2) with L=5, S=8, E=6, Ev=5, chunk_size=3 and a bool mask",
             make((2,), 5, 8, 6, 5, 3, "bool"), f64),
        Case("batched input (B=2) with L=S=9, E=4, Ev=3, chunk_size=4 and is_causal=True",
             make((2,), 9, 9, 4, 3, 4, is_causal=True), f32),
        Case("batched input (B=2) with L=4 queries, S=7 keys, chunk_size=3 and is_causal=True "
             "(top left, as SDPA's: query i sees keys 0..i)",
             make((2,), 4, 7, 4, 3, 3, is_causal=True), f64),
        Case("batched input (B=2) with L=7 queries, S=4 keys, chunk_size=3 and is_causal=True "
             "(top left: queries 3..6 see every key)", make((2,), 7, 4, 4, 3, 3, is_causal=True),
             f64),
        Case("batched input (B=2, H=3) with L=5, S=7, E=4, Ev=3, chunk_size=3 and a bool mask "
             "of shape (B, 1, L, S), one per sequence", make((2, 3), 5, 7, 4, 3, 3,
                                                             "bool per sequence"), f64),
        Case("batched input (B=2) with L=6, S=7, E=5, Ev=2, chunk_size=3 and a float mask",
             make((2,), 6, 7, 5, 2, 3, "float"), f64),
        Case("unbatched input with L=5, S=6, E=8, Ev=3, chunk_size=2 and scale=0.4",
             make((), 5, 6, 8, 3, 2, scale=0.4), f64),
        Case("input with large logits (scores near 800), L=4, S=7, chunk_size=3",
             make((2,), 4, 7, 4, 3, 3, big=40.0), f64),
        Case("input whose later chunks score far above the first (near 800 against 0), L=4, "
             "S=7, chunk_size=3", _later_chunk_far_above, f64),
        Case("input with L=3, S=5 and chunk_size=16 (one chunk holds every key)",
             make((2,), 3, 5, 4, 3, 16), f32),
        Case("input whose scores are all very negative (near -1000), L=4, S=7, chunk_size=3",
             _negative_scores, f64),
        Case("a bool mask that hides every key of query 0's first chunk (its keys come later), "
             "L=4, S=7, chunk_size=3", _hidden_first_chunk, f64),
        Case("a bool mask under which query 1 may attend to no key at all (zeros for it), "
             "L=4, S=7, chunk_size=3", _no_key_for_query_1, f64),
        half_case("batched input (B=2) with L=5, S=7, E=4, Ev=3, chunk_size=3 and a bool mask",
                  make((2,), 5, 7, 4, 3, 3, "bool")),
    ]


_MISTAKES = [
    Mistake("a running maximum that is never updated after the first chunk (nothing is "
            "rescaled)", "take m_new = max(m, the chunk's maximum) at every chunk and rescale l "
            "and acc by exp(m - m_new): a later chunk scoring far above the first overflows "
            "exp otherwise", partial(online_variant, frozen=True)),
    Mistake("an online softmax that does not rescale its running sums", _RESCALE_HINT,
            partial(online_variant, rescale_l=False, rescale_acc=False)),
    Mistake("an online softmax that does not rescale its running sums (l is not rescaled)",
            _RESCALE_HINT, partial(online_variant, rescale_l=False)),
    Mistake("an online softmax that does not rescale its running sums (acc is not rescaled)",
            _RESCALE_HINT, partial(online_variant, rescale_acc=False)),
    # First of the guards: an answer still failing on the row with no key (the last case of
    # its kind) has the other guard, or it would have failed on a case before.
    Mistake("NaN for a query that may attend to no key at all (0 / 0 at the end)",
            "a row whose every key is masked ends with l = 0: return zeros for it, e.g. "
            "torch.where(l > 0, acc / l, 0.0) (the course's choice, chapter 6)",
            _nan_where_no_key),
    # Before the maximum that starts at 0: that one has no guard either, and is named on the
    # very negative scores first.
    Mistake("NaN for a row whose chunks so far were all masked (exp(-inf - (-inf)))",
            "while a row's running maximum is still -inf, shift by 0 instead: "
            "m_safe = m_new.masked_fill(m_new == float('-inf'), 0.0)",
            partial(online_variant, guard=False)),
    Mistake("an online softmax whose running maximum starts at 0 instead of -inf",
            "start m at float('-inf'): with m = 0, scores far below 0 give exp(s - 0) = 0 for "
            "every key and the row sum l stays 0", partial(online_variant, zero_start=True)),
    Mistake("an online softmax whose running maximum starts at 0 instead of -inf (the row sum l "
            "= 0 guarded at the end)", "start m at float('-inf'): with m = 0, scores far below 0 "
            "give exp(s - 0) = 0 for every key, and the row comes out 0 instead of a weighted "
            "average of the values",
            partial(online_variant, zero_start=True, end_guard=True)),
    Mistake("the rescale factor upside down: exp(m_new - m) instead of exp(m - m_new)",
            "old terms shrink when the maximum grows: " + _RESCALE_HINT +
            " (with m = -inf at the start, exp(m_new - m) is inf and inf * 0 is NaN)",
            partial(online_variant, upside_down=True)),
    Mistake("the running maximum not carried across chunks (m set to this chunk's maximum, "
            "not to m_new)", "after each chunk keep m = m_new = max(m, the chunk's maximum): "
            "the next rescale exp(m - m_new) must start from the maximum of every key so far",
            partial(online_variant, carry=False)),
    Mistake("chunk bounds off by one (each chunk leaves out its last key)",
            "chunk j covers keys j0 .. j0 + chunk_size - 1, i.e. the slice [j0:j0 + chunk_size] "
            "(Python slices exclude their end); check that every key is visited exactly once",
            short_chunks),
    Mistake("each chunk's mask sliced from key 0 (attn_mask[..., :chunk_size]) instead of from "
            "the chunk's first key", "the mask's columns are the keys: slice it as the keys, "
            "attn_mask[..., j0:j0 + chunk_size]", partial(online_variant, mask_from0=True)),
    Mistake("the causal mask's key positions counted from each chunk's first key "
            "(torch.arange(j1 - j0))", "the keys of chunk j0:j1 sit at positions j0 .. j1 - 1: "
            "compare the query rows with torch.arange(j0, j1), not arange(j1 - j0) (query i "
            "sees keys j <= i of the whole sequence)", partial(online_variant, causal_from0=True)),
    Mistake("the running output never divided by the running sum l",
            "at the end, return acc / l: acc sums exp(s - m) * v, which the softmax's "
            "denominator l must divide", partial(online_variant, divide=False)),
    *(Mistake("the last keys left out (the loop stops before the last, partial chunk)",
              "visit every key: for j0 in range(0, S, chunk_size) with the slice "
              "[j0:j0 + chunk_size] (the last chunk may be shorter)",
              partial(online_variant, stop=stop)) for stop in ("floor", "minus")),
] + [Mistake(m.name, m.hint, _sdpa_order(m.fn)) for m in attention_mistakes()]

CHUNKED_ATTENTION = Exercise(
    name="chunked_attention", reference=via_float32(qkv.chunked_attention), cases=_cases(),
    mistakes=_MISTAKES, forbid=TORCH_ATTENTION,
    compare=_close_or_empty_row, legend="(..., L, Ev)",
    run_student=chunk_by_chunk(lambda args, kwargs: kwargs.get("chunk_size", 256), "chunk_size"),
    error_hints=[("without overflow", FILL_HINT),
                 ("must match the size", "index the keys' axis from the end, whatever the "
                  "batch axes: key[..., j0:j1, :], and a mask (which may be (B, 1, L, S)) "
                  "attn_mask[..., j0:j1], not attn_mask[:, j0:j1]")],
)


#: This module's checks, by the name test cells call them (for :mod:`.grading`).
CHECKS = checks_of(CHUNKED_ATTENTION, KV_CACHE_STEP, ATTENTION_BACKWARD, SLIDING_KV_CACHE_STEP,
                   b.STREAMING_ATTENTION, ExperimentCheck(x.FP16_OVERFLOW_RATE))


# --------------------------------------------------------------------------- the checks

check_chunked_attention = make_check(
    CHECKS, "check_chunked_attention", __name__,
    "Check ``chunked_attention(query, key, value, attn_mask=None, is_causal=False, scale=None, "
    "chunk_size=256)`` against :func:`qkv.chunked_attention`.")

check_kv_cache_step = make_check(
    CHECKS, "check_kv_cache_step", __name__,
    "Check ``kv_cache_step(query, key, value, k_cache=None, v_cache=None, scale=None)`` against "
    ":func:`qkv.kv_cache_step`: it must return ``(output, k_cache, v_cache)``.")

check_attention_backward = make_check(
    CHECKS, "check_attention_backward", __name__,
    "Check ``attention_backward(query, key, value, out, lse, grad_out, is_causal=False, "
    "scale=None)`` against autograd through :func:`qkv.scaled_dot_product_attention` with the "
    "same ``is_causal`` (top left, as SDPA's; see :mod:`._efficient_extra`): it must return "
    "``(grad_query, grad_key, grad_value)``.")

check_sliding_kv_cache_step = make_check(
    CHECKS, "check_sliding_kv_cache_step", __name__,
    "Check the variation ``sliding_kv_cache_step(query, key, value, k_ring, v_ring, pos, "
    "scale=None)``: a ring buffer of the last W keys and values; returns ``(output, k_ring, "
    "v_ring)``.")

check_streaming_attention = make_check(
    CHECKS, "check_streaming_attention", __name__,
    "Check the fixed ``streaming_attention(query, key, value, block)``: exact attention with a "
    "running max, sum and output over blocks of keys; a bug of the printed version left in is "
    "named.")

check_fp16_overflow_rate = make_check(
    CHECKS, "check_fp16_overflow_rate", __name__,
    "Check the experiment ``fp16_overflow_rate(spread, generator)`` as a measurement (see "
    ":mod:`._experiment`).")
