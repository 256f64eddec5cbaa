"""Checks for the scaling assignment: ``attention_scores``, ``scaled_dot_product_attention``
and ``dot_product_variance``.

The attention checks compare the student's function with the reference in
:mod:`qkv` and, when they differ, name the mistake: the wrong variants (in
:mod:`.mistakes.attention`) compute exactly what a student who made it would get. The
variance check is statistical (:mod:`._variance`): it compares a measured estimate with
``d_k`` within a tolerance it states, and checks that the estimate really comes from the
generator passed in.
"""

from __future__ import annotations

from typing import List, Optional

import torch
from torch import Tensor

import qkv

from .mistakes.attention import FILL_HINT, TORCH_ATTENTION, attention_mistakes, qkv_inputs
from .harness import (bool_mask, Case, checks_of, close, Exercise, ExerciseCheck, half_case,
                      is_tensor, make_check, randn, via_float32)
from . import _beyond as b, _beyond_experiments as x, _variations_early as v
from ._experiment import ExperimentCheck
from ._variance import VARIANCE_CHECK

__all__ = [
    "check_attention_scores",
    "check_attention_with_temperature",
    "check_dot_product_variance",
    "check_max_weight",
    "check_quiet_attention",
    "check_scaled_dot_product_attention",
]

# --------------------------------------------------------------------------- cases


def _attention_cases(with_value: bool = True, masks: bool = True) -> List[Case]:
    """The attention checks' inputs; without masks for assignment 4 (masks are chapter 6's)."""
    def make(batch, L, S, E, Ev, mask=None, big=0.0, **kw):
        def build(gen, device, dtype):
            q, k, v = qkv_inputs(gen, device, dtype, batch, L, S, E, Ev, big)
            kwargs = dict(kw)
            if mask == "bool":
                kwargs["attn_mask"] = bool_mask(gen, L, S, device=device)
            elif mask == "padding":
                lengths = torch.randint(1, S, (batch[0],), generator=gen)
                pad = torch.arange(S)[None, :] < lengths[:, None]
                kwargs["attn_mask"] = pad[:, None, None, :].to(device)
            elif mask == "float":
                kwargs["attn_mask"] = randn(gen, L, S, device=device, dtype=dtype)
            args = (q, k, v) if with_value else (q, k)
            return args, kwargs
        return build

    f32, f64 = torch.float32, torch.float64
    common = [
        Case("unbatched input with L=3, S=5, E=4, Ev=6", make((), 3, 5, 4, 6), f32),
        Case("batched input (B=2, H=2) with L=4, S=5, E=6, Ev=7 and scale=0.3",
             make((2, 2), 4, 5, 6, 7, scale=0.3), f64),
        Case("input with large logits (scores near 450) and L=4, S=5, E=4, Ev=3",
             make((2,), 4, 5, 4, 3, big=30.0), f32, rtol=2e-3, atol=1e-4),
        Case("input with large logits (scores near 800) and L=4, S=5, E=4, Ev=3",
             make((2,), 4, 5, 4, 3, big=40.0), f64),
    ]
    if not masks:
        return [
            common[0],
            Case("batched input (B=2, H=3) with L=5, S=7, E=8, Ev=3", make((2, 3), 5, 7, 8, 3),
                 f64),
            Case("batched input (B=2) with L=S=4, E=6, Ev=5", make((2,), 4, 4, 6, 5), f32),
            *common[1:],
            half_case("batched input (B=2, H=2) with L=4, S=6, E=8, Ev=4",
                      make((2, 2), 4, 6, 8, 4)),
        ]
    return [
        common[0],
        Case("batched input (B=2, H=3) with L=5, S=7, E=8, Ev=3 and a bool mask (L, S)",
             make((2, 3), 5, 7, 8, 3, "bool"), f64),
        Case("batched input (B=2) with L=S=4, E=6, Ev=5 and is_causal=True",
             make((2,), 4, 4, 6, 5, is_causal=True), f32),
        Case("batched input (B=2, H=2) with L=3 < S=6, E=5, Ev=4 and is_causal=True",
             make((2, 2), 3, 6, 5, 4, is_causal=True), f64),
        Case("batched input (B=3, H=2) with L=4, S=6, E=4, Ev=3 and a padding mask (B, 1, 1, S)",
             make((3, 2), 4, 6, 4, 3, "padding"), f32),
        Case("batched input (B=2) with L=5, S=3, E=4, Ev=2 and a float mask added to the scores",
             make((2,), 5, 3, 4, 2, "float"), f64),
        *common[1:],
        # Last: the mistakes that do not depend on precision are named above.
        half_case("batched input (B=2, H=2) with L=4, S=6, E=8, Ev=4 and a bool mask (L, S)",
                  make((2, 2), 4, 6, 8, 4, "bool")),
    ]


# --------------------------------------------------------------------------- checks


def _scores_close(got, expected, rtol, atol) -> bool:
    """Scores match when finite entries agree and masked ones are -inf or very negative."""
    if not is_tensor(got) or tuple(got.shape) != tuple(expected.shape):
        return False
    g = got.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    masked = e == float("-inf")
    if bool((g[masked] > -1e4).any()):
        return False
    return close(g.masked_fill(masked, 0.0), e.masked_fill(masked, 0.0), rtol, atol)


def _scores_without_masks(query: Tensor, key: Tensor, scale: Optional[float] = None) -> Tensor:
    """Assignment 4's ``attention_scores(query, key, scale=None)``, from the reference, in the
    inputs' dtype (as the exercise asks; the reference computes half precision in float32)."""
    return qkv.attention_scores(query, key, scale=scale).to(query.dtype)


# Assignment 4 (no masks yet: chapter 6 teaches them).
ATTENTION_SCORES = Exercise(
    name="attention_scores", reference=via_float32(qkv.attention_scores),
    cases=_attention_cases(with_value=False, masks=False),
    mistakes=attention_mistakes(give="scores", with_value=False),
    forbid=TORCH_ATTENTION, compare=_scores_close,
    legend="(..., L, S)", error_hints=[("without overflow", FILL_HINT)],
)

_SDPA_HINTS = [("x.T", "transpose only the last two axes: key.transpose(-2, -1)"),
               ("without overflow", FILL_HINT)]

# With masks (the reference's full signature; assignment 6 grades only its masking step, with
# check_masked_scores), built on the student's causal_mask (the reference's in the check).
SCALED_DOT_PRODUCT_ATTENTION = Exercise(
    name="scaled_dot_product_attention",
    reference=via_float32(qkv.scaled_dot_product_attention),
    cases=_attention_cases(), mistakes=attention_mistakes(),
    forbid=TORCH_ATTENTION, legend="(..., L, Ev)", error_hints=_SDPA_HINTS,
    helpers={"causal_mask": qkv.causal_mask},
)

# Assignment 4: no masks, built on the student's attention_scores and the given softmax.
UNMASKED_ATTENTION = Exercise(
    name="scaled_dot_product_attention",
    reference=via_float32(qkv.scaled_dot_product_attention),
    cases=_attention_cases(masks=False), mistakes=attention_mistakes(),
    forbid=TORCH_ATTENTION, legend="(..., L, Ev)", error_hints=_SDPA_HINTS,
    helpers={"attention_scores": _scores_without_masks, "softmax": qkv.softmax},
)


#: This module's checks, by the name test cells call them (for :mod:`.grading`).
CHECKS = checks_of(
    ATTENTION_SCORES,
    ExerciseCheck("check_scaled_dot_product_attention",
                  lambda masks: (SCALED_DOT_PRODUCT_ATTENTION if masks else UNMASKED_ATTENTION,),
                  options={"masks": True}),
    VARIANCE_CHECK, b.ATTENTION_WITH_TEMPERATURE, ExperimentCheck(x.MAX_WEIGHT),
    v.QUIET_ATTENTION, given=("softmax",))


# --------------------------------------------------------------------------- the checks

check_attention_scores = make_check(
    CHECKS, "check_attention_scores", __name__,
    "Check assignment 4's ``attention_scores(query, key, scale=None)``: the scaled scores.")

check_scaled_dot_product_attention = make_check(
    CHECKS, "check_scaled_dot_product_attention", __name__,
    "Check a student's ``scaled_dot_product_attention`` against the reference.\n\n"
    "With ``masks``, the signature of :func:`qkv.scaled_dot_product_attention` and inputs with "
    "bool, float and causal masks; the check passes ``dropout_p=0.0`` (the default), so dropout "
    "may be left out. Without (assignment 4), ``(query, key, value, scale=None)`` and no masks. "
    "While it runs, the student's ``attention_scores`` and ``softmax`` (without masks) or "
    "``causal_mask`` (with) are the reference's: a mistake there costs only that function's test."
    " (Assignment 6 grades the masking step alone: ``check_masked_scores``.)")

check_dot_product_variance = make_check(
    CHECKS, "check_dot_product_variance", __name__,
    "Check a measured ``dot_product_variance(d_k, n_samples, generator)``.\n\n"
    "For d_k in 4, 64 and 256 with 20,000 samples, the answer must lie within ``5 * d_k * sqrt((2"
    " + 6 / d_k) / n_samples)`` of ``d_k`` (5 standard errors of the sample variance: a right "
    "answer fails by chance far less than once in a million). It must behave as a measurement: "
    "the same seed gives the same number, another seed another number, and it varies from seed to"
    " seed as much as a sample variance of n_samples dot products does (over 16 seeds at 500 "
    "samples, a spread between 1/4 and 3 times its standard error; over 16 at 20,000, between "
    "1/4 and 2 times).")

check_attention_with_temperature = make_check(
    CHECKS, "check_attention_with_temperature", __name__,
    "Check the fixed ``attention_with_temperature(query, key, value, temperature=1.0)``: "
    "``softmax(query @ key^T / (sqrt(E) * temperature)) @ value``; a bug of the printed version "
    "left in is named.")

check_max_weight = make_check(
    CHECKS, "check_max_weight", __name__,
    "Check the experiment ``max_weight(d_k, scaled, generator)`` as a measurement (see "
    ":mod:`._experiment`): at d_k = 16 and 512, scaled, and 512 unscaled.")

check_quiet_attention = make_check(
    CHECKS, "check_quiet_attention", __name__,
    "Check ``quiet_attention(query, key, value, scale=None)``: attention whose weights are "
    '``exp(s_j) / (1 + sum_k exp(s_k))`` (a softmax "off by one"), stable for large and very '
    "negative scores.")
