"""Checks for chapter 9: ``repeat_kv``, ``grouped_query_attention``, ``causal_mask_bottom_right``."""

from __future__ import annotations

from functools import partial
from typing import List

import torch

import qkv

from .mistakes.attention import FILL_HINT, TORCH_ATTENTION, attention_mistakes
from .harness import (Case, checks_of, Exercise, Forbidden, half_case, Mistake, randn, make_check,
                      sizes, via_float32)
from .mistakes.variants import (bottom_right_variant, gqa_attention_mistake, gqa_variant,
                                repeat_variant)
from . import _beyond_late as late
from ._experiment import ExperimentCheck

__all__ = [
    "check_causal_mask_bottom_right",
    "check_dilated_window_mask_mod",
    "check_grouped_causal_linear_attention",
    "check_grouped_query_attention",
    "check_linear_attention",
    "check_linear_gap",
    "check_repeat_kv",
]

_GROUPING_HINT = ("query head h uses key/value head h // G (G = Hq // Hkv): the copies of a head "
                  "sit next to each other, [a, a, b, b] = x.repeat_interleave(G, dim=1); "
                  "x.repeat(1, G, 1, 1) tiles them, [a, b, a, b]")

# ----------------------------------------------------------------------------- repeat_kv


def _repeat_cases() -> List[Case]:
    def make(B, Hkv, S, E, n_rep):
        def build(gen, device, dtype):
            return (randn(gen, B, Hkv, S, E, device=device, dtype=dtype), n_rep), {}
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("x (B=2, Hkv=3, S=4, E=5) with n_rep=2", make(2, 3, 4, 5, 2), f32),
        Case("x (B=1, Hkv=2, S=3, E=4) with n_rep=4", make(1, 2, 3, 4, 4), f64),
        Case("x (B=2, Hkv=4, S=4, E=4) with n_rep=3 (S and E equal Hkv)", make(2, 4, 4, 4, 3), f32),
        Case("x (B=2, Hkv=1, S=5, E=3) with n_rep=4 (multi-query: one key/value head)",
             make(2, 1, 5, 3, 4), f64),
        Case("x (B=1, Hkv=3, S=2, E=2) with n_rep=1 (nothing to repeat)", make(1, 3, 2, 2, 1), f32),
        half_case("x (B=2, Hkv=2, S=3, E=4) with n_rep=2", make(2, 2, 3, 4, 2)),
    ]


REPEAT_KV = Exercise(
    name="repeat_kv", reference=qkv.repeat_kv, cases=_repeat_cases(),
    mistakes=[
        Mistake("heads tiled (repeat) instead of grouped (repeat_interleave): wrong head grouping",
                _GROUPING_HINT, partial(repeat_variant, how="tile")),
        *(Mistake(f"repeated along dim {d}, the {what}, instead of the head axis (dim 1)",
                  "the heads are dim 1 of (B, Hkv, S, E): repeat along it",
                  partial(repeat_variant, dim=d))
          for d, what in ((2, "sequence axis"), (3, "feature axis"), (0, "batch axis"))),
        Mistake("the group axis left in: (B, Hkv, n_rep, S, E) instead of (B, Hkv * n_rep, S, E)",
                "after expand, reshape to (B, Hkv * n_rep, S, E) (or use repeat_interleave)",
                partial(repeat_variant, how="unmerged")),
    ],
    forbid=Forbidden(patterns=("repeat_kv",)),  # transformers' own repeat_kv, for one
    legend="(B, Hkv * n_rep, S, E)",
)


# ----------------------------------------------------------------------------- grouped_query_attention


def _gqa_cases() -> List[Case]:
    def make(B, Hq, Hkv, L, S, E, Ev, big=0.0, **kw):
        def build(gen, device, dtype):
            q = randn(gen, B, Hq, L, E, device=device, dtype=dtype)
            k = randn(gen, B, Hkv, S, E, device=device, dtype=dtype)
            v = randn(gen, B, Hkv, S, Ev, device=device, dtype=dtype)
            if big:  # a shared component: every score near +-big**2 / sqrt(E), big's sign
                q[..., 0], k[..., 0] = abs(big), big
            return (q, k, v), kw
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("Hq=6 query heads, Hkv=3 key/value heads (B=2, L=4, S=5, E=4, Ev=2)",
             make(2, 6, 3, 4, 5, 4, 2), f64),
        Case("Hq=4, Hkv=2 (B=1, L=3, S=6, E=8, Ev=2)", make(1, 4, 2, 3, 6, 8, 2), f32),
        Case("multi-query: Hq=4, Hkv=1 (B=2, L=3, S=4, E=4, Ev=4)", make(2, 4, 1, 3, 4, 4, 4), f64),
        Case("multi-head: Hq=Hkv=3 (B=2, L=2, S=3, E=4, Ev=3)", make(2, 3, 3, 2, 3, 4, 3), f32),
        Case("Hq=6, Hkv=2 with is_causal=True, L=S=5", make(2, 6, 2, 5, 5, 4, 3, is_causal=True), f64),
        Case("Hq=4, Hkv=2 with is_causal=True and L=3 < S=6 (top-left, as SDPA)",
             make(1, 4, 2, 3, 6, 4, 3, is_causal=True), f64),
        Case("Hq=4, Hkv=2 with is_causal=True and L=6 > S=4 (top-left: queries 3..5 see every "
             "key)", make(1, 4, 2, 6, 4, 4, 3, is_causal=True), f64),
        Case("Hq=8, Hkv=2 with scale=0.3", make(1, 8, 2, 3, 4, 4, 2, scale=0.3), f64),
        Case("Hq=4, Hkv=2 with large logits (scores near 800)", make(1, 4, 2, 3, 5, 4, 3, big=40.0), f64),
        Case("Hq=4, Hkv=2 with is_causal=True and every score very negative (near -800): a "
             "finite fill outweighs the real keys", make(1, 4, 2, 4, 4, 4, 3, big=-40.0,
                                                         is_causal=True), f64),
        half_case("Hq=4, Hkv=2 (B=2, L=3, S=5, E=4, Ev=3)", make(2, 4, 2, 3, 5, 4, 3)),
    ]


_SCALE_HINT = ("scale by 1/sqrt(E), E = query.shape[-1] the width of each head; the number of "
               "heads plays no part")
_SHARED_QUERIES_HINT = ("the keys and values are shared, not the queries: every one of the Hq query "
                        "heads attends and gives its own output, (B, Hq, L, Ev)")

GROUPED_QUERY_ATTENTION = Exercise(
    name="grouped_query_attention", reference=via_float32(qkv.grouped_query_attention),
    cases=_gqa_cases(),
    mistakes=[
        Mistake("key/value heads tiled (repeat) instead of grouped (repeat_interleave): wrong "
                "head grouping", _GROUPING_HINT, partial(gqa_variant, kv="tile")),
        Mistake("queries shared instead of keys (one query head per group)", _SHARED_QUERIES_HINT,
                partial(gqa_variant, queries="first")),
        Mistake("queries shared instead of keys (a group's query heads averaged)",
                _SHARED_QUERIES_HINT, partial(gqa_variant, queries="mean")),
        Mistake("scaled by 1/sqrt(Hq), the number of query heads, instead of 1/sqrt(E)", _SCALE_HINT,
                partial(gqa_variant, scale_by="Hq")),
        Mistake("scaled by 1/sqrt(Hkv), the number of key/value heads, instead of 1/sqrt(E)",
                _SCALE_HINT, partial(gqa_variant, scale_by="Hkv")),
        *(Mistake(m.name, m.hint, gqa_attention_mistake(m.fn))
          for m in attention_mistakes(attn_mask=False)),
    ],
    forbid=TORCH_ATTENTION,  # SDPA (enable_gqa), flex_attention: any name with "attention"
    # A wrong repeat_kv costs only its own test: the reference's stands in while this one runs.
    helpers={"repeat_kv": qkv.repeat_kv},
    legend="(B, Hq, L, Ev)",
    error_hints=[("must match the size of tensor", "the key/value heads must be repeated to Hq "
                  "before they meet the queries (or the queries grouped as (B, Hkv, G, L, E))"),
                 ("without overflow", FILL_HINT)],
)


# ----------------------------------------------------------------------------- causal_mask_bottom_right


def _mask_cases() -> List[Case]:
    return [
        Case("L=3 new queries, S=5 keys", sizes(3, 5, here=True), None),
        Case("L=1, S=6 (one new token: it sees every key)", sizes(1, 6), None),
        Case("L=2, S=7 and device given", sizes(2, 7, here=True), None),
        Case("L=4 (S omitted)", sizes(4), None),
        Case("L=5, S=3 (more queries than keys: the first two see nothing)", sizes(5, 3), None),
    ]


_ALIGN_HINT = ("the L queries are the LAST L of the S positions: query i sits at S - L + i and "
               "sees keys 0 .. S - L + i, torch.ones(L, S, dtype=torch.bool).tril(S - L)")

CAUSAL_MASK_BOTTOM_RIGHT = Exercise(
    name="causal_mask_bottom_right", reference=qkv.causal_mask_bottom_right, cases=_mask_cases(),
    mistakes=[
        Mistake("aligned to the top left (tril(), as is_causal) instead of the bottom right",
                _ALIGN_HINT + "; tril() (SDPA's is_causal) is right only when L == S",
                partial(bottom_right_variant, align="top")),
        Mistake("diagonal shifted the wrong way (tril(L - S) instead of tril(S - L))", _ALIGN_HINT,
                partial(bottom_right_variant, align="flipped")),
        Mistake("off by one (each query's own key is masked)",
                "query i sits at S - L + i and sees itself: tril(S - L), not tril(S - L - 1)",
                partial(bottom_right_variant, diag=-1)),
        Mistake("off by one (one future key is allowed)",
                "query i may see keys 0 .. S - L + i only: tril(S - L), not tril(S - L + 1)",
                partial(bottom_right_variant, diag=1)),
        Mistake("inverted mask (True marks the future)",
                "a bool mask is True where attention is allowed (SDPA's convention; "
                "nn.MultiheadAttention uses the opposite): use tril, not triu",
                partial(bottom_right_variant, invert=True)),
        Mistake("S ignored (a square L x L mask)", "the mask has shape (L, S); S defaults to L",
                partial(bottom_right_variant, square=True)),
    ],
    # Torch's own causal masks (torch.nn.attention.bias.causal_lower_right and kin).
    forbid=Forbidden(patterns=("causal", "lower_right", "subsequent_mask")),
    legend="(L, S)",
)


#: This module's checks, by the name test cells call them (for :mod:`.grading`).
CHECKS = checks_of(REPEAT_KV, GROUPED_QUERY_ATTENTION, CAUSAL_MASK_BOTTOM_RIGHT,
                   late.LINEAR_ATTENTION, late.DILATED_WINDOW_MASK_MOD,
                   ExperimentCheck(late.LINEAR_GAP), late.GROUPED_CAUSAL_LINEAR_ATTENTION)


# --------------------------------------------------------------------------- the checks

check_repeat_kv = make_check(
    CHECKS, "check_repeat_kv", __name__,
    "Check ``repeat_kv(x, n_rep)`` against :func:`qkv.repeat_kv`.")

check_grouped_query_attention = make_check(
    CHECKS, "check_grouped_query_attention", __name__,
    "Check ``grouped_query_attention(query, key, value, is_causal=False, scale=None)`` against "
    ":func:`qkv.grouped_query_attention`.")

check_causal_mask_bottom_right = make_check(
    CHECKS, "check_causal_mask_bottom_right", __name__,
    "Check ``causal_mask_bottom_right(L, S=None, device=None)`` against "
    ":func:`qkv.causal_mask_bottom_right`.")

check_linear_attention = make_check(
    CHECKS, "check_linear_attention", __name__,
    "Check ``linear_attention(query, key, value, is_causal=False)`` with the feature map ``elu(x)"
    " + 1``, against :func:`qkv.linear_attention`.")

check_dilated_window_mask_mod = make_check(
    CHECKS, "check_dilated_window_mask_mod", __name__,
    "Check ``dilated_window_mask_mod(window, dilation)``: the FlexAttention ``mask_mod`` of a "
    "dilated causal window (``window`` keys, ``dilation`` apart, the query's own included), "
    "evaluated on every (query, key) pair.")

check_linear_gap = make_check(
    CHECKS, "check_linear_gap", __name__,
    "Check the experiment ``linear_gap(E, generator)`` as a measurement (see "
    ":mod:`._experiment`).")

check_grouped_causal_linear_attention = make_check(
    CHECKS, "check_grouped_causal_linear_attention", __name__,
    "Check the fixed ``grouped_causal_linear_attention(query, key, value)``: causal linear "
    "attention (``elu(x) + 1``) in which ``Hq`` query heads share ``Hkv`` key/value heads (query "
    "head ``h`` uses ``h // G``); each bug of the printed version still there is named.")
