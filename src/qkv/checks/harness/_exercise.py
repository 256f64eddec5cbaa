"""What a check is made of: its inputs (:class:`Case`), its known wrong answers
(:class:`Mistake`), what the answer is asked not to call (:class:`Forbidden`) and the exercise
they belong to (:class:`Exercise`).

Every check module describes its exercises with these; :mod:`._harness` runs them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial
from itertools import combinations
from types import MappingProxyType
from typing import Any, Callable, Mapping, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..result import mistake_id

Args = Tuple[tuple, dict]


@dataclass(frozen=True)
class Case:
    """One seeded input for a check.

    Args:
        label: words a student can act on, e.g. ``"batched input with L=5, S=7
            and a bool mask"``; the dtype is added when reported.
        build: ``build(gen, device, dtype) -> (args, kwargs)``; draw random
            numbers from ``gen`` (a CPU generator) and move them to ``device``.
            It must be a pure function of ``gen``'s seed: the harness builds the
            inputs twice, once for the answer and once for the reference. The arguments
            are data: tensors, Python numbers, strings, ``None`` and tuples of them.
        dtype: floating dtype of the inputs (``None`` when they have none, e.g. sizes).
        rtol, atol: tolerances (default: by dtype).
    """

    label: str
    build: Callable[[torch.Generator, torch.device, Optional[torch.dtype]], Args]
    dtype: Optional[torch.dtype] = torch.float32
    rtol: Optional[float] = None
    atol: Optional[float] = None


@dataclass(frozen=True)
class Mistake:
    """A known wrong answer: what it is called, what to look at, what it computes.

    ``fn`` takes the same arguments as the reference and returns what a student
    who made this mistake would return (or raises what they would raise).
    """

    name: str
    hint: str
    fn: Callable[..., Any]

    @property
    def id(self) -> str:
        """A stable id made from the name (:func:`.result.mistake_id`)."""
        return mistake_id(self.name)


@dataclass(frozen=True)
class Forbidden:
    """What an answer is asked not to call: a call gets a notice, not a failure.

    Args:
        names: torch callables with the name a notice gives them.
        patterns: lower-case fragments of names: a torch function whose name contains one
            (as a word, not across a camel-case boundary) is noticed too.
        own: names of the student's own earlier answers the exercise asks not to build on
            (``linear_attention`` where running sums are asked for).
    """

    names: Mapping[Any, str] = field(default_factory=dict)
    patterns: Tuple[str, ...] = ()
    own: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", MappingProxyType(dict(self.names)))
        object.__setattr__(self, "patterns", tuple(p.lower() for p in self.patterns))
        object.__setattr__(self, "_finditer", re.compile(
            "|".join(re.escape(p) for p in self.patterns) or "(?!)").finditer)

    def __or__(self, other: "Forbidden") -> "Forbidden":
        return Forbidden({**self.names, **other.names},
                         self.patterns + tuple(p for p in other.patterns if p not in self.patterns),
                         self.own + tuple(n for n in other.own if n not in self.own))

    def matches(self, name: str) -> bool:
        """Whether a function called ``name`` is one the exercise asks not to call."""
        for found in self._finditer(name.lower()):
            span = name[found.start():found.end()]
            if not any(a.islower() and b.isupper() for a, b in zip(span, span[1:])):
                return True
        return False

    def name_of(self, func: Any) -> Optional[str]:
        """The name a notice gives ``func``, or ``None`` when it is allowed."""
        try:
            named = self.names.get(func)
        except TypeError:  # an unhashable callable
            named = None
        if named:
            return named
        name = getattr(func, "__name__", "") or ""
        if name and self.matches(name):
            owner = getattr(func, "__qualname__", name).split(".")[0]
            return f"Tensor.{name}" if owner in ("Tensor", "TensorBase") else f"torch.{name}"
        return None


NOTHING = Forbidden()


@dataclass(frozen=True)
class Exercise:
    """What a check needs to know about one exercise.

    Args:
        name: the exercise's function or class name, as the student writes it.
        reference: computes the right answer from a case's arguments.
        cases: the inputs.
        mistakes: the known wrong answers, most specific first; those marked "(a bug of the
            printed function)" are also tried together (:func:`printed_combinations`).
        run_student: ``run_student(student, *args, **kwargs)``: how the exercise calls the
            student's object (default: a plain call). It must not need the reference.
        forbid: what the answer is asked not to call (a notice, see :class:`Forbidden`).
        compare: ``compare(got, expected, rtol, atol) -> bool``; default allclose.
        legend: expected output shape in words, used in shape messages.
        error_hints: ``(substring of an error message, hint)`` pairs.
        helpers: the student's other answers this one may call (name -> the reference's
            function): while the student's code runs, those names are the reference's, so
            that a wrong helper costs only its own test (see :mod:`._helpers`).
    """

    name: str
    reference: Callable[..., Any]
    cases: Sequence[Case]
    mistakes: Sequence[Mistake] = ()
    run_student: Optional[Callable[..., Any]] = None
    forbid: Forbidden = NOTHING
    compare: Optional[Callable[[Tensor, Tensor, float, float], bool]] = None
    legend: str = ""
    error_hints: Sequence[Tuple[str, str]] = ()
    helpers: Mapping[str, Callable[..., Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("cases", "mistakes", "error_hints"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "mistakes", printed_combinations(self.mistakes))
        object.__setattr__(self, "helpers", MappingProxyType(dict(self.helpers)))


# "(a bug of the printed function)", or "(> instead of >=, a bug of the printed function)";
# "block" where a whole block is printed.
_PRINTED = re.compile(r"(?: \(|, )a bug of the printed (\w+)\)$")


def _bug_name(name: str) -> Tuple[str, str]:
    """A printed bug's name without its mark, and what was printed ("function", "block"):
    ``("softmax over the queries (dim=-2)", "function")``; ``("", "")`` for another mistake."""
    found = _PRINTED.search(name)
    if not found:
        return "", ""
    return name[:found.start()] + (")" if found.group(0).startswith(",") else ""), found.group(1)


def printed_combinations(mistakes: Tuple[Mistake, ...]) -> Tuple[Mistake, ...]:
    """``mistakes``, led by every combination of two or more of the printed code's bugs.

    A debugging exercise prints a function (or a block) with several bugs; a student who
    fixed one of them still hands in the others, which no single bug's variant computes. The
    bugs are the mistakes marked "(a bug of the printed function)" that switch one function's
    keywords (``partial(f, switch=...)``); a combination turns on all of theirs. The single
    bugs come first, then the combinations, fewest bugs first: the first that gives the
    answer's result names only bugs that make a difference there (a bug already fixed often
    makes none on the input where the others show, and was named as left).
    An exercise that lists its own combinations ("2 bugs of the printed ...") is left alone.
    """
    bugs = [m for m in mistakes if _bug_name(m.name)[0] and isinstance(m.fn, partial)
            and m.fn.keywords and not m.fn.args]
    if len(bugs) < 2 or len({m.fn.func for m in bugs}) != 1 \
            or len({_bug_name(m.name)[1] for m in bugs}) != 1 \
            or any("bugs of the printed" in m.name for m in mistakes):
        return mistakes
    printed = _bug_name(bugs[0].name)[1]
    combined = []
    for n in range(2, len(bugs) + 1):
        for left in combinations(bugs, n):
            switches: dict = {}
            for m in left:
                switches.update(m.fn.keywords)
            if len(switches) != sum(len(m.fn.keywords) for m in left):
                continue  # two bugs that turn the same switch cannot both be left
            combined.append(Mistake(
                f"{n} bugs of the printed {printed} left: "
                + "; ".join(_bug_name(m.name)[0] for m in left),
                "; and ".join(m.hint for m in left), partial(bugs[0].fn.func, **switches)))
    return mistakes + tuple(combined)
