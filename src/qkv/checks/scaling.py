"""Checks for the scaling assignment: ``attention_scores``, ``scaled_dot_product_attention``
and ``dot_product_variance``.

The attention checks compare the student's function with the reference in
:mod:`qkv` and, when they differ, name the mistake: the wrong variants (in
:mod:`.mistakes.attention`) compute exactly what a student who made it would get. The
variance check is statistical: it compares a measured estimate with ``d_k``
within a tolerance it states, and checks that the estimate really comes from the
generator passed in.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

import qkv

from .mistakes.attention import FILL_HINT, TORCH_ATTENTION, attention_mistakes, qkv_inputs
from .harness import (NOTHING, bool_mask, Case, Check, close, Exercise, ExerciseCheck, half_case,
                      is_tensor, notice_text, number_of, plain_number, Raised, randn,
                      reference_names, make_check, checks_of, shown, split_outcome, via_float32)
from .result import CheckResult, mistake_id
from . import _beyond as b, _beyond_experiments as x, _variations_early as v
from ._experiment import ExperimentCheck

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


# --------------------------------------------------------------------------- variance

#: Widths and sample count the variance check uses.
VARIANCE_DIMS = (4, 64, 256)
VARIANCE_SAMPLES = 20_000
#: The estimate must lie within this many standard errors of d_k.
VARIANCE_SIGMAS = 5.0


def variance_tolerance(d_k: int, n_samples: int) -> float:
    """Allowed distance of an estimate from ``d_k``: 5 standard errors.

    ``Var((q·k)^2) = 2 d_k^2 + 6 d_k``, so the sample variance of ``n`` dot products
    has a standard error of about ``d_k * sqrt((2 + 6 / d_k) / n)``.
    """
    return VARIANCE_SIGMAS * d_k * math.sqrt((2 + 6 / d_k) / n_samples)


# (what the estimate is near, name, hint[, how near]): each a known wrong answer's expected
# value. The mean of the dot products is 0 within a few sqrt(d_k / n): a wider window would
# also take in small variances that are no mean (of uniform draws, say).
def _variance_mistakes(d: int):
    return [
        (0.0, "the mean of the dot products instead of their variance",
         "return the variance (e.g. dots.var()), not the mean",
         VARIANCE_SIGMAS * math.sqrt(d / VARIANCE_SAMPLES)),
        (d * 7 / 144, "q and k drawn uniformly from [0, 1) (torch.rand) instead of from N(0, 1)",
         "draw from the standard normal distribution: torch.randn, not torch.rand"),
        (math.sqrt(d), "the standard deviation instead of the variance",
         "return the variance (std squared)"),
        (1.0, "the variance of the single products q_i * k_i (or of q·k / sqrt(d_k))",
         "sum the d_k products of each pair first ((q * k).sum(-1)), then take the variance"),
        (1.0 / d, "the variance of q·k / d_k (the dot products divided by d_k)",
         "take the variance of the dot products themselves: (q * k).sum(-1).var()"),
        (2.0 * d, "the variance of q·q (k is not drawn independently of q)",
         "draw q and k as two separate torch.randn calls"),
    ]


_VARIANCE = "dot_product_variance"
#: The spread tests: how many seeds each uses, at how many samples, and the spread it accepts
#: (in standard errors). At 500 samples an answer that ignores n_samples (a fixed 20,000 pairs,
#: or the formula plus noise of a fixed size) spreads far too little. At the estimates' 20,000,
#: an answer that uses fewer pairs spreads too much (a cap of 1,000 pairs passes the estimates
#: about 4 times in 10, and spreads sqrt(20) times too much). A right answer's 16 values
#: spread outside a range by chance less than once in a million (15 degrees of freedom,
#: chi-squared; at 500 samples the tails are heavier, hence the wider range).
SPREAD_TESTS = ((16, 500, (0.25, 3.0)), (16, VARIANCE_SAMPLES, (0.25, 2.0)))
_GENERATOR_HINT = ("draw every random number from the generator passed in: "
                   "torch.randn(..., generator=generator)")
_MEASURE_HINT = ("measure: draw n_samples pairs (q, k) from the generator and return the "
                 "variance of their dot products, not the formula")


def _where(d: int, n: int = VARIANCE_SAMPLES) -> str:
    return f"d_k={d}, n_samples={n}"


class _VarianceCheck(Check):
    """``dot_product_variance(d_k, n_samples, generator)``: a measurement, judged as one.

    Its inputs are ``(d_k, n_samples, generator seed)``; :meth:`run_student` makes the
    generator. The verdict: each estimate within 5 standard errors of ``d_k``; the same
    seed gives the same number and another seed another; over 16 seeds the answers spread
    as a sample variance does (:data:`SPREAD_TESTS`: a formula plus a little noise is too
    steady, an answer that uses fewer pairs than asked too wild).
    """

    def __init__(self) -> None:
        super().__init__("check_dot_product_variance", every_device=False)

    def plan(self, seed: int) -> List[Tuple[int, int, int]]:
        """The calls' ``(d_k, n_samples, generator seed)``: the estimates, the same seed again
        and another seed, then each spread test's seeds."""
        s, d, n = 1000 * seed, VARIANCE_DIMS[0], VARIANCE_SAMPLES
        plan = [(w, n, s + i) for i, w in enumerate(VARIANCE_DIMS)]
        plan += [(d, n, s), (d, n, s + 1)]  # reproducible, not fixed
        for t, (seeds, samples, _) in enumerate(SPREAD_TESTS):
            plan += [(d, samples, s + 100 * (t + 1) + k) for k in range(seeds)]
        return plan

    def calls(self, seed: int, **options: Any) -> List[Tuple[tuple, dict]]:
        self.resolve(options)
        return [(args, {}) for args in self.plan(seed)]

    def run_student(self, student: Any, args: tuple, kwargs: dict, **options: Any) -> Any:
        d, n, s = args
        got = student(d, n, torch.Generator().manual_seed(s))
        return plain_number(got), tuple(reference_names(student, _VARIANCE, NOTHING,
                                                            dict.fromkeys(self.given)))

    def judge(self, seed: int, outcomes: Sequence[Any], **options: Any) -> CheckResult:
        plan, values, notices = self.plan(seed), [], []
        for i, (d, n, _) in enumerate(plan):
            where = _where(d, n)
            fail = partial(CheckResult, _VARIANCE, False, seed, where)
            if i >= len(outcomes):
                return fail(what=f"your {_VARIANCE} did not finish on {where}", kind="timeout")
            out = outcomes[i]
            if isinstance(out, Raised):
                return out.failure(fail, hint=(
                    "draw on the generator's device: torch.randn(..., generator=generator, "
                    "device=generator.device)" if any(
                        w in out.message.lower() for w in ("generator", "device")) else ""))
            got, noticed = split_outcome(out)
            notices += [n for n in noticed if n not in notices]
            value = number_of(got)
            if value is None or not math.isfinite(value):
                return fail(what=f"it returned {shown(got)}, expected one finite number",
                            hint="return the variance as a float (e.g. dots.var().item()) or a "
                                 "one-element tensor")
            values.append(value)
        k = len(VARIANCE_DIMS)
        measured = [(d, value) for (d, _, _), value in zip(plan, values[:k])]
        # A named mistake first; an estimate that is merely off is said after the tests below,
        # which say why (too few pairs used, a generator ignored).
        off = None
        for d, value in measured:
            found = _judge_estimate(value, d, measured)
            if found and "mistake" in found:
                return CheckResult(_VARIANCE, False, seed, _where(d), **found)
            off = off or (found and CheckResult(_VARIANCE, False, seed, _where(d), **found))
        where = _where(VARIANCE_DIMS[0])
        if values[k] != values[0]:
            return CheckResult(_VARIANCE, False, seed, where, what="two calls with identically "
                               "seeded generators gave different answers", hint=_GENERATOR_HINT)
        if values[k + 1] == values[0]:
            return CheckResult(_VARIANCE, False, seed, where, what="generators with different "
                               "seeds gave exactly the same answer", hint=_MEASURE_HINT)
        start = k + 2
        for seeds, samples, (low, high) in SPREAD_TESTS:
            spread, start = values[start:start + seeds], start + seeds
            se = variance_tolerance(VARIANCE_DIMS[0], samples) / VARIANCE_SIGMAS
            mean = sum(spread) / seeds
            sd = math.sqrt(sum((v - mean) ** 2 for v in spread) / (seeds - 1))
            where = _where(VARIANCE_DIMS[0], samples)
            if not low * se <= sd <= high * se:
                return CheckResult(_VARIANCE, False, seed, where, what=(
                    f"over {seeds} seeds the answers spread by {sd:.3g}, where a sample variance "
                    f"of n_samples dot products spreads by about {se:.3g}: " + (
                        "too steady for that many samples: is n_samples used?" if sd < low * se
                        else "more than that many pairs would: are all n_samples pairs used?")),
                    hint="measure: return the variance of the dot products of all n_samples "
                         "pairs q, k you drew, nothing added or rounded")
        return off or CheckResult(_VARIANCE, True, seed, notice=notice_text(notices))


def _near(value: float, d: int, index: int) -> bool:
    """Whether ``value``, measured at width ``d``, is near known mistake ``index``'s value:
    within 15% (a mistake's own estimate is off by a few percent at most over 20,000 samples;
    the right answer's tolerance, d_k's, would take in the small values of other mistakes)."""
    near, _, _, *within = _variance_mistakes(d)[index]
    return abs(value - near) <= (within[0] if within else max(0.15 * abs(near), 0.05))


def _judge_estimate(value: float, d: int,
                    measured: Sequence[Tuple[int, float]] = ()) -> Optional[dict]:
    """The fields of a failure unless ``value`` is within the tolerance of ``d``, naming the
    mistake it is near at every width ``measured`` (at d_k = 4 alone, a uniform draw's 0.19 and
    q·k / d_k's 0.25 lie within the sampling error: the other widths tell them apart)."""
    tol = variance_tolerance(d, VARIANCE_SAMPLES)
    if abs(value - d) <= tol:
        return None
    for i, (_, mistake, hint, *_) in enumerate(_variance_mistakes(d)):
        if _near(value, d, i) and all(_near(v, w, i) for w, v in measured):
            return dict(what=f"got {value:.4g}, which looks like {mistake}", hint=hint,
                        mistake=mistake, mistake_id=mistake_id(mistake))
    return dict(what=f"got {value:.4g}, expected d_k = {d} within {tol:.3g} (5 standard errors)")


VARIANCE_CHECK = _VarianceCheck()


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
