"""Checking a function that returns a pair, one item at a time.

``soft_lookup`` returns ``(output, weights)`` and ``bahdanau_attention``
``(context, weights)``. Their checks run the harness twice, first on the weights
(where most mistakes show), then on the other item, so that each comparison is of
one tensor and its messages stay precise.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from ._exercise import Exercise
from ._guard import harness
from ._harness import run_check


def pick(i: int, what: str) -> Callable[..., Any]:
    """``run_student`` for a function returning a pair: call it, check the pair, keep item ``i``.

    Args:
        i: which item to keep.
        what: the pair's items in words, e.g. ``"output, weights"``, for the message.
    """
    @harness(calls_student=True)  # it runs inside the guard, around the student's call
    def run(student, *args, **kwargs):
        result = student(*args, **kwargs)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise TypeError(f"expected a pair ({what}), got {type(result).__name__}")
        return result[i]
    return run


def picked(fn: Callable[..., Any], i: int) -> Callable[..., Any]:
    """A pair-returning variant reduced to its item ``i``."""
    return lambda *a, **k: fn(*a, **k)[i]


def run_pair(exercises: Sequence[Exercise], student: Any, seed: Optional[int]) -> None:
    """Run the checks of a pair-returning function, weights first."""
    __tracebackhide__ = True
    for ex in exercises:
        run_check(ex, student, seed)
