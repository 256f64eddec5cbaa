"""Shared machinery of the checks: running an exercise, recognising mistakes.

A check runs the student's callable on seeded inputs (:class:`Case`), on every device
present, inside the guard (:mod:`._run`, :mod:`._guard`); only then does it compute the
reference's results, on the same inputs built afresh, and compare. When they differ it
runs deliberately wrong versions of the reference (:class:`Mistake`) on the same inputs
and names the one the student's result matches.

What an exercise is made of lives in :mod:`._exercise`, the comparison helpers in
:mod:`._compare` (everything a check compares with is captured from torch's C types
when it is imported, and only plain tensors are compared), the input makers in
:mod:`._inputs`, what keeps the checks and torch intact in :mod:`._integrity`. Checks
print nothing (but a note when they had to undo a notebook's changes to them) and never
let a warning through: nbgrader scores a test cell that writes to stderr as failed.
"""

from __future__ import annotations

import builtins
import warnings
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

import torch

from ._compare import _clone, _float64, _isinstance, _same, _Tensor, close, is_tensor
from ._describe import describe
from ._errors import at_line, first_line, generic_hint, passed_before
from ._exercise import Case, Exercise, Mistake
from ._guard import _WRONG_DEVICE, DeviceWatch, Guard
from ._kind import kind_problem
from ._budget import OverTime, budget_for, over_time
from ._helpers import reference_helpers
from ._run import Planned, call_guarded, checking, fresh_seed, plan, seed_note

__all__: list = []

_callable, _type = builtins.callable, builtins.type

_DEVICE_ERRORS = ("is not on the expected device", "Expected all tensors to be on the same device")


# --------------------------------------------------------------------------- running


def _tolerances(case: Case, dtype: torch.dtype) -> Tuple[float, float]:
    if dtype == _float64:
        rtol, atol = 1e-7, 1e-10
    else:
        rtol, atol = 1e-4, 1e-5
    return (case.rtol if case.rtol is not None else rtol,
            case.atol if case.atol is not None else atol)


def _quiet(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Tuple[Any, Optional[BaseException], list]:
    """Run ``fn`` with warnings recorded (never printed); return (result, exception, warnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return fn(*args, **kwargs), None, list(caught)
        except Exception as e:  # noqa: BLE001 (the student's code may raise anything)
            return None, e, list(caught)




def _describe(case: Case, device: torch.device, dtype: torch.dtype) -> str:
    kind = {torch.float32: "float32 ", torch.float64: "float64 ", None: ""}.get(dtype, f"{dtype} ")
    where = "" if device.type == "cpu" else f" on {device.type}"
    return f"{kind}{case.label}{where}"


# The harness's wordings that qkv progress and qkv report read back live in one place.
from ._messages import KNOWN_MISTAKE, raised_as  # noqa: E402
from ._messages import NOT_WRITTEN as _NOT_WRITTEN  # noqa: E402


def _fail(exercise: Exercise, where: str, what: str, hint: str = "", note: str = "") -> None:
    __tracebackhide__ = True
    msg = f"{exercise.name}: wrong on {where}: {what}"
    if hint:
        msg += f"\nLook at: {hint}"
    raise AssertionError(msg + note)


def _match_mistake(exercise: Exercise, args: tuple, kwargs: dict, got: Any,
                   error: Optional[BaseException], expected: Any, rtol: float, atol: float
                   ) -> Optional[Mistake]:
    compare = exercise.compare or close
    for m in exercise.mistakes:
        out, err, _ = _quiet(m.fn, *_clone(args), **_clone(kwargs))
        if error is not None:
            if err is not None and type(err) is type(error) and str(err) == str(error):
                return m
            continue
        if err is not None or got is None:
            continue
        if close(out, expected, rtol, atol):
            continue  # this mistake makes no difference on this input
        if compare(got, out, rtol * 10, atol * 10):
            return m
    return None


@dataclass
class _Run:
    """One case on one device: its inputs, the reference's result, and where to say it failed."""

    exercise: Exercise
    where: str
    args: tuple
    kwargs: dict
    expected: Any
    rtol: float
    atol: float
    note: str = ""
    passed: tuple = ()  # the inputs the student's code was right on, before this one

    def fail(self, what: str, hint: str = "") -> None:
        __tracebackhide__ = True
        _fail(self.exercise, self.where, what, hint, self.note)


def _judge_call(run: _Run, given: Any, error: Optional[BaseException]) -> None:
    """Fail on what the call did wrong: not written, changing its inputs, raising."""
    __tracebackhide__ = True
    exercise = run.exercise
    if isinstance(error, NotImplementedError):
        raise AssertionError(f"{exercise.name} {_NOT_WRITTEN}")
    if not _same(given[0], run.args) or not _same(given[1], run.kwargs):
        run.fail("inputs modified in place",
                 "do not change the arguments: write out-of-place operations "
                 "(x = x * s, not x *= s; masked_fill, not masked_fill_)")
    if error is None:
        return
    line = at_line(error)
    m = _match_mistake(exercise, run.args, run.kwargs, None, error, run.expected, run.rtol, run.atol)
    if m is not None:
        run.fail(raised_as(first_line(error), m.name) + line, m.hint)
    hint = ""
    if any(s in str(error) for s in _DEVICE_ERRORS):
        hint = _WRONG_DEVICE
    for needle, h in exercise.error_hints:
        if needle in str(error):
            hint = h
            break
    run.fail(f"it raised {first_line(error)}{passed_before(run.passed)}{line}",
             hint or generic_hint(str(error)))


def _judge_watchers(run: _Run, watchers: List[Any], got: Any) -> None:
    """Fail on what the watchers saw: tensors created on a fixed device, say."""
    __tracebackhide__ = True
    for w in watchers:
        if w.problem:
            run.fail(w.problem[0], w.problem[1])
    if watchers[0].follows(got) and any(
            _isinstance(x, (_Tensor, torch.device)) for x in (*run.args, *run.kwargs.values())):
        run.fail("the result is created without device= (it would stay on the CPU "
                 "when the input is on a GPU)", _WRONG_DEVICE)


def _judge_kind(run: _Run, got: Any) -> None:
    """Fail unless the result is the reference's kind: a tensor on the inputs' device with the
    reference's dtype, or a tuple of them (:mod:`._kind`)."""
    __tracebackhide__ = True
    found = kind_problem(got, run.expected, run.exercise.legend)
    if found:
        run.fail(*found)


def _judge_value(run: _Run, got: Any) -> None:
    """Pass when the result matches; otherwise name the mistake, the shape, or where it differs."""
    __tracebackhide__ = True
    exercise, expected = run.exercise, run.expected
    compare = exercise.compare or close
    if compare(got, expected, run.rtol, run.atol):
        return
    m = _match_mistake(exercise, run.args, run.kwargs, got, None, expected, run.rtol, run.atol)
    if m is not None:
        run.fail(KNOWN_MISTAKE + m.name, m.hint)
    if is_tensor(got) and is_tensor(expected):
        # No known mistake: say what the difference looks like (a permutation, a factor, ...).
        run.fail(*describe(got, expected, run.rtol, run.atol, exercise.legend))
    if _isinstance(expected, tuple) and _isinstance(got, (tuple, list)):
        # A tuple (kv_cache_step's): describe its first item that differs.
        for i, (g, e) in enumerate(zip(got, expected)):
            if is_tensor(g) and is_tensor(e) and not close(g, e, run.rtol, run.atol):
                what, hint = describe(g, e, run.rtol, run.atol)
                run.fail(f"item {i} of the result {exercise.legend} is wrong: {what}", hint)
    run.fail("the result differs from the reference")


def _expected(exercise: Exercise, planned: Planned, where: str) -> Tuple[tuple, dict, Any]:
    """The case's inputs built afresh, and the reference's result on them."""
    args, kwargs = planned.inputs()
    expected, err, _ = _quiet(exercise.reference, *_clone(args), **_clone(kwargs))
    if err is not None:  # a bug in the check itself, not in the student's code
        raise RuntimeError(f"reference failed on {where}: {first_line(err)}") from err
    return args, kwargs, expected


def _judge(exercise: Exercise, planned: Planned, given: tuple, got: Any,
           error: Optional[BaseException], note: str, passed: tuple = ()) -> _Run:
    """Compare one result of the student's code with the reference's; raise on the first fault.

    Returns:
        the run, for :func:`_judge_watchers` once every result has been compared: a wrong
        value anywhere is the mistake to report before what the watchers saw (a tensor made
        without ``device=`` is a risk on the CPU).
    """
    __tracebackhide__ = True
    case, dtype = planned.case, planned.case.dtype
    where = _describe(case, planned.device, dtype)
    args, kwargs, expected = _expected(exercise, planned, where)
    rtol, atol = _tolerances(case, dtype)
    run = _Run(exercise, where, args, kwargs, expected, rtol, atol, note, passed)
    _judge_call(run, given, error)
    _judge_kind(run, got)
    _judge_value(run, got)
    return run


def start_check(name: str, student: Any, seed: Optional[int]) -> Tuple[int, str]:
    """What every check does first: refuse anything but the student's function or class, and
    for ``seed=None`` draw a fresh seed, with a note naming it (to reproduce a failure).

    Returns:
        ``(seed, note)``; the note is empty for a given seed.
    """
    __tracebackhide__ = True
    if not _callable(student):
        raise AssertionError(f"check_{name} expects your {name} itself, got {type(student).__name__}")
    if seed is not None and (_type(seed) is bool or not _isinstance(seed, int)):
        raise TypeError(f"check_{name}: seed must be None (fresh random inputs) or an int, "
                        f"got {_type(seed).__name__}")
    if seed is not None and not 0 <= seed < 2**32:
        raise ValueError(f"check_{name}: seed must be from 0 to 2**32 - 1, got {seed}")
    if seed is None:
        seed = fresh_seed()
        return seed, seed_note(name, seed)
    return seed, ""


def _budgets(exercise: Exercise, planned: List[Planned]) -> List[float]:
    """Each planned call's time budget, from the reference's time on an input of the same
    case drawn from another seed (so no expected result exists while the student's runs)."""
    def timed(p: Planned) -> Callable[[], Any]:
        args, kwargs = Planned(p.case, p.device, p.seed + 500).inputs()
        return lambda: exercise.reference(*args, **kwargs)
    return [budget_for(timed(p)) for p in planned]


def run_check(exercise: Exercise, student: Any, seed: Optional[int] = 0) -> None:
    """Run ``student`` on every case and device; raise ``AssertionError`` on the first failure.

    While it runs, the exercise's helpers are the reference's (:mod:`._helpers`), each call
    has a time budget (:mod:`._budget`), and what it writes to stderr is shown on stdout
    (:mod:`._stderr`).

    Args:
        exercise: what to run and compare.
        student: the student's function or class.
        seed: changes the random inputs; ``None`` draws a fresh seed (the hidden tests),
            which a failure message names.

    Raises:
        AssertionError: naming the input and what to look at.
    """
    __tracebackhide__ = True
    seed, note = start_check(exercise.name, student, seed)
    with checking(exercise.name) as session, reference_helpers(student, exercise.helpers) as helpers:
        planned = plan(exercise, seed)
        budgets = _budgets(exercise, planned)
        inputs = [p.inputs() for p in planned]
        watchers = [[DeviceWatch(a, k)] + ([exercise.watch(a, k)] if exercise.watch else [])
                    for a, k in inputs]
        guard = Guard(exercise.name, exercise.forbid, allow=helpers.codes,
                      reach=helpers.reach)
        results, problems = call_guarded(guard, student, exercise.run_student, inputs,
                                         watchers, session, budgets, exercise.name)
        last = planned[len(results) - 1]
        where = _describe(last.case, last.device, last.case.dtype)
        if guard.tripped:
            _fail(exercise, where, guard.tripped, note=note)
        if _isinstance(results[-1][1], OverTime):
            raise AssertionError(over_time(exercise.name, budgets[len(results) - 1], where)
                                 + note)
        if problems:
            _fail(exercise, where, f"your code changed {'; '.join(problems)} while the check "
                  "ran; the checks refuse that", note=note)
        passed: list = []
        runs = []
        for p, given, (got, error, _) in zip(planned, inputs, results):
            runs.append(_judge(exercise, p, given, got, error, note, tuple(passed)))
            passed.append(runs[-1].where)
        for run, ws, (_, _, original) in zip(runs, watchers, results):
            _judge_watchers(run, ws, original)
