"""Shared machinery of the checks: running an exercise, recognising mistakes.

A check runs the student's callable and the reference on the same seeded inputs
(:class:`Case`), on every device present, and compares. When they differ it runs
deliberately wrong versions of the reference (:class:`Mistake`) on the same
inputs and names the one the student's result matches. While the student's code
runs, the reference and torch's built-ins for the exercise are blocked
(:class:`Guard`), so an answer cannot pass by delegating.

What an exercise is made of lives in :mod:`._exercise`, the comparison helpers in
:mod:`._compare` (everything a check compares with is captured when it is imported,
so a notebook that later reassigns ``torch.allclose`` or ``torch.testing.assert_close``
does not change a verdict), the input makers in :mod:`._inputs`. Checks print nothing
and never let a warning through: nbgrader scores a test cell that writes to stderr as failed.
"""

from __future__ import annotations

import builtins
import contextlib
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

import torch

from ._compare import _clone, _float64, _isinstance, _same, _Tensor, close
from ._describe import describe
from ._exercise import Case, Exercise, Mistake
from ._guard import _WRONG_DEVICE, DeviceWatch, Guard
from ._inputs import devices

__all__ = ["warnings_to_stdout"]

_callable = builtins.callable

_DEVICE_ERRORS = ("is not on the expected device", "Expected all tensors to be on the same device")


def warnings_to_stdout() -> None:
    """Show warnings in a notebook as ordinary output instead of on stderr.

    nbgrader scores a test cell that writes anything to stderr as failed, so a
    harmless warning from a student's answer (a deprecation, say) would cost its
    points. The set-up cell of every exercise calls this; the warnings still show.
    """
    def show(message, category, filename, lineno, file=None, line=None):
        text = warnings.formatwarning(message, category, filename, lineno, line)
        sys.stdout.write(text)

    warnings.showwarning = show


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


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def _describe(case: Case, device: torch.device, dtype: torch.dtype) -> str:
    kind = {torch.float32: "float32 ", torch.float64: "float64 ", None: ""}.get(dtype, f"{dtype} ")
    where = "" if device.type == "cpu" else f" on {device.type}"
    return f"{kind}{case.label}{where}"


from ._messages import NOT_WRITTEN as _NOT_WRITTEN  # noqa: E402 (read back by qkv report)


def _fail(exercise: Exercise, where: str, what: str, hint: str = "") -> None:
    __tracebackhide__ = True
    msg = f"{exercise.name}: wrong on {where}: {what}"
    if hint:
        msg += f"\nLook at: {hint}"
    raise AssertionError(msg)


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


def _student_call(exercise: Exercise, student: Any) -> Callable[..., Any]:
    if exercise.run_student is None:
        return student
    return lambda *a, **k: exercise.run_student(student, *a, **k)


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

    def fail(self, what: str, hint: str = "") -> None:
        __tracebackhide__ = True
        _fail(self.exercise, self.where, what, hint)


def _judge_call(run: _Run, guard: Guard, error: Optional[BaseException], before: Any) -> None:
    """Fail on what the call did wrong: delegating, not written, changing its inputs, raising."""
    __tracebackhide__ = True
    exercise = run.exercise
    if guard.tripped:
        run.fail(guard.tripped)
    if isinstance(error, NotImplementedError):
        raise AssertionError(f"{exercise.name} {_NOT_WRITTEN}")
    if not _same(run.args, before[0]) or not _same(run.kwargs, before[1]):
        run.fail("inputs modified in place",
                 "do not change the arguments: write out-of-place operations "
                 "(x = x * s, not x *= s; masked_fill, not masked_fill_)")
    if error is None:
        return
    m = _match_mistake(exercise, run.args, run.kwargs, None, error, run.expected, run.rtol, run.atol)
    if m is not None:
        run.fail(f"it raised {_first_line(error)}, as '{m.name}' does", m.hint)
    hint = ""
    if any(s in str(error) for s in _DEVICE_ERRORS):
        hint = _WRONG_DEVICE
    for needle, h in exercise.error_hints:
        if needle in str(error):
            hint = h
            break
    run.fail(f"it raised {_first_line(error)}", hint)


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
    """Fail unless the result is a tensor on the inputs' device with the reference's dtype."""
    __tracebackhide__ = True
    expected = run.expected
    if _isinstance(expected, _Tensor) and not _isinstance(got, _Tensor):
        run.fail(f"it returned {type(got).__name__}, expected a tensor",
                 "return the tensor itself (not a tuple, list, number or None)")
    if not _isinstance(got, _Tensor):
        return
    if got.device != expected.device:
        run.fail(f"the result is on {got.device}, expected {expected.device} "
                 f"(the inputs' device)", _WRONG_DEVICE)
    if got.dtype != expected.dtype:
        run.fail(f"the result has dtype {got.dtype}, expected {expected.dtype}",
                 "take dtype= from the inputs for every tensor you create (a fixed dtype, "
                 "torch.tensor(...) without dtype=, or .float()/.double() changes it)"
                 if expected.dtype != torch.bool else
                 "return a bool tensor (True where attention is allowed)")


def _judge_value(run: _Run, got: Any) -> None:
    """Pass when the result matches; otherwise name the mistake, the shape, or where it differs."""
    __tracebackhide__ = True
    exercise, expected = run.exercise, run.expected
    compare = exercise.compare or close
    if compare(got, expected, run.rtol, run.atol):
        return
    m = _match_mistake(exercise, run.args, run.kwargs, got, None, expected, run.rtol, run.atol)
    if m is not None:
        run.fail(f"the result matches a known mistake: {m.name}", m.hint)
    # No known mistake: say what the difference looks like (a permutation, a factor, ...).
    run.fail(*describe(got, expected, run.rtol, run.atol, exercise.legend))


def _run_one(exercise: Exercise, student: Any, case: Case, device: torch.device,
             seed: int, watch_factory=None) -> None:
    __tracebackhide__ = True
    dtype = case.dtype
    gen = torch.Generator().manual_seed(seed)
    args, kwargs = case.build(gen, device, dtype)
    where = _describe(case, device, dtype)
    rtol, atol = _tolerances(case, dtype)

    expected, err, _ = _quiet(exercise.reference, *_clone(args), **_clone(kwargs))
    if err is not None:  # a bug in the check itself, not in the student's code
        raise RuntimeError(f"reference failed on {where}: {_first_line(err)}") from err
    before = _clone((args, kwargs))
    watchers = [DeviceWatch(args, kwargs)] + ([watch_factory(args, kwargs)] if watch_factory else [])
    guard = Guard(exercise.name, exercise.forbid_torch, exercise.forbid_ref, watchers)
    call = _student_call(exercise, student)
    with guard:
        got, error, _ = _quiet(call, *args, **kwargs)

    run = _Run(exercise, where, args, kwargs, expected, rtol, atol)
    _judge_call(run, guard, error, before)
    _judge_watchers(run, watchers, got)
    _judge_kind(run, got)
    _judge_value(run, got)


def run_check(exercise: Exercise, student: Any, seed: int = 0, watch_factory=None) -> None:
    """Run ``student`` on every case and device; raise ``AssertionError`` on the first failure.

    Args:
        exercise: what to run and compare.
        student: the student's function or class.
        seed: changes the random inputs (hidden tests use another seed).
        watch_factory: ``watch_factory(args, kwargs)`` returns an object with
            ``observe(func, args, kwargs, out)`` and ``problem`` (``None`` or
            ``(what, hint)``), shown every torch call the student's code makes.

    Raises:
        AssertionError: naming the input and what to look at.
    """
    __tracebackhide__ = True
    if not _callable(student):
        raise AssertionError(f"check_{exercise.name} expects your {exercise.name} itself, "
                      f"got {type(student).__name__}")
    # The inputs are tiny: waking a pool of threads for each op costs more than the op
    # (tens of ms per softmax on a busy 2-core machine), so run single-threaded.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    # The student's global random state is left as it was (building modules draws from it),
    # and anything their code writes to stderr goes to stdout: nbgrader fails a test cell
    # with stderr output.
    gpus = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    try:
        with torch.random.fork_rng(devices=gpus), contextlib.redirect_stderr(sys.stdout):
            for d in devices():
                for i, case in enumerate(exercise.cases):
                    if d.type != "cpu" and not case.every_device:
                        continue
                    if d.type == "mps" and case.dtype == _float64:
                        continue  # MPS has no float64
                    _run_one(exercise, student, case, d, seed * 1000 + i, watch_factory)
    finally:
        torch.set_num_threads(threads)
