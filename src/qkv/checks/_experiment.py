"""Checking an experiment: the student's function measures a quantity from a generator, and the
check judges the numbers it returns as *measurements*, not against a literal.

An :class:`Experiment` names the student's function, the reference measurement (the same
experiment, written with :mod:`qkv`) and the settings it is run at. :func:`run_experiment`
calls the student's ``f(*setting, generator)`` on many seeds in one guarded pass (as
:mod:`._measure` does for ``dot_product_variance``) and the reference on as many other seeds,
then asks, per setting:

- the same seed gives the same number (the randomness comes from the generator passed in);
- the numbers vary from seed to seed when the reference's do (a measurement, not a formula);
- their mean agrees with the reference's within 5 standard errors of the difference of two
  means, and their spread is within a factor of 4 of the reference's: a right measurement fails
  by chance far less than once in a million, a measurement of something else fails.

Every step is data in, data out: seeds -> the student's numbers -> a verdict against the
reference's numbers, so a trusted grader can run it the same way.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch

from ._budget import OverTime, limits, over_time
from ._exercise import NOTHING
from ._guard import Guard
from ._harness import start_check
from ._messages import NOT_WRITTEN
from ._run import call_guarded, checking

#: Standard errors of the difference of the means that a right measurement may be off by.
SIGMAS = 5.0
#: How far the spread over seeds may be from the reference's (a factor either way).
SPREAD_FACTOR = 4.0


@dataclass(frozen=True)
class Experiment:
    """One experiment a student writes and runs.

    Args:
        name: the student's function, ``name(*setting, generator) -> float``.
        reference: the same measurement from :mod:`qkv` (same signature).
        settings: the positional arguments before the generator, one tuple per setting checked.
        quantity: what the number is, in words ("the mean largest weight of a row").
        hint: what to look at when the numbers are not the reference's.
        seeds: seeds per setting.
    """

    name: str
    reference: Callable[..., float]
    settings: Tuple[tuple, ...]
    quantity: str
    hint: str
    seeds: int = 12


def _number(got: Any) -> Optional[float]:
    if type(got) in (int, float):
        return float(got)
    if type(got) is torch.Tensor and got.numel() == 1 and got.is_floating_point():
        return float(got.detach().reshape(()).item())
    return None


def _where(exp: Experiment, setting: tuple) -> str:
    args = ", ".join(repr(a) for a in setting)
    return f"{exp.name}({args}{', ' if args else ''}generator)"


def _fail(exp: Experiment, where: str, what: str, hint: str = "", note: str = "") -> None:
    __tracebackhide__ = True
    raise AssertionError(f"{exp.name}: wrong on {where}: {what}"
                         + (f"\nLook at: {hint}" if hint else "") + note)


def _student_values(exp: Experiment, student: Any, seed: int, note: str) -> List[List[float]]:
    """The student's numbers: per setting, ``seeds`` seeds and the first seed once more."""
    __tracebackhide__ = True
    plan = [(setting, 1000 * seed + 17 * i + k) for i, setting in enumerate(exp.settings)
            for k in [*range(exp.seeds), 0]]
    inputs = [((*setting, torch.Generator().manual_seed(s)), {}) for setting, s in plan]
    with checking(exp.name) as session:
        guard = Guard(exp.name, NOTHING)
        results, problems = call_guarded(guard, student, None, inputs, [[] for _ in plan],
                                         session, name=exp.name)
    last = _where(exp, plan[len(results) - 1][0])
    if guard.tripped:
        _fail(exp, last, guard.tripped, note=note)
    if isinstance(results[-1][1], OverTime):
        raise AssertionError(over_time(exp.name, limits()[0], last) + note)
    if problems:
        _fail(exp, last, f"your code changed {'; '.join(problems)} while the check ran; the "
              "checks refuse that", note=note)
    values: List[float] = []
    for (setting, _), (got, error, _) in zip(plan, results):
        if isinstance(error, NotImplementedError):
            raise AssertionError(f"{exp.name} {NOT_WRITTEN}")
        if error is not None:
            first = (str(error).strip().splitlines() or [""])[0]
            _fail(exp, _where(exp, setting), f"it raised {type(error).__name__}: {first}",
                  note=note)
        value = _number(got)
        if value is None or not math.isfinite(value):
            _fail(exp, _where(exp, setting), f"it returned {got!r}, expected one finite number",
                  "return the measurement as a float (e.g. tensor.mean().item())", note)
        values.append(value)
    n = exp.seeds + 1
    return [values[i * n:(i + 1) * n] for i in range(len(exp.settings))]


def reference_values(exp: Experiment, setting: tuple, seed: int) -> List[float]:
    """The reference's numbers at ``setting`` on ``exp.seeds`` seeds other than the student's."""
    return [float(exp.reference(*setting, torch.Generator().manual_seed(10**6 + 1000 * seed + k)))
            for k in range(exp.seeds)]


def judge(exp: Experiment, setting: tuple, values: Sequence[float], reference: Sequence[float],
          note: str = "") -> None:
    """Fail unless ``values`` (the student's, with the first seed repeated last) behave as a
    measurement of the reference's quantity.

    Raises:
        AssertionError: naming the setting and what is wrong (not reproducible, not varying,
            a mean or spread unlike the reference's).
    """
    __tracebackhide__ = True
    where, mine = _where(exp, setting), list(values[:-1])
    if values[-1] != values[0]:
        _fail(exp, where, "two calls with identically seeded generators gave different numbers",
              "draw every random number from the generator passed in: "
              "torch.randn(..., generator=generator)", note)
    ref_sd = statistics.stdev(reference)
    my_sd = statistics.stdev(mine)
    if ref_sd > 0 and my_sd == 0:
        _fail(exp, where, f"every seed gave {mine[0]:.4g}: this is not a measurement",
              "draw the inputs from the generator and measure; do not return a formula", note)
    n = len(mine)
    gap = abs(statistics.fmean(mine) - statistics.fmean(reference))
    allowed = SIGMAS * math.sqrt((my_sd ** 2 + ref_sd ** 2) / n) + 1e-9 * (1 + abs(
        statistics.fmean(reference)))
    if gap > allowed:
        _fail(exp, where, f"over {n} seeds your {exp.quantity} averages "
              f"{statistics.fmean(mine):.4g}, where the experiment as described averages "
              f"{statistics.fmean(reference):.4g} (more than {SIGMAS:g} standard errors away)",
              exp.hint, note)
    if ref_sd > 0 and not ref_sd / SPREAD_FACTOR <= my_sd <= ref_sd * SPREAD_FACTOR:
        _fail(exp, where, f"over {n} seeds your numbers spread by {my_sd:.3g}, where the "
              f"experiment's spread by about {ref_sd:.3g}: measure once per call, with the sizes "
              "given", exp.hint, note)


def run_experiment(exp: Experiment, student: Any, seed: Optional[int] = 0) -> List[List[float]]:
    """Check the student's experiment at every setting (see the module docstring).

    Returns:
        The student's numbers, per setting (what the check judged).

    Raises:
        AssertionError: naming the setting and what is wrong.
    """
    __tracebackhide__ = True
    seed, note = start_check(exp.name, student, seed)
    values = _student_values(exp, student, seed, note)
    for setting, mine in zip(exp.settings, values):
        judge(exp, setting, mine, reference_values(exp, setting, seed), note)
    return values
