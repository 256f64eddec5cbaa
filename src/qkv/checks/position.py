"""Checks for position: ``sinusoidal_encoding``, ``apply_rope`` and ``alibi_bias`` (chapter 7)."""

from __future__ import annotations

from functools import partial
from typing import List

import torch

import qkv

from .harness import (Case, checks_of, Exercise, Forbidden, half_case, Mistake, randn, make_check,
                      sizes, via_float32)
from .mistakes.position import alibi_variant, rope_variant, sinusoid_variant
from . import _beyond_mid as m, _beyond_position as e
from ._experiment import ExperimentCheck

__all__ = [
    "check_alibi_bias",
    "check_alibi_far_weight",
    "check_apply_partial_rope",
    "check_apply_rope",
    "check_apply_rope_scaled",
    "check_sinusoidal_encoding",
]

# Ready-made encodings in the libraries a student has at hand (Hugging Face's
# apply_rotary_pos_emb and build_alibi_tensor, create_sinusoidal_positions, ...).
_READY_MADE = Forbidden(patterns=("rotary", "alibi", "sinusoid"))

# Float64 cases accept angles computed in float32 (torch's default for arange(E) / E): the
# error that leaves is near 1e-6, any named mistake changes the result by far more.
_F64 = dict(rtol=1e-5, atol=1e-5)

_FREQ_HINT = "pair i (dims 2i and 2i + 1) turns at the angular frequency base ** (-2i / E), i = 0 .. E/2 - 1"
_POS_HINT = "positions count from 0: row p of the table is position p"
_TWICE_HINT = ("torch.arange(0, E, 2) already gives 2i (0, 2, 4, ...): the frequency is "
               "base ** (-arange(0, E, 2) / E), with no second factor 2")


def _drawn(first, second, **kwargs):
    """Sizes drawn from the seed: ``first`` and ``second`` are ``(low, high, step)`` ranges."""
    def build(gen, device, dtype):
        a, b = (lo + step * int(torch.randint(0, (hi - lo) // step + 1, (1,), generator=gen))
                for lo, hi, step in (first, second))
        return (a, b), dict(kwargs, device=device)
    return build


# ------------------------------------------------------------------- sinusoidal_encoding
_SINUSOID_MISTAKES = [
    Mistake("sin and cos swapped (cos on the even dims)",
            "dim 2i holds sin(p * w_i) and dim 2i + 1 holds cos(p * w_i)",
            partial(sinusoid_variant, swap=True)),
    Mistake("the sines and cosines in two halves instead of interleaved",
            "interleave them: sin at dims 0, 2, 4, ..., cos at dims 1, 3, 5, ... "
            "(torch.stack((sin, cos), dim=-1).flatten(-2), or assign pe[:, 0::2] and pe[:, 1::2])",
            partial(sinusoid_variant, halves=True)),
    Mistake("the frequency exponent i/E instead of 2i/E", _FREQ_HINT,
            partial(sinusoid_variant, exponent=1)),
    Mistake("a frequency per dim (base ** (-d / E) for every dim d) instead of one per pair", _FREQ_HINT,
            partial(sinusoid_variant, exponent="dim")),
    Mistake("the frequency inverted (p * base ** (2i / E))",
            "divide the position by base ** (2i / E), i.e. multiply by base ** (-2i / E)",
            partial(sinusoid_variant, inverted=True)),
    Mistake("base ignored (10000 used whatever base is)", "use the base argument",
            partial(sinusoid_variant, fixed_base=True)),
    # After 'base ignored': with base=100, 10000 ** (-2i/E) is 100 ** (-4i/E); a student who
    # doubled the exponent is named on the cases with the default base, which come first.
    Mistake("the frequency exponent 4i/E instead of 2i/E (the 2 counted twice)", _TWICE_HINT,
            partial(sinusoid_variant, exponent=4)),
    Mistake("positions counted from 1 (off by one)", _POS_HINT,
            partial(sinusoid_variant, start=1)),
]


def _sinusoid_cases() -> List[Case]:
    return [
        Case("L=6, E=8", sizes(6, 8), None),
        Case("L=9, E=6 and base=100.0", sizes(9, 6, base=100.0), None),
        Case("L=7, E=12, dtype=torch.float64 and device given",
             sizes(7, 12, here=True, dtype=torch.float64), None, **_F64),
        Case("L=1, E=2 (one position)", sizes(1, 2), None),
        Case("L=12, E=4 and base=30.0, device given", sizes(12, 4, here=True, base=30.0), None),
        Case("L and E drawn from the seed (L in 2..20, E even in 2..16), device given",
             _drawn((2, 20, 1), (2, 16, 2)), None),
    ]


SINUSOIDAL_ENCODING = Exercise(
    name="sinusoidal_encoding", reference=qkv.sinusoidal_encoding, cases=_sinusoid_cases(),
    mistakes=_SINUSOID_MISTAKES, forbid=_READY_MADE, legend="(L, E)",
)


# ---------------------------------------------------------------------------- apply_rope
_ROPE_MISTAKES = [
    Mistake("pairs (i, i + E/2) (the half-split of many LLM codebases) instead of (2i, 2i + 1)",
            "this exercise pairs neighbouring dims, as the RoFormer paper: x[..., 0::2] with "
            "x[..., 1::2], and the rotated pairs go back to the same dims",
            partial(rope_variant, half=True)),
    Mistake("rotated the wrong way (the sign of sin flipped)",
            "the rotated pair is (a cos - b sin, a sin + b cos)", partial(rope_variant, sign=-1)),
    Mistake("the pair rotated in place: the second dim computed from the first one already "
            "rotated", "compute both from the dims as they were: a, b = x[..., 0::2], "
            "x[..., 1::2], then out[..., 0::2] = a cos - b sin and out[..., 1::2] = a sin + b cos "
            "(not from out[..., 0::2])", partial(rope_variant, sequential=True)),
    Mistake("the frequency exponent i/E instead of 2i/E", _FREQ_HINT,
            partial(rope_variant, exponent=1)),
    Mistake("the offset subtracted (row l at position l - offset)",
            "row l of x is at position offset + l: the cache's length comes first",
            partial(rope_variant, offset_sign=-1)),
    Mistake("base ignored (10000 used whatever base is)", "use the base argument",
            partial(rope_variant, fixed_base=True)),
    # After 'base ignored': with base=100, 10000 ** (-2i/E) is 100 ** (-4i/E); a student who
    # doubled the exponent is named on the cases with the default base, which come first.
    Mistake("the frequency exponent 4i/E instead of 2i/E (the 2 counted twice)", _TWICE_HINT,
            partial(rope_variant, exponent=4)),
    Mistake("offset ignored (the rows always start at position 0)",
            "row l of x is at position offset + l", partial(rope_variant, ignore_offset=True)),
    Mistake("positions off by one (row l at position offset + l + 1)",
            "row l of x is at position offset + l: the first row gets no rotation when offset=0",
            partial(rope_variant, start=1)),
]


def _rope_cases() -> List[Case]:
    def make(shape, **kw):
        def build(gen, device, dtype):
            return (randn(gen, *shape, device=device, dtype=dtype),), dict(kw)
        return build

    def drawn_offset(gen, device, dtype):
        offset = int(torch.randint(0, 51, (1,), generator=gen))
        return (randn(gen, 2, 2, 8, 12, device=device, dtype=dtype),), {"offset": offset}

    f32, f64 = torch.float32, torch.float64
    return [
        Case("x of shape (B=2, H=3, L=5, E=8)", make((2, 3, 5, 8)), f32),
        Case("x of shape (B=2, H=2, L=7, E=6) with offset=4", make((2, 2, 7, 6), offset=4), f64, **_F64),
        Case("x of shape (L=6, E=4) with base=100.0", make((6, 4), base=100.0), f32),
        Case("one new token, x of shape (B=1, H=2, L=1, E=8) with offset=9", make((1, 2, 1, 8), offset=9), f32),
        Case("x of shape (B=3, L=9, E=10) with offset=2 and base=500.0",
             make((3, 9, 10), offset=2, base=500.0), f64, **_F64),
        Case("x of shape (B=2, H=2, L=8, E=12) with an offset drawn from the seed (0..50)",
             drawn_offset, f32),
        # Small positions: angles up to 5 rad, which float16 holds to 0.002 (an answer whose
        # tables are built in the input's dtype stays well within the tolerance).
        half_case("x of shape (B=2, H=2, L=4, E=8) with offset=2", make((2, 2, 4, 8), offset=2)),
    ]


APPLY_ROPE = Exercise(
    name="apply_rope", reference=via_float32(qkv.apply_rope), cases=_rope_cases(), mistakes=_ROPE_MISTAKES,
    forbid=_READY_MADE, legend="the shape of x, (..., L, E)",
)


# ---------------------------------------------------------------------------- alibi_bias
_SLOPE_HINT = ("head h = 0 .. H-1 gets the slope 2 ** (-8 (h + 1) / H) when H is a power of two (8 "
               "heads: 1/2, 1/4, ..., 1/256); otherwise the slopes of the power of two below H, "
               "then every other slope of the power of two above, as far as needed")

_ALIBI_MISTAKES = [
    Mistake("the sign flipped (far keys get a bonus)",
            "the bias is -m_h * |i - j|: 0 on the diagonal and more negative the farther the key",
            partial(alibi_variant, sign=1)),
    Mistake("the distance i - j without abs (keys after the query get a bonus)",
            "use |i - j|: the penalty grows with the distance on both sides",
            partial(alibi_variant, signed=True)),
    Mistake("the distance clamped at 0 (i - j).clamp(min=0): keys after the query not penalised",
            "this exercise's bias is -m_h * |i - j| on both sides of the query (a causal mask, "
            "not the bias, hides the future)", partial(alibi_variant, clamped=True)),
    Mistake("slopes off by one head (2 ** (-8h / H) for h = 0 .. H-1, the first slope 1)", _SLOPE_HINT,
            partial(alibi_variant, slopes="from0")),
    Mistake("slopes 1/2, 1/4, 1/8, ... whatever the number of heads (right for 8 heads only)",
            _SLOPE_HINT, partial(alibi_variant, slopes="halves")),
    Mistake("the power-of-two formula used for a head count that is not a power of two",
            _SLOPE_HINT, partial(alibi_variant, slopes="pow2_formula")),
    Mistake("slopes in reverse order (the steepest on the last head)", _SLOPE_HINT,
            partial(alibi_variant, reverse=True)),
    Mistake("query i placed at position i + S - L (the queries aligned to the last keys)",
            "this course's ALiBi puts query i at position i, as SDPA's is_causal aligns the "
            "queries to the first keys: the bias is -m_h * |i - j|", partial(alibi_variant, bottom=True)),
    Mistake("the bias m_h * j (BLOOM's code), not -m_h * |i - j|",
            "under a causal softmax the two differ by a constant per row, which the softmax "
            "ignores, but not as a bias: this exercise asks for -m_h * |i - j|, 0 on the diagonal",
            partial(alibi_variant, bloom=True)),
    Mistake("S ignored (a square L x L bias)", "the bias has shape (H, L, S); S defaults to L",
            partial(alibi_variant, square=True)),
]


def _alibi_cases() -> List[Case]:
    return [
        Case("num_heads=8, L=5 (S omitted)", sizes(8, 5), None),
        Case("num_heads=4, L=3, S=6, device given", sizes(4, 3, 6, here=True), None),
        Case("num_heads=6 (not a power of two), L=4, S=4", sizes(6, 4, 4), None),
        Case("num_heads=12, L=5, S=3 with dtype=torch.float64",
             sizes(12, 5, 3, dtype=torch.float64), None, **_F64),
        Case("num_heads=2, L=1, S=1", sizes(2, 1, 1), None),
        Case("num_heads and L drawn from the seed (num_heads in 1..16, L in 1..10), device given",
             _drawn((1, 16, 1), (1, 10, 1)), None),
    ]


ALIBI_BIAS = Exercise(
    name="alibi_bias", reference=qkv.alibi_bias, cases=_alibi_cases(), mistakes=_ALIBI_MISTAKES,
    forbid=_READY_MADE, legend="(H, L, S)",
)


#: This module's checks, by the name test cells call them (for :mod:`.grading`).
CHECKS = checks_of(SINUSOIDAL_ENCODING, APPLY_ROPE, ALIBI_BIAS, e.APPLY_ROPE_SCALED,
                   ExperimentCheck(e.ALIBI_FAR_WEIGHT), m.APPLY_PARTIAL_ROPE)


# --------------------------------------------------------------------------- the checks

check_sinusoidal_encoding = make_check(
    CHECKS, "check_sinusoidal_encoding", __name__,
    "Check ``sinusoidal_encoding(L, E, base=10000.0, device=None, dtype=torch.float32)`` against "
    ":func:`qkv.sinusoidal_encoding`.")

check_apply_rope = make_check(
    CHECKS, "check_apply_rope", __name__,
    "Check ``apply_rope(x, offset=0, base=10000.0)`` against :func:`qkv.apply_rope` (pairs of "
    "dims ``(2i, 2i + 1)``).")

check_alibi_bias = make_check(
    CHECKS, "check_alibi_bias", __name__,
    "Check ``alibi_bias(num_heads, L, S=None, device=None, dtype=torch.float32)`` against "
    ":func:`qkv.alibi_bias`: the ``(H, L, S)`` bias ``-m_h |i - j|``.")

check_apply_rope_scaled = make_check(
    CHECKS, "check_apply_rope_scaled", __name__,
    "Check ``apply_rope_scaled(x, factor)``: RoPE with position interpolation (row ``t`` at "
    "position ``t / factor``); a bug of the printed version left in is named.")

check_alibi_far_weight = make_check(
    CHECKS, "check_alibi_far_weight", __name__,
    "Check the experiment ``alibi_far_weight(head, generator)`` as a measurement (see "
    ":mod:`._experiment`).")

check_apply_partial_rope = make_check(
    CHECKS, "check_apply_partial_rope", __name__,
    "Check ``apply_partial_rope(x, rotary_dim, offset=0, base=10000.0)``: RoPE on the first "
    "``rotary_dim`` dims of ``x`` (frequencies ``base ** (-2i / rotary_dim)``), the others passed"
    " through, a variation the reference does not contain.")
