"""The verdict of every check (:func:`judge`): the reference on the same inputs built afresh
(:func:`._harness.case_inputs`), the comparison, the known mistake named (by :mod:`._match`),
a :class:`~.result.CheckResult`; and :func:`split_outcome`, what crossed from the student's call.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch

from ._compare import _clone, close, is_tensor
from ._describe import describe
from ._errors import first_line, generic_hint, passed_before
from ._exercise import Case, Exercise, Mistake
from ._harness import HINT_MARK, Raised, case_inputs, case_seeds
from ._kind import WRONG_DEVICE, kind_problem, returned_words
from ._match import Passed, match_mistake, quiet
from ._notice import notice_text
from ..result import CheckResult

__all__: list = []

_DEVICE_ERRORS = ("is not on the expected device", "Expected all tensors to be on the same device")

_INPUTS_CHANGED_HINT = ("do not change the arguments: write out-of-place operations "
                        "(x = x * s, not x *= s; masked_fill, not masked_fill_), or work on a "
                        "copy (x = x.clone()) before assigning into it (x[..., i] = ...)")


def _tolerances(case: Case) -> Tuple[float, float]:
    rtol, atol = (1e-7, 1e-10) if case.dtype == torch.float64 else (1e-4, 1e-5)
    return (case.rtol if case.rtol is not None else rtol,
            case.atol if case.atol is not None else atol)


def describe_case(case: Case) -> str:
    """The input in words, with its dtype: ``"float32 batched input with L=5"``."""
    kind = "" if case.dtype is None else str(case.dtype).replace("torch.", "") + " "
    return f"{kind}{case.label}"


class _Failed(Exception):
    """A verdict reached: carries the fields of a failing result."""

    def __init__(self, what: str, hint: str = "", mistake: Optional[Mistake] = None,
                 kind: str = "wrong") -> None:
        super().__init__(what)
        self.what, self.hint, self.mistake, self.kind = what, hint, mistake, kind


def dtype_of(args: Any) -> Optional[torch.dtype]:
    """The dtype of the first floating tensor among ``args`` (nested), or None."""
    for a in args if isinstance(args, (tuple, list)) else (args,):
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            return a.dtype
        if isinstance(a, (tuple, list)):
            found = dtype_of(a)
            if found is not None:
                return found
    return None


def _judge_raised(exercise: Exercise, raised: Raised, args: tuple, kwargs: dict, expected: Any,
                  rtol: float, atol: float, passed: Sequence[str],
                  passed_inputs: Sequence[Passed] = ()) -> None:
    if raised.type == "NotImplementedError":
        raise _Failed("", kind="not written")
    if raised.type == "InputsChanged":
        raise _Failed("inputs modified in place", _INPUTS_CHANGED_HINT)
    if raised.type == "NotRepeatable":
        what, _, hint = raised.message.partition(HINT_MARK)
        raise _Failed(what, hint or NOT_REPEATABLE.hint, NOT_REPEATABLE)
    if raised.type == "ExerciseRule":
        what, _, hint = raised.message.partition(HINT_MARK)
        raise _Failed(what, hint)
    at = f"\n  at {raised.line}" if raised.line else ""
    shown = f"{raised.type}: {(raised.message.strip().splitlines() or [''])[0]}"
    m = match_mistake(exercise, args, kwargs, None, raised, expected, rtol, atol, passed_inputs)
    if m is not None:
        raise _Failed(f"it raised {shown}, as '{m.name}' does{at}", m.hint, m, kind="raised")
    hint = WRONG_DEVICE if any(s in raised.message for s in _DEVICE_ERRORS) else ""
    for needle, h in exercise.error_hints:
        if needle in raised.message:
            hint = h
            break
    half = dtype_of(args) in (torch.float16, torch.bfloat16)
    raise _Failed(f"it raised {shown}{passed_before(passed, half)}{at}",
                  hint or generic_hint(raised.message), kind="raised")


#: Two calls on the same input that differ (:class:`._harness.NotRepeatable`): only something
#: random does that, and in attention code it is dropout left on. A module's check says so in
#: its own words (eval mode); the name is the same, so that ``qkv report`` counts them together.
NOT_REPEATABLE = Mistake(
    "dropout left on (the result is random)",
    "F.dropout drops at random unless given training=False (training=True is its default), "
    "and scaled_dot_product_attention drops with dropout_p > 0: leave dropout out here, or "
    "pass training=False / dropout_p=0.0 (in a module, nn.Dropout is off in eval mode; "
    "F.dropout needs training=self.training)", lambda *a, **k: None)


def _judge_value(exercise: Exercise, got: Any, args: tuple, kwargs: dict, expected: Any,
                 rtol: float, atol: float, passed: Sequence[Passed] = (),
                 later: Callable[[], Sequence[Passed]] = tuple) -> None:
    found = kind_problem(got, expected, exercise.legend)
    if found:
        raise _Failed(*found)
    compare = exercise.compare or close
    if compare(got, expected, rtol, atol):
        return
    m = match_mistake(exercise, args, kwargs, got, None, expected, rtol, atol, passed, later)
    if m is not None:
        raise _Failed("the result matches a known mistake: " + m.name, m.hint, m)
    if is_tensor(got) and is_tensor(expected):
        raise _Failed(*describe(got, expected, rtol, atol, exercise.legend))
    if isinstance(expected, tuple) and isinstance(got, tuple):
        for i, (g, e) in enumerate(zip(got, expected)):
            if is_tensor(g) and is_tensor(e) and not close(g, e, rtol, atol):
                what, hint = describe(g, e, rtol, atol)
                said = f" ({exercise.legend})" if exercise.legend.startswith("(") else ""
                raise _Failed(f"item {i} of the result{said} is wrong: {what}", hint)
    raise _Failed("the result differs from the reference")


#: Notices one call may carry, and characters each: a few are all an honest answer makes, and
#: what crosses from a sandbox is the student's to choose (the parent must not pay for more).
NOTICES, NOTICE_CHARS = 16, 300


def split_outcome(outcome: Any) -> Tuple[Any, tuple]:
    """``(result, notices)`` from what :func:`run_student` returned (as it crossed): at most
    :data:`NOTICES` distinct notices of at most :data:`NOTICE_CHARS` characters."""
    if isinstance(outcome, (tuple, list)) and len(outcome) == 2 and isinstance(
            outcome[1], (tuple, list)) and all(isinstance(n, str) for n in outcome[1]):
        return outcome[0], tuple(dict.fromkeys(n[:NOTICE_CHARS] for n in outcome[1][:NOTICES]))
    return outcome, ()


def _item(exercise_item: Optional[int], got: Any, returns: str) -> Any:
    """Item ``exercise_item`` of the pair the student returned (``got`` itself when ``None``)."""
    if exercise_item is None:
        return got
    if not isinstance(got, tuple) or len(got) != 2:
        said = f"{len(got)} items" if isinstance(got, tuple) else returned_words(got)
        raise _Failed(f"it returned {said}, expected a pair {returns}",
                      f"return both: return {returns.strip('()')}")
    return got[exercise_item]


def _later(exercise: Exercise, seed: int, outcomes: Sequence[Any], i: int,
           item: Optional[int]) -> List[Passed]:
    """The inputs after the ``i``-th with the answer's own results as their expected ones
    (those it returned a value for), at ten times the tolerance a mistake's match gets."""
    out: List[Passed] = []
    for j, (case, case_seed) in enumerate(case_seeds(exercise, seed)):
        if j <= i or j >= len(outcomes) or isinstance(outcomes[j], Raised):
            continue
        try:
            got = _item(item, split_outcome(outcomes[j])[0], "")
        except _Failed:
            continue
        rtol, atol = _tolerances(case)
        args, kwargs = case_inputs(case, case_seed)
        out.append((args, kwargs, got, rtol * 10, atol * 10))
    return out


def judge(exercise: Exercise, seed: int, outcomes: Sequence[Any], item: Optional[int] = None,
          returns: str = "") -> CheckResult:
    """The verdict on the student's outcomes, one per input of :func:`calls`.

    Args:
        exercise: what was checked.
        seed: the seed :func:`calls` drew the inputs from.
        outcomes: what :func:`run_student` returned for each input, or a :class:`Raised`;
            fewer than the inputs when the rest never ran (a time-out, a crash).
        item: compare only this item of a pair the student returns (``returns`` says
            what the pair holds, e.g. ``"(output, weights)"``).

    Returns:
        the :class:`~.result.CheckResult`; it never raises for a wrong answer.
    """
    passed: List[str] = []
    passed_inputs: List[Passed] = []
    notices: List[str] = []
    for i, (case, case_seed) in enumerate(case_seeds(exercise, seed)):
        where = describe_case(case)
        if i >= len(outcomes):
            return CheckResult(exercise.name, False, seed, where, what=(
                f"your {exercise.name} did not finish on {where} (it ran past the time limit, "
                "or its process ended)"), hint="an endless loop, or a loop over every element?",
                kind="timeout", notice=notice_text(notices))
        args, kwargs = case_inputs(case, case_seed)
        expected, err = quiet(exercise.reference, *_clone(args), **_clone(kwargs))
        if err is not None:  # a bug in the check itself, not in the student's code
            raise RuntimeError(f"reference failed on {where}: {first_line(err)}") from err
        rtol, atol = _tolerances(case)
        outcome = outcomes[i]
        try:
            if isinstance(outcome, Raised):
                _judge_raised(exercise, outcome, args, kwargs, expected, rtol, atol, passed,
                              passed_inputs)
            got, noticed = split_outcome(outcome)
            notices += [n for n in noticed if n not in notices]
            later = lru_cache(None)(partial(_later, exercise, seed, outcomes, i, item))
            _judge_value(exercise, _item(item, got, returns), args, kwargs, expected, rtol, atol,
                         passed_inputs, later)
        except _Failed as f:
            m = f.mistake
            return CheckResult(exercise.name, False, seed, where, m.id if m else "",
                               m.name if m else "", f.hint, f.what, notice_text(notices), f.kind)
        passed.append(where)
        passed_inputs.append((args, kwargs, expected, rtol, atol))
    return CheckResult(exercise.name, True, seed, notice=notice_text(notices))
