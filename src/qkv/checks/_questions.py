"""``check_question``: instant feedback on the conceptual questions of the assignments.

Every assignment (1 to 9) asks at least two multiple-choice or numeric questions (shapes,
parameter counts, which mask, what a scale does). The student writes the answer in a variable
named after the question (``masking_q1 = "b"``); a test cell worth 1 point calls
``check_question("masking_q1", masking_q1)``, which says why a wrong answer is wrong and why a
right one is right. The questions live in :mod:`._questions_early` and :mod:`._questions_late`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, Union

from . import _questions_early, _questions_late
from ._question import Choice, Number

__all__ = ["check_question"]


def _bank() -> Mapping[str, Union[Choice, Number]]:
    questions = _questions_early.QUESTIONS + _questions_late.QUESTIONS
    bank = {q.id: q for q in questions}
    if len(bank) != len(questions):  # a copied question would shadow another silently
        raise RuntimeError("two conceptual questions share an id")
    return MappingProxyType(bank)


QUESTIONS = _bank()


def check_question(question_id: str, answer: object) -> None:
    """Judge the answer to one of the assignments' conceptual questions.

    Args:
        question_id: the question's id, as the test cell names it (``"masking_q1"``).
        answer: a letter (``"b"``) for a multiple-choice question, a number for a numeric one.

    Prints:
        One line: the answer is right, and why.

    Raises:
        AssertionError: the answer is wrong ("Not (b): why (b) is wrong. Try again.") or not
            of the kind the question expects (a letter, a number).
        ValueError: no question has this id (a mistake in the assignment, not the answer).
    """
    __tracebackhide__ = True
    question = QUESTIONS.get(question_id) if isinstance(question_id, str) else None
    if question is None:
        raise ValueError(f"check_question: no question {question_id!r}; the ids are "
                         f"{', '.join(sorted(QUESTIONS))}")
    print(question.judge(answer))
