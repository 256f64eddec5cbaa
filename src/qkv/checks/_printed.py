"""A measurement returned as it would be printed: rounded, or as a percentage.

Named where the numbers are refused, before any cause of theirs (a rounded number that still
passes, max_weight to 2 decimals, passes): an experiment's (:mod:`._experiment`) and the
variance's (:mod:`._variance`).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

#: A measurement rounded too early: named where the numbers are refused (a rounded number
#: that still passes, max_weight to 2 decimals, passes), before any cause of theirs.
ROUNDED = "the measured number rounded"
PERCENT = "the measured fraction returned as a percentage (times 100)"


def rounded(values: Sequence[float],
            truth: Sequence[float]) -> Optional[Tuple[str, str, str]]:
    """``(what, hint, ROUNDED)`` when ``values`` are ``truth`` (the measurement as described,
    on the same seeds) rounded to 0 to 3 decimals, not all 0 (nothing counted, more likely),
    and not ``truth`` itself; ``(what, hint, PERCENT)`` when they are ``truth`` times 100;
    else ``None``."""
    def near(v: float, t: float) -> bool:
        return math.isclose(v, t, rel_tol=1e-6, abs_tol=1e-9)

    if any(values) and all(math.isclose(v, 100 * t, rel_tol=1e-4) for v, t in zip(values, truth)):
        return (f"every number you returned is the measurement times 100, a percentage "
                f"({', '.join(f'{v:g}' for v in values[:3])}, ...)", "return the fraction "
                "itself (0.25, not 25): make it a percentage only when you print it", PERCENT)
    d = next((d for d in range(4) if all(near(v, round(t, d)) for v, t in zip(values, truth))),
             None)
    if d is None or not any(values) or all(near(v, t) for v, t in zip(values, truth)):
        return None
    return (f"every number you returned is the measurement rounded to {d} decimal"
            f"{'' if d == 1 else 's'} ({', '.join(f'{v:g}' for v in values[:3])}, ...)",
            "return the unrounded number (round only when you print it)", ROUNDED)
