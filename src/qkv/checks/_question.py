"""One conceptual question of an assignment, and how an answer to it is judged.

A question is multiple choice (:class:`Choice`) or numeric (:class:`Number`). Its feedback is
the point: a wrong answer is told why *that* answer is wrong ("Not (b): ... Try again."), a
right one why it is right. A numeric answer is computed when asked, from :mod:`qkv` where it
can be (a parameter count from an instance), so the question cannot drift from the reference.
The banks (:mod:`._questions_early`, :mod:`._questions_late`) hold the questions and
:func:`qkv.checks.check_question` looks them up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import torch

_TRY = "Try again."


def _shown(answer: object) -> str:
    """An answer as an error message shows it: its type and its value (an object of the
    notebook's own type is not asked for its repr: it could print anything)."""
    if type(answer) not in (str, int, float, bool) and not _plain_number(answer):
        return f"{type(answer).__name__} object"
    return f"{type(answer).__name__} {answer!r}"


def _plain_number(answer: object) -> bool:
    """Python's or NumPy's own number, or a plain one-element tensor: nothing whose methods a
    notebook wrote. An answer's methods are never called: a subclass of ``str`` or ``float``
    (or an object with ``item()``) could find the right answer in the caller's frames, or
    compare equal to every letter."""
    t = type(answer)
    return (t in (int, float) or (t.__module__ == "numpy" and hasattr(answer, "dtype"))
            or t is torch.Tensor)


def _number_in(text: str) -> object:
    """The number a string answer holds (``"1,552 params"`` -> 1552), or ``None``."""
    words = text.replace(",", "").replace("_", "").split()
    for word in words[:1]:
        try:
            value = float(word)
        except ValueError:
            return None
        return int(value) if value.is_integer() else value
    return None


def _letter_fix(question_id: str, answer: object, choices: Mapping[str, str]) -> str:
    """How to write a choice for an answer that is not one of the letters."""
    example = f'{question_id} = "{next(iter(choices))}"'
    if type(answer) in (list, tuple, set):
        return f": write one letter as a str, e.g. {example}, not a {type(answer).__name__}"
    if type(answer) in (int, float):
        return f": write the letter of your choice as a str, e.g. {example}, not a number"
    if type(answer) is str:  # a subclass's methods are never called (see _plain_number)
        said = answer.strip().lower()
        for letter, text in choices.items():
            if said and said == text.strip().strip("`").lower():
                return f': write the letter of that choice, {question_id} = "{letter}"'
        if said in ("", "?", "..."):
            return f": replace the placeholder with your letter, e.g. {example}"
    if answer is None:
        return f": assign your letter, e.g. {example}"
    return ""


def _number_fix(question_id: str, answer: object) -> str:
    """How to write a number for an answer that is not one."""
    if type(answer) is str:
        value = _number_in(answer)
        if value is not None:
            return f": write the number itself, without quotes or units: {question_id} = {value}"
        return f": write a number without quotes, e.g. {question_id} = 42"
    if type(answer) in (list, tuple) and len(answer) == 1:
        return f": write the number itself, not a {type(answer).__name__}"
    if answer is None:
        return f": assign your number, e.g. {question_id} = 42"
    if type(answer) is bool:
        return f": True and False are not numbers here; write one, e.g. {question_id} = 42"
    return ""


@dataclass(frozen=True)
class Choice:
    """A multiple-choice question.

    Attributes:
        id: the question's id, also the name of the student's variable (``masking_q1``).
        choices: letter -> the choice as the assignment prints it (``"a" -> "(4, 10)"``).
        answer: the right letter.
        why: why the right choice is right (the confirmation), without a final full stop.
        wrong: for every other letter, why that choice is wrong, without a final full stop.
    """

    id: str
    choices: Mapping[str, str]
    answer: str
    why: str
    wrong: Mapping[str, str]

    def judge(self, answer: object) -> str:
        """The one-line confirmation of a right answer.

        Args:
            answer: a letter, ``"b"`` (``"B"`` and ``"(b)"`` are read as ``"b"``).

        Returns:
            "<id>: right, (b) <the choice> - <why>".

        Raises:
            AssertionError: not one of the letters, or a wrong one (saying why it is wrong).
        """
        letters = ", ".join(f'"{k}"' for k in self.choices)
        # Only a str itself: a subclass's strip, lower or __eq__ could say anything.
        letter = str.lower(str.strip(str.strip(answer), "()")) if type(answer) is str else None
        if letter not in self.choices:
            raise AssertionError(f"{self.id}: expected one of {letters} (a str), "
                                 f"got {_shown(answer)}"
                                 f"{_letter_fix(self.id, answer, self.choices)}")
        if letter != self.answer:
            raise AssertionError(f"{self.id}: Not ({letter}): {self.wrong[letter]}. {_TRY}")
        return f"{self.id}: right, ({letter}) {self.choices[letter]} - {self.why}."


def _as_number(question_id: str, answer: object) -> float:
    """The student's numeric answer as a float (an int, a float or a one-element tensor)."""
    if not _plain_number(answer):
        raise AssertionError(f"{question_id}: expected a number (an int or a float), "
                             f"got {_shown(answer)}{_number_fix(question_id, answer)}")
    try:
        if type(answer) is torch.Tensor:
            return float(torch._C.TensorBase.item(answer))  # torch's own, not a method lookup
        return float(answer)
    except (TypeError, ValueError, RuntimeError):
        raise AssertionError(f"{question_id}: expected a single number, "
                             f"got {_shown(answer)}") from None


@dataclass(frozen=True)
class Number:
    """A numeric question: the answer within a relative tolerance.

    Attributes:
        id: the question's id, also the name of the student's variable.
        answer: computes the right number (from :mod:`qkv` where it can).
        why: why it is that number (the confirmation), without a final full stop.
        wrong: computes the typical wrong numbers -> what each comes from (forgetting the
            bias, counting one head...), without a final full stop.
        hint: what to look at for any other wrong number, without a final full stop.
        rel_tol: how close counts as equal, relative to the right number.
    """

    id: str
    answer: Callable[[], float]
    why: str
    wrong: Callable[[], Mapping[float, str]]
    hint: str
    rel_tol: float = 1e-6

    def _same(self, a: float, b: float) -> bool:
        return math.isclose(a, b, rel_tol=self.rel_tol, abs_tol=1e-12)

    def judge(self, answer: object) -> str:
        """The one-line confirmation of a right answer.

        Args:
            answer: a number.

        Returns:
            "<id>: right, <number> - <why>".

        Raises:
            AssertionError: not a number, or a wrong one (saying what it comes from, or a hint).
        """
        got, right = _as_number(self.id, answer), float(self.answer())
        if self._same(got, right):
            return f"{self.id}: right, {answer!r} - {self.why}."
        why = next((w for value, w in self.wrong().items() if self._same(got, value)), self.hint)
        raise AssertionError(f"{self.id}: Not {answer!r}: {why}. {_TRY}")
