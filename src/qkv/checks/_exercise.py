"""What a check is made of: its inputs (:class:`Case`), its known wrong answers (:class:`Mistake`)
and the exercise they belong to (:class:`Exercise`).

Every check module describes its exercises with these three; :mod:`._harness` runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

Args = Tuple[tuple, dict]


@dataclass(frozen=True)
class Case:
    """One seeded input for a check.

    Args:
        label: words a student can act on, e.g. ``"batched input with L=5, S=7
            and a bool mask"``; the dtype and device are added when reported.
        build: ``build(gen, device, dtype) -> (args, kwargs)``; draw random
            numbers from ``gen`` (a CPU generator) and move them to ``device``.
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


@dataclass
class Exercise:
    """What a check needs to know about one exercise.

    Args:
        name: the exercise's function or class name, as the student writes it.
        reference: computes the right answer from a case's arguments.
        cases: the inputs.
        mistakes: the known wrong answers, most specific first.
        run_student: ``run_student(student, *args, **kwargs)``; default calls it.
        forbid_torch: torch callables the answer may not use, with readable names.
        forbid_ref: ``qkv`` functions the answer may not call, with readable names.
        compare: ``compare(got, expected, rtol, atol) -> bool``; default allclose.
        legend: expected output shape in words, used in shape messages.
        error_hints: ``(substring of an error message, hint)`` pairs.
    """

    name: str
    reference: Callable[..., Any]
    cases: Sequence[Case]
    mistakes: Sequence[Mistake] = ()
    run_student: Optional[Callable[..., Any]] = None
    forbid_torch: Dict[Any, str] = field(default_factory=dict)
    forbid_ref: Dict[Any, str] = field(default_factory=dict)
    compare: Optional[Callable[[Tensor, Tensor, float, float], bool]] = None
    legend: str = ""
    error_hints: Sequence[Tuple[str, str]] = ()
