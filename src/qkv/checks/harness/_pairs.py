"""A pair-returning reference reduced to one item (``soft_lookup``, ``bahdanau_attention``)."""

from __future__ import annotations

from typing import Any, Callable


def picked(fn: Callable[..., Any], i: int) -> Callable[..., Any]:
    """A pair-returning function (the reference, or a variant) reduced to its item ``i``."""
    return lambda *a, **k: fn(*a, **k)[i]
