"""A check as the test cells name it (``check_softmax``), and a module's table of them.

A :class:`Check` knows, for the options a test cell passes (``masks=False``), its inputs
(:meth:`Check.calls`), how the student's object is called (:meth:`Check.run_student`) and
the verdict (:meth:`Check.judge`); :func:`checks_of` makes a module's table of checks.
:func:`._kernel.run_check` is what every ``check_<name>`` does in the kernel: those same three
steps, then :class:`~.result.CheckFailed` on a failure. :mod:`qkv.checks.grading` offers the
same steps to the trusted grader.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from . import _harness, _verdict
from ._exercise import Args, Exercise
from ..result import CheckResult

__all__: list = []

#: Seconds one call of the student's code may take in the kernel (``QKV_CHECK_SECONDS``).
SECONDS = 10.0


class Check:
    """One ``check_<name>``: the base of :class:`ExerciseCheck` and the variance check.

    Args:
        name: the check function's name, e.g. ``"check_softmax"``.
        options: the keyword options its test cells may pass, with their defaults.
        every_device: also run on CUDA in the kernel when present.
        seconds: how long one call may take before "took more than N s", unless
            ``QKV_CHECK_SECONDS`` says otherwise (a check whose right answer trains a model needs
            more than :data:`SECONDS` on a busy machine).
    """

    def __init__(self, name: str, options: Optional[Mapping[str, Any]] = None,
                 every_device: bool = True, seconds: float = SECONDS) -> None:
        self.name = name
        self.exercise = name[len("check_"):]
        self.options = dict(options or {})
        self.every_device = every_device
        self.seconds = seconds
        #: The course's names the assignment's set-up cell gives (set by :func:`checks_of`):
        #: an answer may call them, with no notice.
        self.given: Tuple[str, ...] = ()

    def resolve(self, options: Mapping[str, Any]) -> Dict[str, Any]:
        """The options with their defaults; a clear error for an unknown one."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            takes = ", ".join(f"{k}={v!r}" for k, v in self.options.items()) or "no options"
            raise TypeError(f"{self.name} has no option {unknown[0]!r} (it takes {takes})")
        return {**self.options, **options}

    def prepare(self) -> None:
        """The check's own trusted work, done once per process before its first call (none
        here; the ablation experiment trains a model): the grader does it before any
        submission's clock runs."""

    def starting(self) -> str:
        """A line to print before a call in the kernel whose trusted work (:meth:`prepare`)
        will take a while, so that a silent cell is not taken for a hung one ("" here)."""
        return ""

    def calls(self, seed: int, **options: Any) -> List[Args]:
        raise NotImplementedError

    def run_student(self, student: Any, args: tuple, kwargs: dict, **options: Any) -> Any:
        raise NotImplementedError

    def judge(self, seed: int, outcomes: Sequence[Any], **options: Any) -> CheckResult:
        raise NotImplementedError


class ExerciseCheck(Check):
    """A check made of exercises (:class:`~._exercise.Exercise`).

    Args:
        choose: the exercises for the given options (``choose(**options)``); with ``items``,
            several exercises that compare one item each of the pair the student returns.
        items: for a function returning a pair, which item each exercise compares.
        returns: the pair in words, e.g. ``"(output, weights)"``.
    """

    def __init__(self, name: str, choose: Callable[..., Sequence[Exercise]],
                 options: Optional[Mapping[str, Any]] = None,
                 items: Optional[Sequence[int]] = None, returns: str = "") -> None:
        super().__init__(name, options)
        self.choose = choose
        self.items = tuple(items) if items else None
        self.returns = returns

    def exercises(self, **options: Any) -> Sequence[Exercise]:
        return tuple(self.choose(**self.resolve(options)))

    def calls(self, seed: int, **options: Any) -> List[Args]:
        return _harness.calls(self.exercises(**options)[0], seed)

    def run_student(self, student: Any, args: tuple, kwargs: dict, **options: Any) -> Any:
        return _harness.run_student(self.exercises(**options)[0], student, args, kwargs,
                                    self.given)

    def judge(self, seed: int, outcomes: Sequence[Any], **options: Any) -> CheckResult:
        result = None
        for i, exercise in enumerate(self.exercises(**options)):
            item = self.items[i] if self.items else None
            result = _verdict.judge(exercise, seed, outcomes, item, self.returns)
            if not result.passed:
                return result
        assert result is not None
        return result


def single(exercise: Exercise, name: str = "") -> ExerciseCheck:
    """The check of one exercise with no options."""
    return ExerciseCheck(name or f"check_{exercise.name}", lambda: (exercise,))


def checks_of(*items: Any, given: Sequence[str] = ()) -> Dict[str, Check]:
    """A module's table of checks, ``{"check_<name>": its check}``, by the name test cells call
    them: an :class:`~._exercise.Exercise` is checked alone, with no options; a :class:`Check`
    is taken as it is.

    Args:
        items: the module's exercises and checks.
        given: the names of the course's functions its assignment's set-up cell imports
            (``tests/checks/test_checks_package.py`` holds the two lists together): an answer
            that calls them gets no notice.
    """
    checks = [x if isinstance(x, Check) else single(x) for x in items]
    for c in checks:
        c.given = tuple(given)
    return {c.name: c for c in checks}


def pair_check(name: str, weights: Exercise, other: Exercise, returns: str) -> ExerciseCheck:
    """The check of a function that returns a pair whose second item is the weights: they are
    compared first (most mistakes show there), then the other item.

    Args:
        name: ``"check_<name>"``.
        weights, other: the exercises that compare the weights and the other item.
        returns: the pair in words, e.g. ``"(output, weights)"``.
    """
    return ExerciseCheck(name, lambda: (weights, other), items=(1, 0), returns=returns)
