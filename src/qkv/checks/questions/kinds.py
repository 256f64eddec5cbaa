"""One conceptual question of an assignment, and how an answer to it is judged.

A question is multiple choice (:class:`Choice`) or numeric (:class:`Number`). The installed
package holds no answer key in plain text: a question keeps a salted hash (:func:`digest`) of
its right answer, normalised (a lower-case letter; a number to 10 significant digits), and an
answer is right when its own hash matches. ``tests/checks/test_checks_questions.py`` checks
every key against :mod:`qkv`, so the keys cannot drift from the reference.

Feedback comes once: the first answer is the one graded (:mod:`.record` records it), and the
explanation (why that answer is wrong, and what the right one is and why) is shown after it,
so there is no unlimited "try again". The explanations are plain text: they are shown anyway.
The banks (:mod:`.early`, :mod:`.late`) hold the questions and
:func:`qkv.checks.check_question` looks them up.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Callable, Dict, Mapping, Tuple

import torch

NOT_ANSWERED = "not answered yet"


def digest(question_id: str, normalised: str) -> str:
    """The salted hash a question keeps of its right answer (and compares answers by)."""
    return hashlib.sha256(f"qkv-question:{question_id}:{normalised}".encode()).hexdigest()[:24]


def number_key(value: float) -> str:
    """A number as the key normalises it: 10 significant digits (so 0.5 and 0.50000000001
    are the same answer, and an int and its float too)."""
    return format(float(value), ".10g")


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


# Plain arithmetic, as a student may type a count in quotes ("3072 + 1536 + 48"): without the
# quotes Python works it out.
_ARITHMETIC = re.compile(r"[\d\s.,_()]*\d[\d\s.,_()]*([-+*/][\d\s.,_()*/+-]*\d[\d\s.,_()]*)+")


def _letter_fix(question_id: str, answer: object, choices: Mapping[str, str]) -> str:
    """How to write a choice for an answer that is not one of the letters."""
    example = f'{question_id} = "<your letter>"'  # a placeholder: a copy records no choice
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


def _not_answered(question_id: str, example: str) -> None:
    """A placeholder (None, ``"?"``, ``...``) is no answer: nothing is recorded."""
    __tracebackhide__ = True
    raise AssertionError(f"{question_id}: {NOT_ANSWERED}: write your answer in the answer cell, "
                         f"e.g. {question_id} = {example}, and run it")


def _number_fix(question_id: str, answer: object) -> str:
    """How to write a number for an answer that is not one."""
    if type(answer) is str:
        said, value = answer.strip(), _number_in(answer)
        if _ARITHMETIC.fullmatch(said) and "," not in said:
            return f": write it without quotes and Python works it out: {question_id} = {said}"
        if value is not None and len(said.split()) == 1:
            return f": write the number itself, without quotes: {question_id} = {value}"
        if value is not None:  # a unit or a word after it: the number may not be in the unit asked
            return (f": write only the number, without quotes or units, in the unit the question "
                    f"asks for ({question_id} = {value} if {said!r} is already in that unit)")
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
        key: :func:`digest` of the right letter.
        explain: for every letter, why that choice is right or wrong, without a final full stop.
    """

    id: str
    choices: Mapping[str, str]
    key: str
    explain: Mapping[str, str]

    def normalise(self, answer: object) -> str:
        """The letter an answer gives (``"B"``, ``"(b)"`` and ``"b."`` are read as ``"b"``).

        Raises:
            AssertionError: no answer yet, or not one of the letters (saying how to write one);
                such an answer is not recorded.
        """
        __tracebackhide__ = True
        # A placeholder, not a choice: an example copied as it is would be recorded as the
        # student's first answer.
        example = '"<your letter>"'
        if answer is None or answer is Ellipsis or (type(answer) is str and str.strip(answer) in (
                "", "?", "...")):
            _not_answered(self.id, example)
        letters = ", ".join(f'"{k}"' for k in self.choices)
        # Only a str itself: a subclass's strip, lower or __eq__ could say anything.
        letter = str.lower(str.strip(str.strip(answer), "().: ")) if type(answer) is str \
            else None
        if letter not in self.choices:
            raise AssertionError(f"{self.id}: expected one of {letters} (a str), "
                                 f"got {_shown(answer)}"
                                 f"{_letter_fix(self.id, answer, self.choices)}")
        return letter

    def right(self, letter: str) -> bool:
        """Whether a normalised answer is the right one."""
        return digest(self.id, letter) == self.key

    def feedback(self, letter: str) -> str:
        """What the student reads after answering ``letter``: right and why, or why not and
        which choice is right, and why."""
        if self.right(letter):
            return f"{self.id}: right, ({letter}) {self.choices[letter]} - {self.explain[letter]}."
        answer = next((k for k in self.choices if self.right(k)), None)
        told = (f" The answer is ({answer}) {self.choices[answer]}: {self.explain[answer]}."
                if answer else "")
        return f"{self.id}: Not ({letter}): {self.explain[letter]}.{told}"


def _as_number(question_id: str, answer: object) -> float:
    """The student's numeric answer as a finite float (an int, a float, or a one-element tensor
    or NumPy array)."""
    __tracebackhide__ = True
    if answer is None or answer is Ellipsis:
        _not_answered(question_id, "<your number>")
    if not _plain_number(answer):
        raise AssertionError(f"{question_id}: expected a number (an int or a float), "
                             f"got {_shown(answer)}{_number_fix(question_id, answer)}")
    try:
        if type(answer) is torch.Tensor:
            value = float(torch.Tensor.item(answer))  # the class's method, not an attribute
        elif type(answer).__module__ == "numpy":  # NumPy's own type: its item() is NumPy's
            value = float(answer.item())  # float() refuses a one-element array in NumPy 2.4
        else:
            value = float(answer)
    except (TypeError, ValueError, RuntimeError):
        raise AssertionError(f"{question_id}: expected a single number, "
                             f"got {_shown(answer)}") from None
    if not math.isfinite(value):
        raise AssertionError(f"{question_id}: expected a finite number, got {value!r}")
    return value


#: How close an answer must be to a typical wrong number to be told what it comes from, when it
#: is none of them to the last digit: as a student writes it (37.75 for 37.748736 MB), and
#: near that one alone (3 * 256^2 and 3 * (256^2 + 256) are 0.4% apart: neither is named).
NEAR = 5e-3


def _told(value: float, wrong: Mapping[float, str], hint: str,
          same: Callable[[float, float], bool]) -> str:
    """What ``value`` comes from: the typical wrong number it is, else the one wrong number
    it is near (:data:`NEAR`; two near it say nothing), else ``hint``."""
    exact = [w for v, w in wrong.items() if same(value, v)]
    near = [w for v, w in wrong.items() if math.isclose(value, v, rel_tol=NEAR, abs_tol=1e-12)]
    return exact[0] if exact else near[0] if len(near) == 1 else hint


@dataclass(frozen=True)
class Number:
    """A numeric question.

    Attributes:
        id: the question's id, also the name of the student's variable.
        key: :func:`digest` of the right number, normalised by :func:`number_key`.
        why: why it is that number (shown after the first answer), without a final full stop.
        wrong: computes the typical wrong numbers -> what each comes from (forgetting the
            bias, counting one head...), without a final full stop.
        hint: what to look at for any other wrong number, without a final full stop.
        rel_tol: how close a typical wrong number must be to be recognised.
    """

    id: str
    key: str
    why: str
    wrong: Callable[[], Mapping[float, str]]
    hint: str
    rel_tol: float = 1e-6

    def _same(self, a: float, b: float) -> bool:
        return math.isclose(a, b, rel_tol=self.rel_tol, abs_tol=1e-12)

    def normalise(self, answer: object) -> float:
        """The answer as a float.

        Raises:
            AssertionError: no answer yet, or not a number; such an answer is not recorded.
        """
        __tracebackhide__ = True
        return _as_number(self.id, answer)

    def right(self, value: float) -> bool:
        """Whether a normalised answer is the right one."""
        return digest(self.id, number_key(value)) == self.key

    def feedback(self, value: float) -> str:
        """What the student reads after answering ``value``."""
        shown = int(value) if float(value).is_integer() else value
        if self.right(value):
            return f"{self.id}: right, {shown!r} - {self.why}."
        why = _told(value, self.wrong(), self.hint, self._same)
        return f"{self.id}: Not {shown!r}: {why}. The reasoning: {self.why}."


@dataclass(frozen=True)
class Computed:
    """A numeric question whose numbers differ per student: its parameters come from the
    student's seed (the assignment shows how), and the check computes the answer from them, so
    a classmate's number is no answer and there is no key to find.

    Attributes:
        id: the question's id, also the name of the student's variable.
        params: the names of its parameters, as ``check_question`` takes them (positive ints).
        answer: computes the right number from the parameters (from :mod:`qkv`).
        why: the reasoning, from the parameters, without a final full stop.
        wrong: computes the typical wrong numbers -> what each comes from, from the parameters.
        hint: what to look at for any other wrong number, without a final full stop.
        examples: parameters a student's seed can give (the tests judge every question on
            each of them; the assignment's formula from the seed draws among these).
    """

    id: str
    params: Tuple[str, ...]
    answer: Callable[..., float]
    why: Callable[..., str]
    wrong: Callable[..., Mapping[float, str]]
    hint: str
    examples: Tuple[Mapping[str, int], ...] = ()
    rel_tol: float = 1e-6

    def _same(self, a: float, b: float) -> bool:
        return math.isclose(a, b, rel_tol=self.rel_tol, abs_tol=1e-12)

    def parameters(self, given: Mapping[str, object]) -> Dict[str, int]:
        """The parameters as ints, checked: the names this question takes, each a positive int."""
        __tracebackhide__ = True
        if set(given) != set(self.params):
            raise ValueError(f"{self.id}: takes the parameters {', '.join(self.params)}, got "
                             f"{', '.join(sorted(given)) or 'none'}")
        out = {}
        for name, value in given.items():
            if type(value) is not int or value <= 0:
                raise AssertionError(f"{self.id}: {name} must be a positive int (from your "
                                     f"seed, as the question says), got {_shown(value)}")
            out[name] = value
        return out

    def normalise(self, answer: object) -> float:
        """The answer as a float (see :meth:`Number.normalise`)."""
        __tracebackhide__ = True
        return _as_number(self.id, answer)

    def right(self, value: float, **params: int) -> bool:
        return self._same(value, float(self.answer(**params)))

    def feedback(self, value: float, **params: int) -> str:
        shown = int(value) if float(value).is_integer() else value
        where = ", ".join(f"{k} = {v}" for k, v in sorted(params.items()))
        if self.right(value, **params):
            return f"{self.id} ({where}): right, {shown!r} - {self.why(**params)}."
        why = _told(value, self.wrong(**params), self.hint, self._same)
        return f"{self.id} ({where}): Not {shown!r}: {why}. The reasoning: {self.why(**params)}."
