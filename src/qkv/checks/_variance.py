"""``dot_product_variance``'s check (assignment 4): a measurement, judged as one.

The estimate must lie within a stated tolerance of ``d_k`` at three widths, come from the
generator passed in (the same seed, the same number; another seed, another; at least a
quarter of the ``2 * n_samples * d_k`` numbers drawn from it), and vary from seed to seed as a
sample variance of ``n_samples`` dot products does; an estimate near a known wrong quantity
(the mean, the standard deviation, q·q...) is named after it.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, List, Optional, Sequence, Tuple

import torch

from .harness import (Check, Raised, drawn_count, notice_text, number_of, plain_number,
                      reference_names, shown, split_outcome, twists, NOTHING, WORDS_PER_TWIST)
from ._experiment import DRAWS_FRACTION, OWN_GENERATOR
from ._printed import rounded
from .result import CheckResult, mistake_id

__all__: list = []

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
#: The first estimate's call also counts what it drew (:func:`.harness.twists`): n_samples
#: pairs of d_k-wide vectors are 2 * n_samples * d_k numbers; a DRAWS_FRACTION of that is the
#: least a measurement may draw (the formula plus one draw of noise draws 1).
_FEWER = "fewer pairs than n_samples, or no measurement"


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

    def plan(self, seed: int) -> List[Tuple[int, int, int, bool]]:
        """The calls' ``(d_k, n_samples, generator seed, count what it drew)``: the estimates,
        the same seed again and another seed, then each spread test's seeds."""
        s, d, n = 1000 * seed, VARIANCE_DIMS[0], VARIANCE_SAMPLES
        plan = [(w, n, s + i, i == 0) for i, w in enumerate(VARIANCE_DIMS)]
        plan += [(d, n, s, False), (d, n, s + 1, False)]  # reproducible, not fixed
        for t, (seeds, samples, _) in enumerate(SPREAD_TESTS):
            plan += [(d, samples, s + 100 * (t + 1) + k, False) for k in range(seeds)]
        return plan

    def calls(self, seed: int, **options: Any) -> List[Tuple[tuple, dict]]:
        self.resolve(options)
        return [(args, {}) for args in self.plan(seed)]

    def run_student(self, student: Any, args: tuple, kwargs: dict, **options: Any) -> Any:
        d, n, s, count = args
        generator = torch.Generator().manual_seed(s)
        got = plain_number(student(d, n, generator))
        return (got, twists(s, generator)) if count else got, tuple(reference_names(
            student, NOTHING, dict.fromkeys(self.given)))

    def judge(self, seed: int, outcomes: Sequence[Any], **options: Any) -> CheckResult:
        plan, values, notices, drew = self.plan(seed), [], [], None
        for i, (d, n, _, count) in enumerate(plan):
            where = _where(d, n)
            fail = partial(CheckResult, _VARIANCE, False, seed, where)
            if i >= len(outcomes):
                return fail(what=f"your {_VARIANCE} did not finish on {where}", kind="timeout",
                            hint="on whole tensors the measurement takes well under a second: "
                                 "the n_samples dot products are (q * k).sum(-1) (not "
                                 "(q @ k.T).diagonal(), an n_samples x n_samples matrix, nor a "
                                 "Python loop over the pairs)")
            out = outcomes[i]
            if isinstance(out, Raised):
                return out.failure(fail, hint=(
                    "draw on the generator's device: torch.randn(..., generator=generator, "
                    "device=generator.device)" if any(
                        w in out.message.lower() for w in ("generator", "device")) else ""))
            got, noticed = split_outcome(out)
            notices += [n for n in noticed if n not in notices]
            if count and isinstance(got, (tuple, list)) and len(got) == 2:
                got, drew = got[0], drawn_count(got[1])
            value = number_of(got)
            if value is None or not math.isfinite(value):
                return fail(what=f"it returned {shown(got)}, expected one finite number",
                            hint="return the variance as a float (e.g. dots.var().item()) or a "
                                 "one-element tensor")
            values.append(value)
        if all(_is_all_pairs(value, *p[:3]) for p, value in zip(plan, values)):
            return CheckResult(_VARIANCE, False, seed, _where(VARIANCE_DIMS[0]), what=(
                f"each answer is the variance of {_ALL_PAIRS}, to float32's last digits on the "
                "same draws"),
                hint=_ALL_PAIRS_HINT, mistake=_ALL_PAIRS, mistake_id=mistake_id(_ALL_PAIRS))
        verdict = self._verdict(seed, plan, values, drew, notices)
        found = not verdict.passed and rounded(values, [_measured(*p[:3]) for p in plan])
        return CheckResult(_VARIANCE, False, seed, verdict.input, what=found[0], hint=found[1],
                           mistake=found[2], mistake_id=mistake_id(found[2])) if found else verdict

    def _verdict(self, seed: int, plan: list, values: List[float], drew: Optional[int],
                 notices: list) -> CheckResult:
        k = len(VARIANCE_DIMS)
        measured = [(d, value) for (d, *_), value in zip(plan, values[:k])]
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
        drawn = 2 * VARIANCE_SAMPLES * VARIANCE_DIMS[0]
        if drew is not None and drew * WORDS_PER_TWIST < drawn // DRAWS_FRACTION:
            return CheckResult(_VARIANCE, False, seed, where, what=(
                "it drew nothing from the generator passed in" if drew == 0 else
                f"it drew at most {drew * WORDS_PER_TWIST:,} random numbers from the generator, "
                f"where n_samples pairs of d_k-wide vectors are {drawn:,}: fewer pairs than "
                "asked, pairs drawn from another generator (a copy of it, one seeded from it), "
                "or no measurement"),
                hint=f"{_GENERATOR_HINT if drew == 0 else _MEASURE_HINT}; {OWN_GENERATOR}",
                **({} if drew == 0 else dict(mistake=_FEWER, mistake_id=mistake_id(_FEWER))))
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


def _measured(d: int, n: int, seed: int) -> float:
    """The variance of ``n`` dot products at width ``d`` as described (one draw of the queries,
    then one of the keys), drawn on ``seed``: ``qkv.dot_product_variance`` draws in chunks at
    large widths, so its numbers differ from a student's there."""
    q, k = _drawn(d, n, seed)
    return (q * k).sum(dim=-1).var().item()


def _drawn(d: int, n: int, seed: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """The ``(n, d)`` queries and keys a student draws on ``seed``: the queries first."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(n, d, generator=generator)
    return q, torch.randn(n, d, generator=generator)


_ALL_PAIRS = ("every query against every key (q @ k.T, n_samples^2 dot products), not of "
              "the n_samples pairs")
_ALL_PAIRS_HINT = ("take the variance of the n_samples paired dot products, (q * k).sum(-1).var(); "
                   "(q @ k.T).var() pairs each query with every key, and also builds an "
                   "n_samples x n_samples matrix (1.6 GB at 20,000 samples)")


def _is_all_pairs(value: float, d: int, n: int, seed: int) -> bool:
    """Whether ``value`` is, to float32's rounding (1e-5 of it), the variance of all ``n * n``
    products ``q_i·k_j`` of the draws on ``seed``: ``(q @ k.T).var()``. Computed without the
    matrix: the mean is ``sum(q)·sum(k) / n^2`` and the mean square ``sum((QᵀQ) * (KᵀK)) /
    n^2``. A right answer, the variance of the ``n`` pairs, differs from it by about 1% (its
    sampling error): within 1e-5 about once in a thousand calls, so at every call of the plan
    (the check asks this of all of them) never. (A per-call condition that the pairs' variance
    differ by more than the tolerance failed a wrong answer on about a third of the seeds.)"""
    q, k = (t.double() for t in _drawn(d, n, seed))
    count = n * n
    mean = (q.sum(0) @ k.sum(0)) / count
    pairs = (((q.T @ q) * (k.T @ k)).sum() - count * mean ** 2) / (count - 1)
    return abs(value - pairs.item()) <= 1e-5 * abs(pairs.item())


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
