"""The checks as the trusted grader (``qkv grade``) uses them: inputs, the call, the verdict.

The grader runs the student's code in a sandbox and judges outside it; only data crosses:

1. the trusted parent asks :func:`calls` for a check's inputs (it keeps the seed);
2. the sandbox calls :func:`run_student` on each input and sends back what it returned
   (or a :class:`Raised`);
3. the parent calls :func:`judge` on those outcomes: it computes the reference, names
   the mistake and decides.

What crosses: tensors (plain ``torch.Tensor`` on the CPU, any dtype including float16 and
bfloat16), Python ``int``, ``float``, ``bool``, ``str``, ``None``, and tuples and lists of
these (a list stays a list: ``padding_mask`` takes one); ``kwargs`` are dicts with string
keys (``device=`` and ``dtype=`` cross as their names, ``"cpu"``, ``"float64"``).
:func:`run_student` returns ``(result, notices)``: the student's result as such data and a
tuple of strings, the forbidden calls it made (a flag for a person, never a deduction). The
in-kernel ``check_<name>`` functions are built on these same three functions, so the two
paths cannot disagree.

Example::

    from qkv.checks import grading
    inputs = grading.calls("check_softmax", seed=1234)
    outcomes = []
    for args, kwargs in inputs:                      # in the sandbox
        try:
            outcomes.append(grading.run_student("check_softmax", softmax, args, kwargs))
        except Exception as e:
            outcomes.append(grading.Raised.of(e))
            break
    result = grading.judge("check_softmax", 1234, outcomes)   # in the trusted parent
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from . import (bottleneck, capstone, efficient, heads, lookup, masking, multi_head, position, qkv,
               scaling, variants)
from .harness import SECONDS, Check, Raised, one_thread
from .questions import QUESTIONS, as_recorded, judge_first, record
from .result import CheckFailed, CheckResult, mistake_id

__all__ = ["CHECKS", "CheckResult", "Raised", "SECONDS", "calls", "is_answer", "judge",
           "prepare", "question", "recorded", "run_student"]

#: Every check the grader knows, by the name test cells call it.
CHECKS: Dict[str, Check] = {}
for _module in (bottleneck, lookup, qkv, scaling, multi_head, masking, position, efficient,
                variants, heads, capstone):
    CHECKS.update(_module.CHECKS)


def _check(check: str) -> Check:
    try:
        return CHECKS[check]
    except (KeyError, TypeError):
        raise KeyError(f"no check named {check!r}; known: {', '.join(sorted(CHECKS))}") from None


def calls(check: str, seed: int, **options: Any) -> List[Tuple[tuple, dict]]:
    """The inputs the student's object is called with, in order.

    Args:
        check: the check function's name as test cells write it, e.g.
            ``"check_attention_scores"``.
        seed: the seed of the inputs (the grader keeps it from the sandbox).
        **options: the test cell's keyword arguments, e.g. ``masks=False``.

    Returns:
        ``[(args, kwargs), ...]``: data only (see the module's docstring), deterministic in
        ``(check, seed, options)``.

    Raises:
        KeyError: an unknown check. TypeError: an option the check does not take.
    """
    with one_thread():  # as in the kernel: tiny tensors, no pool of threads
        return _check(check).calls(seed, **options)


def prepare(check: str) -> None:
    """Do the check's expensive trusted work now, once per process (e.g. train the model an
    experiment measures), so that it is not spent while a submission's time runs."""
    with one_thread():
        _check(check).prepare()


def run_student(check: str, student: object, args: tuple, kwargs: dict, **options: Any) -> object:
    """Call the student's object on one input as the exercise does (in the sandbox).

    A plain call, an item of a returned pair, or a module built with the reference's
    weights and called in eval mode: whatever the exercise asks. It needs neither the seed
    nor the reference.

    Returns:
        ``(result, notices)``: the result as data, and the forbidden calls it made (a tuple
        of strings such as ``"torch.softmax"``).

    Raises:
        whatever the student's code raises (send it back as :meth:`Raised.of`).
    """
    return _check(check).run_student(student, args, kwargs, **options)


def judge(check: str, seed: int, outcomes: list, **options: Any) -> CheckResult:
    """The verdict on what the student's code returned (in the trusted parent).

    Args:
        check, seed, options: as given to :func:`calls`.
        outcomes: ``outcomes[i]`` is what :func:`run_student` returned for ``calls(...)[i]``
            or a :class:`Raised`; a shorter list means the rest never ran (a time-out or a
            crash) and is judged so.

    Returns:
        the :class:`CheckResult`; a wrong answer never raises.
    """
    with one_thread():
        return _check(check).judge(seed, list(outcomes), **options)


def question(name: str, answer: object) -> CheckResult:
    """A question's recorded first answer (JSON data, as ``qkv_answers.json`` beside the
    submitted notebook holds it: a letter, a number, or for a per-student question a dict of
    the answer and its parameters) judged. Nothing is recorded: the grader judges what the
    student answered first.

    Args:
        name: the question's name, e.g. ``"masking_q1"``.
        answer: the student's first answer.

    Returns:
        the :class:`CheckResult` (``exercise`` is the question's name, ``seed`` ``None``).

    Raises:
        KeyError: an unknown question.
    """
    if name not in QUESTIONS:
        raise KeyError(f"no question named {name!r}")
    try:
        right, message = judge_first(name, answer)
    except (AssertionError, ValueError) as e:
        said = _once(name, str(e))
        kind = "not written" if "not answered yet" in said else "wrong"
        return CheckResult(name, False, None, what=said, kind=kind)
    except (ArithmeticError, TypeError) as e:  # parameters no seed gives (a length of 10**400)
        return CheckResult(name, False, None, kind="wrong",
                           what=f"the answer or its parameters cannot be judged "
                                f"({type(e).__name__}): set them as the question says")
    message = _once(name, message)
    if right:
        return CheckResult(name, True, None)
    # The answer chosen is the mistake a class report counts ("answered 'c'"), where every
    # student has the same right answer; a per-student question's answers differ by student.
    chosen = as_recorded(name, answer)
    said = f"answered {chosen!r}" if chosen is not None and not isinstance(chosen, dict) else ""
    return CheckResult(name, False, None, what=message, kind="wrong", mistake=said,
                       mistake_id=mistake_id(said) if said else "")


def _once(name: str, text: str) -> str:
    """``text`` without the question's name in front: the result's message says it once."""
    return text[len(name):].lstrip(": ") if text.startswith(name) else text


def recorded(name: str) -> object:
    """The first answer to question ``name`` that the kernel's record holds (None when there
    is none): read only, as a report of the notebook's progress judges it."""
    return record.recorded(name)


def is_answer(name: str, answer: object) -> bool:
    """Whether a recorded first answer is an answer at all (a letter, a number...): a record
    edited by hand may hold "64" where a number belongs. The kernel then judges the notebook's
    answer instead (:func:`qkv.checks.check_question`), and so does the grader."""
    return as_recorded(name, answer) is not None


# CheckFailed is what check_<name> raises in the kernel; listed for the grader's imports.
_ = CheckFailed
