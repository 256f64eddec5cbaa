"""Running the student's code for a check: the inputs, the seed, one guarded pass.

A check first runs the student's code on every input, inside the guard, and only
then computes the reference's results and compares (in :mod:`._harness`): while the
student's code runs, no expected result exists anywhere, and the inputs given to the
reference are built afresh from the seed, so nothing the student's code could reach
(or change) feeds the verdict. The default seed ``0`` gives the same inputs every time
(the visible tests, reproducible); ``seed=None`` draws a fresh seed from the operating
system (the hidden tests: a table of answers for known inputs is worthless), and
failure messages name it so that the failing inputs can be drawn again.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

import torch

from ._budget import OverTime, Timer, limits
from ._compare import _float64
from ._exercise import Args, Case, Exercise
from ._guard import Guard, harness
from ._inputs import devices
from ._seal import freeze
from ._session import Session
from ._threads import refusal
from ._stderr import captured

_urandom = os.urandom
_catch_warnings = warnings.catch_warnings
_simplefilter = warnings.simplefilter


def fresh_seed() -> int:
    """A seed nobody can know in advance (32 bits from the operating system)."""
    return int.from_bytes(_urandom(4), "little")


def seed_note(name: str, seed: int) -> str:
    """The line a failure message ends with when its inputs were drawn at random."""
    return (f"\n(random inputs, seed={seed}: check_{name}(your_function, seed={seed}) "
            f"draws them again)")


@dataclass(frozen=True)
class Planned:
    """One case on one device, with the seed its inputs are drawn from."""

    case: Case
    device: torch.device
    seed: int

    def inputs(self) -> Args:
        """The case's inputs, built afresh: the same numbers every time for the same seed."""
        gen = torch.Generator().manual_seed(self.seed)
        return self.case.build(gen, self.device, self.case.dtype)


def plan(exercise: Exercise, seed: int) -> List[Planned]:
    """Every case on every device present (only the CPU for cases marked so)."""
    out = []
    for d in devices():
        for i, case in enumerate(exercise.cases):
            if d.type != "cpu" and not case.every_device:
                continue
            if d.type == "mps" and case.dtype == _float64:
                continue  # MPS has no float64
            out.append(Planned(case, d, seed * 1000 + i))
    return out


@contextlib.contextmanager
def checking(name: str = "your code") -> Iterator[Session]:
    """What surrounds a whole check: an intact course and torch (:class:`._session.Session`),
    the notebook's random state left alone, a single thread. (What the student's code writes
    to stderr is caught around each guarded pass: :func:`call_guarded`.)

    A check refuses to run at all on a kernel it cannot trust: torch's dispatcher holding a
    kernel of the notebook's own (:mod:`._dispatcher`), or a thread of the notebook's running
    beside it (:mod:`._threads`).
    """
    why = refusal()
    if why:
        raise AssertionError(f"{name}: wrong on this kernel: {why}; the checks do not run "
                             f"there (restart the kernel and run the notebook without it)")
    # The inputs are tiny: waking a pool of threads for each op costs more than the op
    # (tens of ms per softmax on a busy 2-core machine), so run single-threaded.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    # The student's global random state is left as it was (building modules draws from it).
    gpus = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    try:
        with Session() as session, torch.random.fork_rng(devices=gpus):
            yield session
    finally:
        torch.set_num_threads(threads)


@harness(calls_student=True)
def _call_all(guard: Guard, student: Any, run_student: Optional[Callable[..., Any]],
              inputs: Sequence[Args], watchers: Sequence[list], session: Session,
              budgets: Sequence[float], timer: Timer, _start=Guard.start, _stop=Guard.stop,
              _watch=Guard.watch, _changed=Session.changed, _arm=Timer.arm,
              _disarm=Timer.disarm, _zip=zip, _OverTime=OverTime, _freeze=freeze
              ) -> Tuple[list, List[str]]:
    """Call the student's code on each input under the guard; stop at the first exception.

    Each call runs against its budget (:mod:`._budget`); one that runs past it ends with
    an :class:`OverTime` as its exception, even if the student's code caught it. Everything
    it uses after the student's code is bound as a default argument: the student's code
    cannot rebind it, and :meth:`Session.changed` (first) undoes whatever the student's
    code changed in the course, torch or Python. Each result is copied (:func:`._seal.freeze`)
    as soon as the guard is off, before anything of the student's could run again: the
    verdict is on the copy, the original (third) only for what follows it by identity.
    """
    results: list = []
    _start(guard)
    try:
        for (args, kwargs), ws, seconds in _zip(inputs, watchers, budgets):
            _watch(guard, ws)
            try:
                _arm(timer, seconds)
                try:
                    if run_student is None:
                        got = student(*args, **kwargs)
                    else:
                        got = run_student(student, *args, **kwargs)
                finally:
                    _disarm(timer)
                results.append((got, None) if not timer.spent else (None, _OverTime()))
            except _OverTime as e:
                results.append((None, e))
            except Exception as e:  # noqa: BLE001 (the student's code may raise anything)
                results.append((None, e))
            if results[-1][1] is not None or guard.tripped:
                break
    finally:
        _disarm(timer)
        problems = _stop(guard)
        results = [(_freeze(got), e, got) for got, e in results]
    moved = _changed(session)
    if moved:
        problems.append(", ".join(sorted(set(moved))))
    return results, problems


def call_guarded(guard: Guard, student: Any, run_student: Optional[Callable[..., Any]],
                 inputs: Sequence[Args], watchers: Sequence[list], session: Session,
                 budgets: Optional[Sequence[float]] = None, name: str = "your code"
                 ) -> Tuple[list, List[str]]:
    """Run the student's code on ``inputs``, with stderr and warnings caught and shown on
    stdout afterwards (:mod:`._stderr`), each call within its budget (:mod:`._budget`).

    Args:
        budgets: seconds per input (default: the floor of :func:`._budget.limits`).
        name: what the note about stderr calls the student's code.

    Returns:
        ``[(result, exception, original), ...]`` (one per input, up to the first exception
        or refusal; an :class:`OverTime` for a call past its budget; ``result`` a copy of
        ``original``, see :func:`._seal.freeze`), and what the student's
        code changed that it should not have (the guard, the course, torch or Python), in
        words; empty when nothing.
    """
    __tracebackhide__ = True
    if budgets is None:
        budgets = [limits()[0]] * len(inputs)
    timer = Timer()
    with captured() as caught:
        with _catch_warnings(record=True) as recorded:
            _simplefilter("always")
            out = _call_all(guard, student, run_student, inputs, watchers, session, budgets,
                            timer)
        caught.add_warnings(recorded)
    caught.show(name)
    session.reseal()  # what ran since the guard went off may have been the student's
    return out
