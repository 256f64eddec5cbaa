"""Checking an experiment: the student's function measures a quantity from a generator, and the
check judges the numbers it returns as *measurements*, not against a literal.

An :class:`Experiment` names the student's function, the reference measurement (the same
experiment, written with :mod:`qkv`) and the settings it is run at. Its check
(:class:`ExperimentCheck`) calls the student's ``f(*setting, generator)`` on many seeds and the
reference on as many other seeds, then asks, per setting:

- the same seed gives the same number (the randomness comes from the generator passed in);
- the numbers vary from seed to seed when the reference's do (a measurement, not a formula);
- the first seed's call drew at least a quarter as many numbers from its generator as the
  experiment as described draws (:func:`.harness.twists` counts them from the generator's
  state): a measurement on 16 rows where 256 are asked for, or a formula plus one draw of
  noise, has a plausible mean and spread, not the draws;
- they are the reference's own numbers on the same seeds (the experiment done as described,
  drawing in the order given: passes, whatever the seed); otherwise
- they are not one of the experiment's known mistakes on the same seeds (the experiment done
  with one slip, drawing in the order given: the slip is named, even one whose mean is right,
  like padding_leak without its scale);
- their mean agrees with the reference's within 5 standard errors of the difference of two
  means: a right measurement drawn in another order fails by chance about never (none in 3,000
  tries of the most heavy-tailed experiment), a measurement of something else fails (named
  after a known mistake whose mean it has, when one has it and the reference's does not);
- where an experiment says so (``spread``), their spread agrees with the reference's within
  its factor, 4 as a rule (the median absolute deviations; a right answer's ratio stayed within 0.40-2.34
  over 1,200 tries of padding_leak): a mistake whose mean is right by symmetry (every key gets
  1/S on average, whatever the scale) still changes how much the numbers vary.

Elsewhere the spread is not compared beyond "it varies": most quantities are heavy-tailed
(ALiBi's far weight, a ratio of exponentials) and a sample standard deviation of 12 of them is
off by a factor of 4 about once in 300 tries; a right answer must never fail by chance.

Every step is data in, data out (:mod:`qkv.checks.grading`): the inputs are the setting and a
seed (:meth:`ExperimentCheck.calls`), the sandbox makes the generator and calls the student's
function (:meth:`ExperimentCheck.run_student`), and the verdict compares the numbers that come
back with the reference's (:meth:`ExperimentCheck.judge`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple

import torch

from .harness import (NOTHING, Check, Mistake, Raised, drawn_count, notice_text, number_of,
                      on_helpers, plain_number, reference_names, shown, split_outcome, twists,
                      WORDS_PER_TWIST)
from .result import CheckResult, mistake_id
from ._printed import PERCENT, rounded

#: Standard errors of the difference of the means that a right measurement may be off by.
SIGMAS = 5.0
#: Standard errors from a known mistake's mean within which a measurement is named after it.
NAMED_SIGMAS = 2.0
#: How far (a factor, either way) the spread of a right measurement may be from the reference's.
SPREAD = 4.0
_GENERATOR_HINT = ("draw every random number from the generator passed in: "
                   "torch.randn(..., generator=generator)")
#: Said with a count too low: a right measurement drawn from a generator of its own (a clone
#: of the one passed in, one seeded from a number drawn from it, NumPy's) draws nothing, or one
#: number, from the generator passed in; its count cannot tell it from too few samples.
OWN_GENERATOR = ("draw from the generator passed in itself, not from a copy of it or a "
                 "generator of your own seeded from it (torch's global one, NumPy's): what the "
                 "check counts is what that generator gave out")


#: A measurement must draw at least this fraction of what the experiment as described draws
#: from the generator (counted in twists, :mod:`.harness._draws`): 16 rows where 256 are asked
#: for draw 1/16, a formula plus one draw of noise one number; a right answer drawn in another
#: way (float64, a loop, the keys first) draws about as much, or more. Less is not always
#: caught: 2 queries of 32 in max_weight still draw the 32 keys, about half of the numbers.
DRAWS_FRACTION = 4
#: Below this many twists (about 5,000 numbers) a quarter is at most one twist, which any draw
#: makes: the count tells only whether anything was drawn.
DRAWS_SMALLEST = 8
FEWER = "fewer samples than the experiment asks for"

_NOT_FINITE_HINT = ("a NaN or inf inside the measurement: 0 * log(0) is NaN (clamp the weights, "
                    "w.clamp_min(1e-30), before the log), so is inf - inf or 0 / 0 (a softmax "
                    "without its maximum subtracted, a row with every score masked)")


@dataclass(frozen=True)
class Experiment:
    """One experiment a student writes and runs.

    Args:
        name: the student's function, ``name(*setting, generator) -> float``.
        reference: the same measurement from :mod:`qkv` (same signature).
        settings: the positional arguments before the generator, one tuple per setting checked.
        quantity: what the number is, in words ("the mean largest weight of a row").
        hint: what to look at when the numbers are not the reference's.
        seeds: seeds per setting (48: a mean 5 standard errors off is refused, so more seeds
            tell apart smaller differences; an experiment that trains keeps 12).
        helpers: the student's other answers the experiment may call (name -> the
            reference's): while it runs they are the reference's, so that a missing or wrong
            helper costs only its own test (see :mod:`._helpers`).
        mistakes: the experiment with one slip (same signature), named when the student's
            numbers are its numbers on the same seeds, or have its mean.
        spread: compare the spread too, to within this factor either way (0: not compared;
            :data:`SPREAD` for quantities measured to be light-tailed enough that a right
            answer's spread is never off by it, more for one whose values are coarse).
        floor: differences of means below it are rounding, not the measurement (a setting
            whose answer is 0 but for float32's rounding: an answer in float64, or exactly 0
            every seed, is right there).
    """

    name: str
    reference: Callable[..., float]
    settings: Tuple[tuple, ...]
    quantity: str
    hint: str
    seeds: int = 48
    helpers: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    mistakes: Tuple[Mistake, ...] = ()
    spread: float = 0.0
    floor: float = 0.0


def _where(exp: Experiment, setting: tuple) -> str:
    args = ", ".join(repr(a) for a in setting)
    return f"{exp.name}({args}{', ' if args else ''}generator)"


def reference_values(exp: Experiment, setting: tuple, seed: int,
                     measure: Optional[Callable[..., float]] = None) -> List[float]:
    """The reference's (or ``measure``'s) numbers at ``setting`` on ``exp.seeds`` seeds other
    than the student's."""
    measure = measure or exp.reference
    return [float(measure(*setting, torch.Generator().manual_seed(10**6 + 1000 * seed + k)))
            for k in range(exp.seeds)]


def same_seeds(exp: Experiment, setting: tuple, seeds: Sequence[int],
               values: Sequence[float], measure: Optional[Callable[..., float]] = None) -> bool:
    """Whether ``values`` are the reference's (or ``measure``'s) numbers on the same ``seeds``
    (to float32's rounding: a sum taken in another order differs in the last digits)."""
    measure = measure or exp.reference
    return all(math.isclose(v, float(measure(*setting, torch.Generator().manual_seed(s))),
                            rel_tol=1e-4, abs_tol=1e-7) for v, s in zip(values, seeds))


def _mad(values: Sequence[float]) -> float:
    middle = statistics.median(values)
    return statistics.median(abs(v - middle) for v in values)


def _off(mean: float, sd: float, other: Sequence[float], n: int, floor: float = 0.0) -> float:
    """How far ``mean`` is from ``other``'s mean, in allowed distances (more than 1: refused)."""
    theirs = statistics.fmean(other)
    allowed = SIGMAS * math.sqrt((sd ** 2 + statistics.stdev(other) ** 2) / n) + floor
    return abs(mean - theirs) / (allowed + 1e-9 * (1 + abs(theirs)))


def reference_twists(exp: Experiment, setting: tuple) -> int:
    """How many times the reference's measurement at ``setting`` twists its generator (624
    numbers a twist, :mod:`.harness._draws`)."""
    generator = torch.Generator().manual_seed(10**6)
    exp.reference(*setting, generator)
    return twists(10**6, generator) or 0


_SLIP = "your numbers are, seed for seed, the experiment's with a slip: "


def judge_values(exp: Experiment, setting: tuple, values: Sequence[float],
                 reference: Sequence[float], seeds: Sequence[int] = (),
                 seed: int = 0, drew: Optional[int] = None,
                 made: int = 0) -> Optional[Tuple[str, str, str]]:
    """:func:`_judged`'s verdict, told as rounding (or a percentage, unless the experiment
    names its own percentage seed for seed) where the numbers are rounded."""
    found = _judged(exp, setting, values, reference, seeds, seed, drew, made)
    told = found and seeds and rounded(values[:-1], [
        float(exp.reference(*setting, torch.Generator().manual_seed(s)))
        for s in seeds[:len(values) - 1]])
    return found if told and told[2] == PERCENT and found[0].startswith(_SLIP) else told or found


def _judged(exp: Experiment, setting: tuple, values: Sequence[float],
            reference: Sequence[float], seeds: Sequence[int] = (),
            seed: int = 0, drew: Optional[int] = None,
            made: int = 0) -> Optional[Tuple[str, str, str]]:
    """``(what, hint, mistake)`` unless ``values`` (the student's on ``seeds``, the first seed
    repeated last) behave as a measurement of the reference's quantity; ``None`` when they do.
    ``mistake`` is the known mistake's name, ``""`` when none is recognised. ``drew``: the
    twists the student's measurement made on the first seed, ``made`` the reference's; fewer
    than a :data:`DRAWS_FRACTION` of them is refused."""
    mine = list(values[:-1])
    if values[-1] != values[0]:
        return "two calls with identically seeded generators gave different numbers", \
            (_GENERATOR_HINT + "; and leave nothing changed behind you: a model's weights "
             "zeroed in place must be restored before the function returns"), ""
    for mistake in exp.mistakes:
        if seeds and same_seeds(exp, setting, seeds[:len(mine)], mine, mistake.fn):
            return (f"{_SLIP}{mistake.name}", mistake.hint, mistake.name)
    ref_sd, my_sd = statistics.stdev(reference), statistics.stdev(mine)
    if ref_sd > exp.floor and my_sd == 0:
        return (f"every seed gave {mine[0]:.4g}, whatever the inputs drawn: not a measurement "
                "of them", "if you measure, your code cannot see what it counts (a "
                "selection that is always empty, a mask that hides it all): try it on an input "
                "where the answer is known; and draw the inputs from the generator and measure, "
                "do not return a formula", "")
    if drew == 0 and made:
        return (f"your {exp.name} drew nothing from the generator passed in",
                f"{_GENERATOR_HINT}; {OWN_GENERATOR}", "")
    if drew is not None and made >= DRAWS_SMALLEST and drew < made // DRAWS_FRACTION:
        return (f"your {exp.name} drew at most {drew * WORDS_PER_TWIST:,} random numbers from "
                f"the generator, where the experiment as described draws about "
                f"{made * WORDS_PER_TWIST:,}: it measures on fewer samples than asked, "
                "draws them from another generator (a copy of it, one seeded from it), or is "
                "not a measurement", f"draw every sample the experiment asks for from the "
                f"generator and measure on all of them ({exp.hint}); {OWN_GENERATOR}", FEWER)
    n = len(mine)
    mean, ref_mean = statistics.fmean(mine), statistics.fmean(reference)
    if _off(mean, my_sd, reference, n, exp.floor) > 1:
        said = (f"over {n} seeds your {exp.quantity} averages {mean:.4g}, where the experiment "
                f"as described averages {ref_mean:.4g} (more than {SIGMAS:g} standard errors "
                "away)")
        # The known mistake whose mean this is (the nearest, when several are near), within
        # NAMED_SIGMAS standard errors: a slip drawn in another order is named 19 times in
        # 20, and a measurement of something else that only lands within 5 of a slip's mean
        # (a "> 17" for "> 16") is not named after it.
        near = sorted((_off(mean, my_sd, reference_values(exp, setting, seed, m.fn), n,
                            exp.floor), i)
                      for i, m in enumerate(exp.mistakes))
        if near and near[0][0] <= NAMED_SIGMAS / SIGMAS:
            mistake = exp.mistakes[near[0][1]]
            # A mean alone cannot tell which measurement it is: say it is likely, and give
            # the experiment's own recipe too.
            return (f"{said}; that is close to the average of the experiment with a slip, "
                    f"likely yours: {mistake.name}", f"{mistake.hint} (if that is not what "
                    f"you did: {exp.hint})", mistake.name)
        return said, exp.hint, ""
    if exp.spread and ref_sd > 0:
        ratio = _mad(mine) / max(_mad(reference), 1e-12)
        if not 1 / exp.spread <= ratio <= exp.spread:
            return (f"over {n} seeds your {exp.quantity} varies {ratio:.2g} times as much as the "
                    "experiment as described (its mean is right, its spread is not)", exp.hint, "")
    return None


class ExperimentCheck(Check):
    """The check of an :class:`Experiment` (see the module docstring).

    One input per setting, ``(*setting, generator seeds)``: ``exp.seeds`` seeds and the first
    one again; :meth:`run_student` makes a generator for each and returns the numbers (one call
    a setting: where the student's code runs apart, each call is a round trip).
    """

    def __init__(self, exp: Experiment) -> None:
        # An experiment is sampling, honestly slow on a busy machine: a minute per setting.
        super().__init__(f"check_{exp.name}", every_device=False, seconds=60.0)
        self.exp = exp
        self._made: dict = {}

    def plan(self, seed: int) -> List[Tuple[tuple, int]]:
        return [(setting, 1000 * seed + 17 * i + k) for i, setting in enumerate(self.exp.settings)
                for k in [*range(self.exp.seeds), 0]]

    def calls(self, seed: int, **options: Any) -> List[Tuple[tuple, dict]]:
        self.resolve(options)
        n = self.exp.seeds + 1
        plan = self.plan(seed)
        return [((*setting, tuple(s for _, s in plan[i * n:(i + 1) * n])), {})
                for i, setting in enumerate(self.exp.settings)]

    def measure(self, student: Any, setting: Sequence[Any], seeds: Sequence[int],
                *first: Any) -> Any:
        """The student's numbers on ``seeds`` (``first``: what comes before the setting) with
        the twists the first one made (:func:`.harness.twists`), and the course's functions it
        names beyond what it may."""
        def numbers() -> Tuple[tuple, Optional[int]]:
            values, drew = [], None
            for i, s in enumerate(seeds):
                generator = torch.Generator().manual_seed(s)
                values.append(plain_number(student(*first, *setting, generator)))
                drew = twists(s, generator) if i == 0 else drew
            return tuple(values), drew

        got = on_helpers(student, self.exp.helpers, numbers)
        # The helpers the experiment may call are no delegation, nor is what the assignment's
        # set-up cell gives (``given``: assignment 4's softmax).
        allowed = {**self.exp.helpers, **dict.fromkeys(self.given)}
        return got, tuple(reference_names(student, NOTHING, allowed))

    def run_student(self, student: Any, args: tuple, kwargs: dict, **options: Any) -> Any:
        *setting, seeds = args
        return self.measure(student, setting, seeds)

    def made(self, setting: tuple) -> int:
        """The twists the reference's measurement at ``setting`` makes (measured once)."""
        if setting not in self._made:
            self._made[setting] = reference_twists(self.exp, setting)
        return self._made[setting]

    def judge(self, seed: int, outcomes: Sequence[Any], **options: Any) -> CheckResult:
        exp, plan, values, notices, drawn = self.exp, self.plan(seed), [], [], []
        for i, setting in enumerate(exp.settings):
            fail = partial(CheckResult, exp.name, False, seed, _where(exp, setting))
            if i >= len(outcomes):
                return fail(what=f"your {exp.name} did not finish on {_where(exp, setting)}",
                            kind="timeout")
            if isinstance(outcomes[i], Raised):
                return outcomes[i].failure(fail)
            got, noticed = split_outcome(outcomes[i])
            notices += [n for n in noticed if n not in notices]
            got, drew = got if _counted(got) else (got, None)
            drawn.append(drawn_count(drew))
            got = got if isinstance(got, (tuple, list)) else (got,)
            for one in list(got)[:exp.seeds + 1]:
                value = number_of(one)
                if value is None:
                    return fail(what=f"it returned {shown(one)}, expected one finite number",
                                hint="return the measurement as a float (e.g. "
                                     "tensor.mean().item())")
                if not math.isfinite(value):
                    return fail(what=f"it returned {value}, expected one finite number",
                                hint=_NOT_FINITE_HINT)
                values.append(value)
            if len(got) != exp.seeds + 1:  # what crossed is the student's to choose
                return fail(what=f"your {exp.name} did not finish on {_where(exp, setting)}",
                            kind="timeout")
        n = exp.seeds + 1
        for i, setting in enumerate(exp.settings):
            mine, seeds = values[i * n:(i + 1) * n], [s for _, s in plan[i * n:(i + 1) * n]]
            if same_seeds(exp, setting, seeds[:-1], mine[:-1]) and mine[-1] == mine[0]:
                continue
            found = judge_values(exp, setting, mine, reference_values(exp, setting, seed),
                                 seeds, seed, drawn[i], self.made(setting))
            if found:
                what, hint, mistake = found
                return CheckResult(exp.name, False, seed, _where(exp, setting), what=what,
                                   hint=hint, mistake=mistake,
                                   mistake_id=mistake_id(mistake) if mistake else "")
        return CheckResult(exp.name, True, seed, notice=notice_text(notices))


def _counted(got: Any) -> bool:
    """Whether ``got`` is ``(numbers, twists)`` as :meth:`ExperimentCheck.measure` sends it."""
    return isinstance(got, (tuple, list)) and len(got) == 2 and isinstance(got[0], (tuple, list))
