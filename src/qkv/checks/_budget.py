"""A check's time budget: each call of the student's code gets at most N seconds.

An endless loop in an answer used to run until nbgrader stopped the whole cell (after
120 s), and the student saw a ``CellTimeoutError`` or a ``KeyboardInterrupt`` from deep
inside the checks. Now each call of the student's function (or class) during a check
gets a budget of ``floor + factor * t`` seconds, where ``t`` is the time the reference
takes on an input of the same case (drawn from another seed, so that no expected result
exists while the student's code runs). When the budget is spent, a timer
(``SIGALRM``, :func:`signal.setitimer`) raises :class:`OverTime` in the student's
code, and the check fails with "your ``f`` took more than N s on <the input>".

The floor (:data:`FLOOR`, 10 s) and the factor (:data:`FACTOR`, 100) are generous: the
checks' inputs are tiny (the reference takes milliseconds) and the guard slows the
student's Python code down several times. An instructor changes them with the
environment variables ``QKV_CHECK_SECONDS`` and ``QKV_CHECK_FACTOR`` (read when a check
starts; set them before starting Jupyter or nbgrader). The budget needs ``SIGALRM``:
on Windows, or when a check runs outside the main thread, there is none and only
nbgrader's cell time limit applies. A single torch operator is not interrupted while it
runs (Python handles the signal when it returns).
"""

from __future__ import annotations

import builtins
import os
import signal
import threading
import time
from typing import Any, Callable, Optional

from ._integrity import harness

#: Seconds every call gets, whatever the reference's time.
FLOOR = 10.0
#: Times the reference's time added to the floor.
FACTOR = 100.0

_environ = os.environ
_monotonic = time.perf_counter
_setitimer = getattr(signal, "setitimer", None)
_signal = signal.signal
_getsignal = signal.getsignal
_SIGALRM = getattr(signal, "SIGALRM", None)
_ITIMER_REAL = getattr(signal, "ITIMER_REAL", None)
_main_thread = threading.main_thread
_current_thread = threading.current_thread
_float = builtins.float


class OverTime(BaseException):
    """Raised in the student's code when its call ran past its budget.

    A ``BaseException``, so that ``except Exception`` in an answer does not swallow it;
    and the timer keeps firing every half second until the harness stops it.
    """


def _setting(name: str, default: float) -> float:
    try:
        value = _float(_environ.get(name, default))
    except (TypeError, ValueError):
        return default
    return value if value > 0 else default


def limits() -> tuple:
    """``(floor, factor)``: the defaults, or the environment's ``QKV_CHECK_SECONDS`` and
    ``QKV_CHECK_FACTOR``."""
    return _setting("QKV_CHECK_SECONDS", FLOOR), _setting("QKV_CHECK_FACTOR", FACTOR)


def budget_for(reference: Optional[Callable[[], Any]]) -> float:
    """Seconds a call may take: the floor plus the factor times ``reference()``'s time.

    Args:
        reference: runs the reference once on an input like the student's (its result is
            dropped at once); ``None`` when there is no reference to time.
    """
    floor, factor = limits()
    if reference is None:
        return floor
    start = _monotonic()
    try:
        reference()
    except Exception:  # noqa: BLE001 (the comparison reports a broken reference later)
        pass
    return floor + factor * (_monotonic() - start)


def available() -> bool:
    """Whether a budget can be enforced here (``SIGALRM``, in the main thread)."""
    return _setitimer is not None and _current_thread() is _main_thread()


class Timer:
    """One call's budget: :meth:`arm` before the student's code, :meth:`disarm` after.

    :attr:`spent` says whether the budget ran out (even if the student's code caught
    :class:`OverTime` and went on).
    """

    def __init__(self) -> None:
        self.spent = False
        self._armed = False
        self._previous: Any = None
        self._on = available()

    @harness
    def _ring(self, signum: int, frame: Any) -> None:
        if self._armed:
            self.spent = True
            raise OverTime("the check's time budget ran out")

    @harness
    def arm(self, seconds: float) -> None:
        """Start the timer (nothing where no budget can be enforced)."""
        self.spent = False
        if not self._on:
            return
        self._previous = _getsignal(_SIGALRM)
        _signal(_SIGALRM, self._ring)
        self._armed = True
        _setitimer(_ITIMER_REAL, seconds, 0.5)

    @harness
    def disarm(self) -> None:
        """Stop the timer and put the previous handler back; safe to call twice.

        A signal that arrives while this runs raises here: each step is retried until
        the timer is off (once it is not armed the handler no longer raises).
        """
        if not self._on:
            return
        while True:
            try:
                self._armed = False
                _setitimer(_ITIMER_REAL, 0, 0)
                if self._previous is not None:
                    _signal(_SIGALRM, self._previous)
                    self._previous = None
                return
            except OverTime:
                continue


def over_time(name: str, seconds: float, where: str) -> str:
    """The failure message of a call that ran past its budget."""
    shown = f"{seconds:.1f}".rstrip("0").rstrip(".")
    return (f"{name}: your {name} took more than {shown} s on {where} (the check's time "
            f"budget for one call): an endless loop, or a loop over every element?")
