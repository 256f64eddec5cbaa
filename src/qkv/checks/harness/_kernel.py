"""Running a check in the student's kernel: :func:`run_check`, what every ``check_<name>``
does (its inputs, the student's call on each device, under a time limit, the verdict, then
:class:`~.result.CheckFailed` on a failure), and :func:`make_check`, which makes that function.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import signal
import textwrap
import threading
import time
import warnings
from typing import Any, Callable, Iterator, List, Mapping, Optional, Tuple

import torch

from ._checks import SECONDS, Check, single
from ._exercise import Args, Exercise
from ._harness import Raised
from ._kind import WRONG_DEVICE
from ..result import CheckFailed, CheckResult, show

__all__: list = []


def _seconds(default: float = SECONDS) -> float:
    """``QKV_CHECK_SECONDS`` when set to a positive number, else the check's own ``default``."""
    try:
        value = float(os.environ.get("QKV_CHECK_SECONDS", default))
    except ValueError:
        return default
    return value if value > 0 else default


def _moved(x: Any, device: torch.device) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, tuple):
        return tuple(_moved(v, device) for v in x)
    if isinstance(x, dict):  # kwargs: a device= crosses as its name
        return {k: str(device) if k == "device" and isinstance(v, str) else _moved(v, device)
                for k, v in x.items()}
    return x


def _devices_of(x: Any) -> set:
    if isinstance(x, torch.Tensor):
        return {x.device.type}
    if isinstance(x, tuple):
        return set().union(*(_devices_of(v) for v in x)) if x else set()
    return set()


class _Late(BaseException):
    """Raised in the student's call by :func:`_interrupted_after` (a BaseException, as Jupyter's
    KeyboardInterrupt: an ``except Exception`` in the answer lets it by)."""


@contextlib.contextmanager
def _interrupted_after(seconds: float) -> Iterator[None]:
    """Interrupt the code run inside after ``seconds`` (an endless loop would otherwise hold
    the cell until the student presses stop). Only where it can be done without touching
    anyone else's: in the main thread, with SIGALRM free (POSIX; a kernel leaves it alone).
    The alarm is the check's for the length of one call, and put back after it."""
    alarm = getattr(signal, "SIGALRM", None)
    if alarm is None or threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(alarm) not in (signal.SIG_DFL, None):
        yield
        return

    def late(signum: int, frame: Any) -> None:
        raise _Late()

    signal.signal(alarm, late)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(alarm, signal.SIG_DFL)


def _run_all(check: Check, student: Any, inputs: List[Args], options: Mapping[str, Any],
             device: Optional[torch.device]) -> Tuple[list, Optional[str]]:
    """Run the student's object on every input (stop at the first exception or slow call).

    Returns:
        the outcomes (on the CPU), and what went wrong with the device or the time, if anything.
    """
    limit, outcomes = _seconds(check.seconds), []
    for args, kwargs in inputs:
        # A call that carries no tensor and no device= (``causal_mask(4)``) asks for the
        # default device, the CPU, wherever the check runs: only a call that carries the
        # device must give its result there.
        carried = device is not None and (bool(_devices_of(args) | _devices_of(
            tuple(kwargs.values()))) or isinstance(kwargs.get("device"), (str, torch.device)))
        if device is not None:
            args, kwargs = _moved(args, device), _moved(kwargs, device)
        start = time.perf_counter()
        try:
            with _interrupted_after(limit + 1.0):  # a call just past the limit is told so below
                out = check.run_student(student, args, kwargs, **options)
        except _Late:
            return outcomes, f"took more than {limit:g} s and was interrupted"
        except Exception as e:  # noqa: BLE001 (the student's code may raise anything)
            outcomes.append(Raised.of(e))
            return outcomes, None
        if time.perf_counter() - start > limit:
            return outcomes, f"took more than {limit:g} s"
        if device is not None:
            result, noticed = out
            if carried and _devices_of(result) - {device.type}:
                return outcomes, "device"
            out = (_moved(result, torch.device("cpu")), noticed)
        outcomes.append(out)
    return outcomes, None


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one thread while the block runs, and the count given back after: a check's
    tensors are tiny, and waking a pool of threads for each op costs more than the op (tens of
    ms on a busy machine; the capstone's judging took 64 s a submission on a pool, about 6 s on
    one thread). The trusted grader's calls of :mod:`qkv.checks.grading` run under it too."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def check_now(check: Check, student: Any, seed: int, **options: Any) -> CheckResult:
    """Run one check in this kernel and return its result (never raises for a wrong answer)."""
    options = check.resolve(options)
    inputs = check.calls(seed, **options)
    devices: List[Optional[torch.device]] = [None]
    if check.every_device and torch.cuda.is_available():
        devices.append(torch.device("cuda"))
    result = None
    # The student's global random state is left as it was (building a module draws from it).
    gpus = list(range(torch.cuda.device_count())) if len(devices) > 1 else []
    with one_thread(), torch.random.fork_rng(devices=gpus):
        for device in devices:
            result = _on(check, student, seed, inputs, options, device)
            if not result.passed:
                return result
    assert result is not None
    return result


def _on(check: Check, student: Any, seed: int, inputs: List[Args], options: Mapping[str, Any],
        device: Optional[torch.device]) -> CheckResult:
    """The check's result on one device (``None``: the CPU, where the inputs are)."""
    outcomes, trouble = _run_all(check, student, inputs, options, device)
    result = check.judge(seed, outcomes, **options)
    on = f" on {device.type}" if device is not None else ""
    if not result.passed and trouble == "device" and result.kind == "timeout":
        return dataclasses.replace(result, input=result.input + on, kind="wrong", hint=WRONG_DEVICE,
                                   what=f"the result is not on {device.type}, the inputs' device")
    if not result.passed and trouble and result.kind == "timeout":
        return dataclasses.replace(result, input=result.input + on,
                                   what=f"your {check.exercise} {trouble} on {result.input}{on}")
    return dataclasses.replace(result, input=result.input + on) if on and not result.passed \
        else result


def fresh_seed() -> int:
    """A seed nobody can know in advance (32 bits from the operating system)."""
    return int.from_bytes(os.urandom(4), "little")


def run_check(check: Any, student: Any, seed: Optional[int] = 0, **options: Any) -> None:
    """What ``check_<name>(student, seed, **options)`` does in the student's kernel.

    Args:
        check: a :class:`Check`, or an :class:`~._exercise.Exercise` checked alone.

    Raises:
        CheckFailed: naming the input it fails on and what to look at (``.result``).
        TypeError, ValueError: a bad seed or option (the test cell's mistake).
    """
    __tracebackhide__ = True
    if isinstance(check, Exercise):
        check = single(check)
    name = check.exercise
    if not callable(student):
        raise CheckFailed(CheckResult(name, False, seed, what=(
            f"check_{name} expects your {name} itself, got {type(student).__name__}")))
    if seed is not None and (type(seed) is bool or not isinstance(seed, int)):
        raise TypeError(f"check_{name}: seed must be None (fresh random inputs) or an int, "
                        f"got {type(seed).__name__}")
    if seed is not None and not 0 <= seed < 2**32:
        raise ValueError(f"check_{name}: seed must be from 0 to 2**32 - 1, got {seed}")
    note = ""
    if seed is None:
        seed = fresh_seed()
        note = (f"(random inputs, seed={seed}: check_{name}(your_{name}, seed={seed}) draws "
                "them again)")
    if check.starting():
        print(check.starting(), flush=True)
    # The student's warnings are shown on stdout, after the check: nbgrader scores a test
    # cell that writes to stderr as failed.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        result = check_now(check, student, seed, **options)
    shown = []
    for w in caught:
        line = f"{w.category.__name__}: {w.message}"
        if line not in shown:
            shown.append(line)
    if shown:
        print("warnings your code gave while the check ran:\n  " + "\n  ".join(shown))
    if not result.passed:
        result = dataclasses.replace(result, note=note)
    show(result)
    if not result.passed:
        raise CheckFailed(result)
    if result.notice:
        print(f"{name}: note: {result.notice}")


def make_check(checks: Mapping[str, Check], name: str, module: str, about: str,
               wants_class: bool = False) -> Callable[..., None]:
    """The function a test cell calls, ``check_<name>(student, seed=0, **options)``.

    Every check does the same in the kernel (:func:`run_check`); only what it checks differs,
    so each module makes its ``check_<name>`` here from its table of checks.

    Args:
        checks: the module's checks by name (complete when this is called).
        name: ``"check_<name>"``.
        module: the module that exports it (its ``__name__``), for ``help()``.
        about: what it checks, the first paragraph of its docstring.
        wants_class: the student's object is a class (``check_MultiHeadAttention``).

    Returns:
        the check, with its docstring and a signature that names the student's object.
    """
    check = checks[name]
    exercise = check.exercise

    def check_function(student: Any, seed: Optional[int] = 0, **options: Any) -> None:
        __tracebackhide__ = True
        if wants_class and not isinstance(student, type):
            raise CheckFailed(CheckResult(exercise, False, seed, what=(
                f"{name} expects your class {exercise} itself, got {type(student).__name__}")))
        run_check(check, student, seed, **options)

    P = inspect.Parameter
    check_function.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [P(exercise, P.POSITIONAL_OR_KEYWORD), P("seed", P.POSITIONAL_OR_KEYWORD, default=0)]
        + [P(k, P.KEYWORD_ONLY, default=v) for k, v in check.options.items()], return_annotation=None)
    check_function.__name__ = check_function.__qualname__ = name
    check_function.__module__ = module
    your = f"your class {exercise} itself" if wants_class else f"your {exercise} (the function itself)"
    about = "\n\n".join(textwrap.fill(para, 88) for para in about.split("\n\n"))
    check_function.__doc__ = (
        f"{about}\n\nArgs:\n    {exercise}: {your}.\n    seed: another seed gives other inputs; "
        "``None`` draws fresh ones (the hidden tests).\n"
        + "".join(f"    {k}: default {v!r} (see above).\n" for k, v in check.options.items())
        + "\nRaises:\n    CheckFailed: naming the input it fails on and what to look at "
        "(``.result``, a :class:`CheckResult`).\n")
    return check_function
