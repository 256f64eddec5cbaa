"""Checking a measurement (``dot_product_variance``): one guarded pass over many seeds, then
tests that the numbers behave like a measurement and not like a formula.

The student's function gets ``(d_k, n_samples, generator)`` and returns one number. It is
called on every seed in one pass inside the guard (:func:`measure`), while a watcher counts
the random numbers it draws (any seeded random ``aten`` operator). Then: each call must
draw at least ``2 * n_samples * d_k`` numbers (q and k, :func:`judge_draws`), the same seed
must give the same
answer and another seed another (:func:`judge_generator`), and over many seeds the answers
must spread as a sample variance does (:func:`judge_spread`): a formula plus a little noise
is too steady, whatever generator the noise comes from.
"""

from __future__ import annotations

import math
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch

from ._budget import OverTime, limits, over_time
from ._compare import _type, is_tensor
from ._exercise import NOTHING
from ._guard import Guard, _tensors, harness
from ._run import call_guarded, checking

_NAME = "dot_product_variance"
_SEEDED = torch.Tag.nondeterministic_seeded
#: How many seeds the spread test uses, and the spread it accepts (in standard errors).
SPREAD_SEEDS = 16
SPREAD_RANGE = (0.25, 3.0)
_GENERATOR_HINT = ("draw every random number from the generator passed in: "
                   "torch.randn(..., generator=generator)")


class DrawCount:
    """Counts the random numbers a call draws (outputs of seeded random operators)."""

    def __init__(self) -> None:
        self.drawn = 0

    @harness
    def observe_op(self, op: Any, args: tuple, kwargs: dict, out: Any) -> None:
        if _SEEDED in op.tags:
            self.drawn += sum(t.numel() for t in _tensors(out, []))


def _as_number(value: Any) -> Optional[float]:
    """The answer as a float: a Python int or float, or a plain one-element float tensor."""
    if _type(value) in (int, float):
        return float(value)
    if is_tensor(value) and value.numel() == 1 and value.is_floating_point():
        return float(value.detach().reshape(()).item())
    return None


def _fail(where: str, what: str, hint: str = "", note: str = "") -> None:
    __tracebackhide__ = True
    raise AssertionError(f"{_NAME}: wrong on {where}: {what}"
                         + (f"\nLook at: {hint}" if hint else "") + note)


def _value(got: Any, error: Optional[BaseException], where: str, note: str) -> float:
    """One answer as a number, or a failure naming what is wrong with it."""
    __tracebackhide__ = True
    if isinstance(error, NotImplementedError):
        raise AssertionError(f"{_NAME} is not written yet (it raises NotImplementedError): "
                             f"replace the `raise` line")
    if error is not None:
        first = (str(error).strip().splitlines() or [""])[0]
        hint = ("draw on the generator's device: torch.randn(..., generator=generator, "
                "device=generator.device)" if any(w in str(error).lower()
                                                  for w in ("generator", "device")) else "")
        _fail(where, f"it raised {type(error).__name__}: {first}", hint, note)
    value = _as_number(got)
    if value is None or not math.isfinite(value):
        _fail(where, f"it returned {got!r}, expected one finite number",
              "return the variance as a float (e.g. dots.var().item()) or a one-element tensor",
              note)
    return value


def measure(student: Callable[..., Any], plan: Sequence[Tuple[int, int]], n: int,
            device: torch.device, where: Callable[[int], str], note: str = ""
            ) -> List[Tuple[float, int]]:
    """Call ``student(d, n, generator)`` for each ``(d, seed)`` of ``plan``.

    Returns:
        ``(answer, random numbers drawn)`` for each.

    Raises:
        AssertionError: on delegation, an exception, or an answer that is not a finite number.
    """
    __tracebackhide__ = True
    inputs = [((d, n, torch.Generator(device).manual_seed(s)), {}) for d, s in plan]
    counts = [DrawCount() for _ in plan]
    with checking(_NAME) as session:
        guard = Guard(_NAME, NOTHING)
        results, problems = call_guarded(guard, student, None, inputs, [[c] for c in counts],
                                         session, name=_NAME)
    last = where(plan[len(results) - 1][0])
    if guard.tripped:
        _fail(last, guard.tripped, note=note)
    if isinstance(results[-1][1], OverTime):
        raise AssertionError(over_time(_NAME, limits()[0], last) + note)
    if problems:
        _fail(last, f"your code changed {'; '.join(problems)} while the check ran; the checks "
              "refuse that", note=note)
    return [(_value(got, error, where(d), note), c.drawn)
            for (d, _), (got, error, _), c in zip(plan, results, counts)]


def judge_draws(drawn: int, d: int, n: int, where: str, note: str = "") -> None:
    """Fail unless a call drew at least the ``2 * n * d`` numbers of n pairs (q, k)."""
    __tracebackhide__ = True
    if drawn < 2 * n * d:
        _fail(where, f"it draws {drawn} random numbers; a measurement of n_samples pairs (q, k) "
              f"of d_k numbers each draws at least {2 * n * d}",
              "measure: draw q and k (n_samples x d_k each) from the generator and return the "
              "variance of their dot products, not the formula", note)


def judge_generator(value: float, again: Sequence[float], where: str, note: str = "") -> None:
    """Fail unless the same seed gives ``value`` again (``again[0]``) and another seed
    another number (``again[1]``)."""
    __tracebackhide__ = True
    if again[0] != value:
        _fail(where, "two calls with identically seeded generators gave different answers",
              _GENERATOR_HINT, note)
    if again[1] == value:
        _fail(where, "generators with different seeds gave exactly the same answer",
              "measure: draw n_samples pairs (q, k) from the generator and return the "
              "variance of their dot products, not the formula", note)


def judge_spread(values: Sequence[float], se: float, where: str, note: str = "") -> None:
    """Fail unless ``values`` (one per seed) spread like sample variances of standard error ``se``.

    Their sample standard deviation must lie between 1/4 and 3 times ``se``: with 16
    seeds a measurement falls outside less than once in a million.
    """
    __tracebackhide__ = True
    mean = sum(values) / len(values)
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    low, high = SPREAD_RANGE
    if not low * se <= spread <= high * se:
        _fail(where, f"over {len(values)} seeds the answers spread by {spread:.3g}, where a "
              f"sample variance of n_samples dot products spreads by about {se:.3g}: this is "
              f"not a measurement", "measure: return the variance of the dot products of the "
              "q and k you drew, nothing added or rounded", note)
