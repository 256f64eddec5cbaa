"""Which known mistake an answer made: the catalogue's variants run on the same input.

A mistake is named when its variant gives the answer's result (or raises its error) on the
failing input, passes the inputs the answer passed, and gives the answer's own results on the
inputs after it (:func:`match_mistake`); the verdict (:mod:`._harness`) says the rest.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Optional, Sequence, Tuple

from ._compare import _clone, close
from ._exercise import Exercise, Mistake


def quiet(fn: Callable[..., Any], *args: Any, **kwargs: Any
           ) -> Tuple[Any, Optional[BaseException]]:
    """Run ``fn`` with warnings recorded (never printed); return (result, exception)."""
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        try:
            return fn(*args, **kwargs), None
        except Exception as e:  # noqa: BLE001 (a mistake's variant may raise)
            return None, e


#: An input the answer passed: (args, kwargs, the reference's result, rtol, atol).
Passed = Tuple[tuple, dict, Any, float, float]


def fits(exercise: Exercise, m: Mistake, passed: Sequence[Passed]) -> bool:
    """Whether mistake ``m`` also passes every input the answer passed: a mistake that would
    have failed one of them is not quite the answer's (four printed bugs and the one left of
    them both give NaN on the last input; only the one left passes the inputs before it)."""
    compare = exercise.compare or close
    for args, kwargs, expected, rtol, atol in passed:
        out, err = quiet(m.fn, *_clone(args), **_clone(kwargs))
        if err is not None or not compare(out, expected, rtol, atol):
            return False
    return True


def match_mistake(exercise: Exercise, args: tuple, kwargs: dict, got: Any,
                   raised: Any, expected: Any, rtol: float, atol: float,
                   passed: Sequence[Passed] = (),
                   later: Callable[[], Sequence[Passed]] = tuple) -> Optional[Mistake]:
    """The first mistake that gives the answer's result (or error) here, passes the inputs
    the answer passed and gives the answer's results on the inputs after this one (``later``:
    each with the answer's result as its expected one: of two printed bugs left, one may show
    only there); failing that, the first that gives it here and passes those before; failing
    that, the first that gives it here (an answer with the mistake on some inputs only: a
    causal mask aligned to the bottom right once L > S). ``raised``: the answer's
    :class:`._harness.Raised`, or ``None`` when it returned a value."""
    compare = exercise.compare or close
    first: Optional[Mistake] = None
    fitting: Optional[Mistake] = None
    mistakes = exercise.mistakes
    if raised is not None:  # an error says which bug raised it, not which others are left
        mistakes = sorted(mistakes, key=lambda m: " bugs of the printed " in m.name)
    for m in mistakes:
        out, err = quiet(m.fn, *_clone(args), **_clone(kwargs))
        if raised is not None:
            same = err is not None and type(err).__name__ == raised.type and \
                str(err) == raised.message
        elif err is not None or got is None or compare(out, expected, rtol, atol):
            continue  # raised, or makes no difference on this input (as the answer is judged)
        else:
            same = compare(got, out, rtol * 10, atol * 10)
        if same:
            if fits(exercise, m, passed):
                if fits(exercise, m, later()):
                    return m
                fitting = fitting or m
            first = first or m
    return fitting or first
