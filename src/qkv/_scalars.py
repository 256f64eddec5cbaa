"""Validation of the non-tensor arguments: sizes, flags, numbers, choices, devices, dtypes.

Part of the rule book of :mod:`qkv._validate` (which re-exports every name here): each
helper names the argument, says what it got and what was expected. To Python ``True`` is
an ``int`` and any object is true or false to ``if``; both confusions are refused, because a
flag passed where a size belongs (or ``"yes"`` where a flag belongs) is a mistake, not a value.
NumPy's integers and floats are accepted where Python's are: they are what indexing an
array or reading a config with NumPy gives.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Iterable, List, Optional, Sequence

import torch


def _is_int(n: object) -> bool:
    """An integer that is not a flag (``bool``, NumPy's ``bool_`` is not ``Integral``)."""
    return isinstance(n, Integral) and not isinstance(n, bool)


def _is_real(x: object) -> bool:
    """A real number that is not a flag."""
    return isinstance(x, Real) and not isinstance(x, bool)


def require_int(name: str, n: object, minimum: int = 1) -> int:
    """Raise ``ValueError`` unless ``n`` is an integer (not a ``bool``) of at least ``minimum``.

    Returns:
        ``n`` as a Python ``int``.
    """
    if not _is_int(n) or n < minimum:
        want = {0: "a non-negative int", 1: "a positive int"}.get(minimum, f"an int >= {minimum}")
        raise ValueError(f"{name} must be {want}, got {n!r}")
    return int(n)


def require_int_sequence(name: str, xs: object) -> List[int]:
    """Raise ``TypeError`` unless ``xs`` is an iterable of integers (not bools); return them as a list."""
    items = None if isinstance(xs, (str, bytes)) else list(xs) if isinstance(xs, Iterable) else None
    if items is None or not all(_is_int(x) for x in items):
        raise TypeError(f"{name} must be a sequence of ints or a 1-D integer tensor, got {xs!r}")
    return [int(x) for x in items]


def require_flag(name: str, flag: object) -> bool:
    """Raise ``TypeError`` unless ``flag`` is ``True`` or ``False`` (NumPy's ``bool_`` too).

    ``is_causal="no"`` or ``is_causal=1`` would be true to ``if`` and silently change the
    result, as torch's own functions refuse them.
    """
    if isinstance(flag, bool) or type(flag).__name__ == "bool_":
        return bool(flag)
    raise TypeError(f"{name} must be True or False, got {type(flag).__name__} {flag!r}")


def default_scale(E: int) -> float:
    """``1 / sqrt(E)``, SDPA's default scale; 1 for ``E = 0``, where torch gives uniform weights.

    With no features every score is an empty sum, 0, whatever the scale: torch returns the
    mean of the values, and ``1 / sqrt(0)`` must not raise ``ZeroDivisionError`` first.
    """
    return 1.0 / math.sqrt(E) if E else 1.0


def require_positive_number(name: str, x: object, note: str = "") -> float:
    """Raise ``ValueError`` unless ``x`` is a real number (not a ``bool``) greater than 0.

    ``note`` is added to the message after "a positive number" (say what else is accepted).
    """
    if not _is_real(x) or not x > 0:
        raise ValueError(f"{name} must be a positive number{note}, got {x!r}")
    return x


def require_finite_number(name: str, x: object, minimum: float = 0.0) -> float:
    """Raise ``ValueError`` unless ``x`` is a finite real number (not a ``bool``) of at least ``minimum``."""
    if not _is_real(x) or not (minimum <= x and math.isfinite(x)):
        raise ValueError(f"{name} must be a finite number >= {minimum}, got {x!r}")
    return float(x)


def require_probability(name: str, p: object) -> float:
    """Raise ``ValueError`` unless ``p`` is a number in ``[0, 1]`` (a dropout probability, as torch's)."""
    if not _is_real(p) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {p!r}")
    return p


def require_choice(name: str, value: object, choices: Sequence[object]) -> object:
    """Raise ``ValueError`` unless ``value`` is one of ``choices``."""
    if not any(type(value) is type(c) and value == c for c in choices):
        raise ValueError(f"{name} must be {' or '.join(map(repr, choices))}, got {value!r}")
    return value


def require_callable(name: str, fn: object) -> None:
    """Raise ``TypeError`` unless ``fn`` can be called."""
    if not callable(fn):
        raise TypeError(f"{name} must be a function, got {type(fn).__name__}")


def require_device(name: str, device: object) -> Optional[torch.device]:
    """Raise unless ``device`` is ``None``, a ``torch.device`` or a device string like ``"cpu"``.

    ``torch.device(7)`` means ``cuda:7``; an int is more likely a size passed in the wrong place.
    """
    if device is None:
        return None
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"{name} must be a torch.device, a string such as 'cpu', or None, "
                        f"got {type(device).__name__} {device!r}")
    try:
        return torch.device(device)
    except RuntimeError as error:
        raise ValueError(f"{name}={device!r} is not a device torch knows: {error}") from None


def require_float_dtype(name: str, dtype: object) -> torch.dtype:
    """Raise ``TypeError`` unless ``dtype`` is a floating-point ``torch.dtype``."""
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        hint = f"; write torch.{dtype}" if isinstance(dtype, str) else ""
        raise TypeError(f"{name} must be a floating-point torch.dtype, got {dtype!r}{hint}")
    return dtype


def require_instance(name: str, x: object, cls: type, what: str, hint: str = ""):
    """Raise ``TypeError`` unless ``x`` is an instance of ``cls``, written ``what`` in the message."""
    if not isinstance(x, cls):
        raise TypeError(f"{name} must be {what}, got {type(x).__name__}{hint}")
    return x


def require_even(name: str, n: int, why: str) -> int:
    """Raise ``ValueError`` unless the size ``n`` is even; ``why`` says what needs pairs."""
    if n % 2:
        raise ValueError(f"{name} must be even ({why}), got {n}")
    return n
