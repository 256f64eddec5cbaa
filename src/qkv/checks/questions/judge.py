"""``check_question``: feedback on the conceptual questions of the assignments.

Every assignment (1 to 11) asks two multiple-choice or numeric questions (shapes, parameter
counts, which mask, what a scale does), worth little (half a point each). The student writes
the answer in a variable named after the question (``masking_q1 = "b"``); a test cell calls
``check_question("masking_q1", masking_q1)``. The first answer is recorded (:mod:`.record`)
and graded; the explanation comes with it (why it is right, or why not and what is), and a
later different answer is told that the first one stands. The questions live in
:mod:`.early` and :mod:`.late`; their keys are hashes (:mod:`.kinds`).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, Optional, Tuple, Union

from . import early, late, record
from .kinds import Choice, Computed, Number

__all__ = ["check_question"]


def _bank() -> Mapping[str, Union[Choice, Computed, Number]]:
    questions = early.QUESTIONS + late.QUESTIONS
    bank = {q.id: q for q in questions}
    if len(bank) != len(questions):  # a copied question would shadow another silently
        raise RuntimeError("two conceptual questions share an id")
    return MappingProxyType(bank)


QUESTIONS = _bank()


def check_question(question_id: str, answer: object, **params: object) -> None:
    """Judge the first answer to one of the assignments' conceptual questions.

    Args:
        question_id: the question's id, as the test cell names it (``"masking_q1"``).
        answer: a letter (``"b"``) for a multiple-choice question, a number for a numeric one;
            ``None`` (the answer cell's placeholder) is "not answered yet".
        **params: a per-student question's parameters (``embed_dim=...``), from the student's
            seed as the assignment says; the answer is computed from them.

    Prints:
        The answer recorded as the first, and that it is right, and why.

    Raises:
        AssertionError: not answered yet, or not of the kind the question expects (a letter, a
            number: neither is recorded); or a first answer that is wrong, with why and what
            the right answer is.
        ValueError: no question has this id (a mistake in the assignment, not the answer).
    """
    __tracebackhide__ = True
    question = QUESTIONS.get(question_id) if isinstance(question_id, str) else None
    if question is None:
        raise ValueError(f"check_question: no question {question_id!r}; the ids are "
                         f"{', '.join(sorted(QUESTIONS))}")
    if isinstance(question, Computed):
        given = {"answer": question.normalise(answer), **question.parameters(params)}
    elif params:
        raise ValueError(f"check_question: {question_id} takes no parameters, got "
                         f"{', '.join(sorted(params))}")
    else:
        given = question.normalise(answer)
    first, unread = record.first(question_id, given)
    if not unread and first != given:
        recorded = as_recorded(question_id, first)
        if recorded is None:
            unread = (f"{record.path()} holds {_said(first)} for {question_id}, which is not an "
                      "answer (edited by hand?), so this answer is judged but not recorded: mend "
                      "that entry or delete it")
        first = given if recorded is None else recorded
    right, message = judge_first(question_id, first)
    note = f"{question_id}: your first answer, recorded and graded: {_said(first)}\n"
    if unread:
        note = f"{question_id}: your answer {_said(given)}. {unread}\n"
    elif first != given:
        note += (f"{question_id}: you now answer {_said(given)}; a question is graded on its "
                 f"first answer, so this one is not recorded.\n")
    if not right:
        raise AssertionError(note + message)
    print(note + message)


def judge_first(question_id: str, first: object) -> Tuple[bool, str]:
    """Whether a recorded first answer is right, and the feedback: data in, data out (what a
    trusted grader calls with the answer it read from a submission).

    Args:
        question_id: the question's id.
        first: the normalised first answer (a letter, or a number).

    Returns:
        ``(right, message)``.
    """
    question = QUESTIONS[question_id]
    if isinstance(question, Computed):
        if not isinstance(first, dict):
            raise ValueError(f"{question_id}: a recorded answer holds the answer and "
                             f"{', '.join(question.params)}")
        params = question.parameters({k: v for k, v in first.items() if k != "answer"})
        value = question.normalise(first.get("answer"))
        return question.right(value, **params), question.feedback(value, **params)
    value = question.normalise(first)
    return question.right(value), question.feedback(value)


def as_recorded(question_id: str, first: object) -> Optional[object]:
    """A first answer the record holds, normalised as a new answer is (the record may have been
    edited by hand: "B" is "b"); None when it is no answer at all ("64" where a number
    belongs, a per-student answer without its parameters). The kernel and the trusted grader
    both ask this, so that they judge the same answer: the notebook's, where the record's is
    none."""
    question = QUESTIONS[question_id]
    try:
        if isinstance(question, Computed):
            return ({**first, "answer": question.normalise(first.get("answer"))}
                    if isinstance(first, dict) else None)
        return question.normalise(first)
    except (AssertionError, ArithmeticError, TypeError, ValueError):  # 10**400: no float
        return None


def _said(answer: object) -> str:
    """An answer as the record says it (with a per-student question's parameters)."""
    if isinstance(answer, dict):
        rest = ", ".join(f"{k} = {v}" for k, v in sorted(answer.items()) if k != "answer")
        return f"{answer.get('answer')!r} ({rest})"
    return repr(answer)
