"""The three steps of every check: the inputs, the student's call, the verdict.

- :func:`calls`: an exercise's inputs for a seed (data: tensors on the CPU, numbers,
  ``None``, tuples), the same every time for the same seed;
- :func:`run_student`: how the exercise calls the student's object on one input; it sees
  neither the seed nor the reference, and returns ``(result, forbidden calls noticed)``
  as plain data;
- :func:`._verdict.judge`: the reference on the same inputs built afresh, the comparison, the
  known mistake named (by :mod:`._match`), a :class:`~.result.CheckResult`.

The first two live here, with what crosses between the steps (:class:`Raised`, and the
exceptions the call may raise); the verdict in :mod:`._verdict`. The in-kernel checks
(:func:`run_check`) and the trusted grader (:mod:`qkv.checks.grading`) use these same three
steps, so they cannot disagree.
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch

from ._compare import _clone, _same, is_tensor, same_but_rounding
from ._errors import your_line
from ._exercise import Args, Case, Exercise
from ._helpers import on_helpers
from ._notice import CallNotice, reference_names

__all__: list = []

_CPU = torch.device("cpu")


@dataclass(frozen=True)
class Raised:
    """What the student's call raised, as data.

    Attributes:
        type: the exception's class name, e.g. ``"RuntimeError"``.
        message: ``str(exception)``.
        line: the line of the student's code it was raised at, in words (``""`` if unknown).
    """

    type: str
    message: str
    line: str = ""

    @classmethod
    def of(cls, error: BaseException) -> "Raised":
        """The :class:`Raised` of an exception (its line found in its traceback)."""
        return cls(type(error).__name__, str(error), your_line(error))

    def failure(self, fail: Callable[..., Any], hint: str = "") -> Any:
        """The failed result of a check that measures (no mistakes to compare with).

        Args:
            fail: makes the result from keyword arguments (a :class:`CheckResult` with its
                exercise, seed and input already given).
            hint: what to look at, when the check knows more than the error says.
        """
        if self.type == "NotImplementedError":
            return fail(kind="not written")
        first = (self.message.strip().splitlines() or [""])[0][:300]
        return fail(what=f"it raised {self.type}: {first}", hint=hint, kind="raised")


class ExerciseRule(Exception):
    """Raised by a ``run_student`` when the answer is not usable as the exercise asks
    (a module without its ``nn.Linear`` layers, a forward that changes them...); the
    message is shown as it is, and a hint given as a second argument after ``Look at:``
    (it crosses in the message, after :data:`HINT_MARK`)."""

    def __init__(self, what: str, hint: str = "") -> None:
        super().__init__(what + (HINT_MARK + hint if hint else ""))


#: Where an :class:`ExerciseRule`'s message ends and its hint begins.
HINT_MARK = "\n(hint) "


class InputsChanged(Exception):
    """Raised by :func:`run_student` when the student's code changed its inputs in place."""


@dataclass(frozen=True)
class Noted:
    """What an exercise's ``run_student`` returns to add notes to the result: ``result`` is
    compared as usual, and each of ``notes`` (``"built ..."``, see :data:`._notice.BUILT`) is
    a notice, like a call the exercise asks not to make: a note, not a failure."""

    result: Any
    notes: Tuple[str, ...] = ()


class NotRepeatable(Exception):
    """Raised when two identical calls (a module in eval mode) gave different results."""


#: How many more times an answer that drew random numbers is called, to see it is random.
REPEATS = 8

#: What a function check says of an answer whose two calls on the same input differ.
NOT_REPEATABLE_WHAT = ("two calls on the same input gave different results: something in your "
                       "function is random (dropout left on?), which the right answer never is")


def _random_states() -> List[torch.Tensor]:
    """torch's random state on the CPU, and on each GPU once CUDA is in use."""
    states = [torch.random.get_rng_state()]
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states += torch.cuda.get_rng_state_all()
    return states


# --------------------------------------------------------------------------- inputs


def case_seeds(exercise: Exercise, seed: int) -> List[Tuple[Case, int]]:
    """Each case of the exercise with the seed its inputs are drawn from."""
    return [(case, seed * 1000 + i) for i, case in enumerate(exercise.cases)]


def case_inputs(case: Case, case_seed: int, device: torch.device = _CPU) -> Args:
    """One case's inputs, built afresh: the same numbers every time for the same seed."""
    gen = torch.Generator().manual_seed(case_seed)
    return case.build(gen, device, case.dtype)


def calls(exercise: Exercise, seed: int) -> List[Args]:
    """The inputs the student's object is called with, one ``(args, kwargs)`` per case.

    ``device=`` and ``dtype=`` keywords cross as their names (``"cpu"``, ``"float64"``);
    :func:`run_student` gives the student a ``torch.device`` and a ``torch.dtype`` again.
    """
    out = []
    for c, s in case_seeds(exercise, seed):
        args, kwargs = case_inputs(c, s)
        out.append((args, {k: _named(v) for k, v in kwargs.items()}))
    return out


def _named(v: Any) -> Any:
    if isinstance(v, torch.device):
        return str(v)
    if isinstance(v, torch.dtype):
        return str(v).replace("torch.", "")
    return v


def _unnamed(kwargs: dict) -> dict:
    """``device=`` and ``dtype=`` as torch objects again (see :func:`calls`)."""
    out = dict(kwargs)
    if isinstance(out.get("device"), str):
        out["device"] = torch.device(out["device"])
    if isinstance(out.get("dtype"), str) and isinstance(getattr(torch, out["dtype"], None),
                                                        torch.dtype):
        out["dtype"] = getattr(torch, out["dtype"])
    return out


# --------------------------------------------------------------------------- the call


def plain(value: Any) -> Any:
    """The student's result as plain data: tensors (detached, plain ``torch.Tensor``),
    tuples, numbers, strings, ``None``; anything else becomes ``"<what it is>"``."""
    if isinstance(value, torch.Tensor):
        t = value.detach()
        return t if type(t) is torch.Tensor else t.as_subclass(torch.Tensor)
    if isinstance(value, (tuple, list)):
        return tuple(plain(v) for v in value)
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    kind = type(value)
    if kind.__module__ == "numpy":
        return f"<a NumPy {kind.__name__} (keep the computation in torch)>"
    return f"<{kind.__name__}>"


def plain_number(value: Any) -> Any:
    """:func:`plain`, with a NumPy number or one-element array as a Python float: a
    measurement finished in NumPy (``w.numpy().mean()``, a ``float32``) is still a number."""
    kind = type(value)
    if kind.__module__ == "numpy" and getattr(value, "size", None) == 1 and hasattr(value, "item"):
        item = value.item()
        if type(item) in (int, float):
            return float(item)
    return plain(value)


def number_of(value: Any) -> Optional[float]:
    """A measurement that came back (through :func:`plain_number`) as a float: a Python number
    or a one-element floating tensor; ``None`` for anything else. An int too large for a float
    (``10**400``) is an infinity: what crosses from the student's side must not stop the judge."""
    if type(value) is int and abs(value) > 2 ** 1023:
        return math.inf if value > 0 else -math.inf
    if type(value) in (int, float):
        return float(value)
    if is_tensor(value) and value.numel() == 1 and value.is_floating_point():
        return float(value.detach().reshape(()).item())
    return None


def run_student(exercise: Exercise, student: Any, args: tuple, kwargs: dict,
                given: Sequence[str] = ()) -> Tuple[Any, tuple]:
    """Call the student's object on one input as the exercise does.

    The student's helpers (``exercise.helpers``) are the reference's during the call;
    forbidden torch calls are noticed (:mod:`._notice`), and the course's functions the answer
    names, except the helpers and what the set-up cell gives (``given``).

    Returns:
        ``(result as plain data, names of the forbidden calls it made)``.

    Raises:
        whatever the student's code raises; :class:`InputsChanged` when it changed its
        inputs in place.
    """
    notice = CallNotice(exercise.forbid)
    kwargs = _unnamed(kwargs)
    before = _clone((args, kwargs))
    call = exercise.run_student
    inputs = iter([(args, kwargs)])  # the inputs given; a second attempt gets fresh copies
    notes: List[str] = []

    def attempt() -> Any:
        nonlocal args, kwargs
        args, kwargs = next(inputs, None) or _clone(before)
        with notice:
            got = student(*args, **kwargs) if call is None else call(student, *args, **kwargs)
        if isinstance(got, Noted):
            notes.extend(n for n in got.notes if n not in notes)
            return got.result
        return got
    drawn = _random_states()
    got = on_helpers(student, exercise.helpers, attempt, notice.paused)
    if not _same(before, (args, kwargs)):
        raise InputsChanged("your code changed its inputs in place")
    # Every reference here is deterministic: an answer that drew from torch's random state
    # (F.dropout's training=True default) is called again, and two results differ only when
    # the answer is random. An answer that draws nothing is called once; one that only sums in
    # a random order (torch.randperm) differs by rounding, which is no dropout. Dropout on a
    # tensor of four weights keeps the same ones twice in a row about half the time: up to
    # REPEATS more calls, so that it is named whatever case it first shows in.
    if not _same(drawn, _random_states()):
        first = plain(got)
        for _ in range(REPEATS):
            if not same_but_rounding(
                    first, plain(on_helpers(student, exercise.helpers, attempt, notice.paused))):
                raise NotRepeatable(NOT_REPEATABLE_WHAT)
    names = reference_names(student, exercise.forbid, {**dict.fromkeys(given), **exercise.helpers})
    return plain(got), tuple(notice.calls + [n for n in names if n not in notice.calls] + notes)
