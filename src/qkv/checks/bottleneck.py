"""Check for the bottleneck assignment: one step of Bahdanau attention, ``bahdanau_attention``.

The function returns ``(context, weights)``; the check compares the weights
first (where most mistakes show), then the context.
"""

from __future__ import annotations

from functools import partial
from typing import List

import torch

import qkv

from .harness import (Case, Exercise, checks_of, half_case, Mistake, pair_check, picked, randn, make_check,
                      via_float32)
from . import _beyond_early as e, _variations_early as v

__all__ = [
    "check_bahdanau_attention",
    "check_coverage_attention",
    "check_padded_bahdanau_weights",
]


def bahdanau_variant(query, keys, W_q, W_k, v_a, *, dim=-1, norm="softmax", context="weighted",
                     act="tanh", swap_w=False, swap_out=False):
    """``bahdanau_attention`` with switches that reproduce common mistakes (defaults: right)."""
    if swap_w:
        W_q, W_k = W_k, W_q
    f = torch.tanh if act == "tanh" else (lambda x: x)
    e = f((query @ W_q.T).unsqueeze(1) + keys @ W_k.T) @ v_a  # (B, S)
    if norm == "softmax":
        w = torch.softmax(e, dim=dim)
    elif norm == "unstable":
        w = e.exp() / e.exp().sum(dim=-1, keepdim=True)
    elif norm == "exp":
        w = e.exp()
    else:
        w = e
    if context == "weighted":
        c = (w.unsqueeze(-1) * keys).sum(1)
    elif context == "mean":
        c = keys.mean(1)
    else:
        c = keys[:, -1]
    return (w, c) if swap_out else (c, w)


def _mistakes(i: int) -> List[Mistake]:
    v = partial(picked, i=i)
    ctx_hint = "the context is the weighted sum of the encoder states: (weights[..., None] * keys).sum(1)"
    return [
        Mistake("returning (weights, context) instead of (context, weights)",
                "return the pair in the order (context, weights)", v(partial(bahdanau_variant, swap_out=True))),
        Mistake("softmax over the batch instead of over the encoder positions",
                "each sequence's weights over its S encoder states sum to one: softmax over dim=-1",
                v(partial(bahdanau_variant, dim=0))),
        Mistake("the raw scores used as weights (no softmax)",
                "turn the scores into weights with a softmax over the encoder positions",
                v(partial(bahdanau_variant, norm="raw"))),
        Mistake("exp without normalising", "divide by the sum of the exponentials over the positions",
                v(partial(bahdanau_variant, norm="exp"))),
        Mistake("a softmax that overflows on large scores",
                "subtract each row's maximum before exp", v(partial(bahdanau_variant, norm="unstable"))),
        Mistake("W_q and W_k swapped", "W_q projects the decoder state (the query), W_k the encoder states",
                v(partial(bahdanau_variant, swap_w=True))),
        Mistake("no tanh", "the score is v_a^T tanh(W_q s + W_k h_j)", v(partial(bahdanau_variant, act="none"))),
        Mistake("the context is the mean of the encoder states (weights unused)", ctx_hint,
                v(partial(bahdanau_variant, context="mean"))),
        Mistake("the context is the last encoder state: the bottleneck again", ctx_hint,
                v(partial(bahdanau_variant, context="last"))),
    ]


def _cases() -> List[Case]:
    def make(B, S, Hd, He, A, big=1.0):
        def build(gen, device, dtype):
            ts = (randn(gen, B, Hd), randn(gen, B, S, He), randn(gen, A, Hd) / Hd**0.5,
                  randn(gen, A, He) / He**0.5, randn(gen, A) * big)
            return tuple(t.to(device=device, dtype=dtype) for t in ts), {}
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("B=3, S=5, Hd=4, He=6, A=7", make(3, 5, 4, 6, 7), f32),
        Case("B=2, S=4, Hd=He=A=5", make(2, 4, 5, 5, 5), f64),
        Case("B=4, S=7, Hd=3, He=5, A=6", make(4, 7, 3, 5, 6), f64),
        # A batch of one: a squeeze() of every size-1 axis gives the context back (He,).
        Case("a batch of one: B=1, S=4, Hd=5, He=3, A=6", make(1, 4, 5, 3, 6), f64),
        Case("B=2, S=6, Hd=He=A=4 and large scores (v_a times 1000)", make(2, 6, 4, 4, 4, 1000.0), f32,
             rtol=1e-3, atol=1e-4),
        half_case("B=2, S=5, Hd=4, He=6, A=5", make(2, 5, 4, 6, 5), torch.bfloat16),
    ]


BAHDANAU_WEIGHTS, BAHDANAU_CONTEXT = (
    Exercise(name="bahdanau_attention", reference=via_float32(picked(qkv.bahdanau_attention, i)),
             cases=_cases(), mistakes=_mistakes(i), legend=legend)
    for i, legend in ((1, "(B, S) for the weights"), (0, "(B, He) for the context")))


#: This module's checks, by the name test cells call them (for :mod:`.grading`).
CHECKS = checks_of(
    pair_check("check_bahdanau_attention", BAHDANAU_WEIGHTS, BAHDANAU_CONTEXT,
               "(context, weights)"),
    e.PADDED_BAHDANAU_WEIGHTS,
    pair_check("check_coverage_attention", v.COVERAGE_WEIGHTS, v.COVERAGE_CONTEXT,
               "(context, weights)"))


# --------------------------------------------------------------------------- the checks

check_bahdanau_attention = make_check(
    CHECKS, "check_bahdanau_attention", __name__,
    "Check ``bahdanau_attention(query, keys, W_q, W_k, v_a) -> (context, weights)``.")

check_padded_bahdanau_weights = make_check(
    CHECKS, "check_padded_bahdanau_weights", __name__,
    "Check the fixed ``padded_bahdanau_weights(s, keys, W_q, W_k, v_a, lengths)``: additive "
    "attention's ``(B, S)`` weights, the padded encoder states at 0; a bug of the printed version"
    " left in is named.")

check_coverage_attention = make_check(
    CHECKS, "check_coverage_attention", __name__,
    "Check ``coverage_attention(query, keys, coverage, W_q, W_k, w_c, v_a) -> (context, "
    "weights)``: Bahdanau attention whose score also reads each encoder position's coverage (the "
    "weight it has had so far), ``v_a . tanh(W_q s + W_k h_j + w_c c_j)``.")
