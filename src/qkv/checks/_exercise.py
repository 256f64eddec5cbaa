"""What a check is made of: its inputs (:class:`Case`), its known wrong answers
(:class:`Mistake`), what the answer may not use (:class:`Forbidden`) and the exercise they
belong to (:class:`Exercise`).

Every check module describes its exercises with these; :mod:`._harness` runs them. All of
them are frozen, their sequences tuples: a notebook cannot edit an exercise's cases or
reference through its attributes, and what it could do below them is undone by
:mod:`._integrity` before a check runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ._integrity import harness

Args = Tuple[tuple, dict]


@dataclass(frozen=True)
class Case:
    """One seeded input for a check.

    Args:
        label: words a student can act on, e.g. ``"batched input with L=5, S=7
            and a bool mask"``; the dtype and device are added when reported.
        build: ``build(gen, device, dtype) -> (args, kwargs)``; draw random
            numbers from ``gen`` (a CPU generator) and move them to ``device``.
            It must be a pure function of ``gen``'s seed: the harness builds the
            inputs twice, once for the answer and once for the reference.
        dtype: floating dtype of the inputs (``None`` when they have none, e.g. sizes).
        rtol, atol: tolerances (default: by dtype).
        every_device: also run on CUDA/MPS when present (CPU always runs).
    """

    label: str
    build: Callable[[torch.Generator, torch.device, torch.dtype], Args]
    dtype: Optional[torch.dtype] = torch.float32
    rtol: Optional[float] = None
    atol: Optional[float] = None
    every_device: bool = True


@dataclass(frozen=True)
class Mistake:
    """A known wrong answer: what it is called, what to look at, what it computes.

    ``fn`` takes the same arguments as the reference and returns what a student
    who made this mistake would return (or raises what they would raise).
    """

    name: str
    hint: str
    fn: Callable[..., Any]


@dataclass(frozen=True)
class Forbidden:
    """What an answer may not call, beyond the course package (every function of :mod:`qkv`
    and :mod:`qkv.checks` is always blocked).

    Args:
        names: callables (torch functions, methods, modules' forwards) with the name a
            message gives them.
        patterns: lower-case fragments of names: any torch function or aten operator, any
            function of an installed library (torch, numpy, scipy, ...) and any built-in
            whose name contains one is blocked, at whatever depth it is called.
    """

    names: Mapping[Any, str] = field(default_factory=dict)
    patterns: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", MappingProxyType(dict(self.names)))
        object.__setattr__(self, "patterns", tuple(p.lower() for p in self.patterns))
        # One search in C per name: the guard asks for every operator the answer runs.
        object.__setattr__(self, "_finditer", re.compile(
            "|".join(re.escape(p) for p in self.patterns) or "(?!)").finditer)

    def __or__(self, other: "Forbidden") -> "Forbidden":
        return Forbidden({**self.names, **other.names},
                         self.patterns + tuple(p for p in other.patterns if p not in self.patterns))

    @harness  # the guard asks it while the student's code runs
    def matches(self, name: str) -> bool:
        """Whether a function or operator called ``name`` is blocked.

        A pattern counts as a word of the name, not a run of letters across a camel-case
        boundary: ``transformer`` blocks ``TransformerEncoder`` but not sympy's
        ``IntegralTransformError``, which a library may touch while a right answer runs.
        """
        for found in self._finditer(name.lower()):
            span = name[found.start():found.end()]
            if not any(a.islower() and b.isupper() for a, b in zip(span, span[1:])):
                return True
        return False


NOTHING = Forbidden()


@dataclass(frozen=True)
class Exercise:
    """What a check needs to know about one exercise.

    Args:
        name: the exercise's function or class name, as the student writes it.
        reference: computes the right answer from a case's arguments.
        cases: the inputs.
        mistakes: the known wrong answers, most specific first.
        run_student: ``run_student(student, *args, **kwargs)``; default calls it. It runs
            while the guard is on: decorate it (and what it calls in :mod:`qkv.checks`)
            with :func:`._guard.harness`.
        forbid: what the answer may not use besides :mod:`qkv` (see :class:`Forbidden`).
        compare: ``compare(got, expected, rtol, atol) -> bool``; default allclose.
        legend: expected output shape in words, used in shape messages.
        error_hints: ``(substring of an error message, hint)`` pairs.
        watch: ``watch(args, kwargs)`` returns an object shown what the answer does (see
            :class:`._guard.Guard`) and reporting a ``problem``, e.g. the memory it uses.
        helpers: the student's other answers this one may call (name -> the reference's
            function): while the check runs, those names are the reference's, so that a
            wrong helper costs only its own test (see :mod:`._helpers`).
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
    watch: Optional[Callable[[tuple, dict], Any]] = None
    helpers: Mapping[str, Callable[..., Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("cases", "mistakes", "error_hints"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "helpers", MappingProxyType(dict(self.helpers)))
