"""Validation of what the plots (:mod:`qkv.viz`) and bertviz views (:mod:`qkv.bertviz_views`) draw.

Part of the rule book of :mod:`qkv._validate`. Without these checks a bad argument
fails deep inside matplotlib or bertviz ("'str' object has no attribute 'imshow'"),
or draws something wrong without a word (a string of labels read one character each).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import List, Optional, Sequence

from torch import Tensor

from . import _validate as v

#: More cells than a figure can show: a heat map of 10^5 x 10^5 weights would take minutes
#: and tens of GB in matplotlib, and no screen has the pixels.
MAX_CELLS = 2**22
#: More small maps than a page can hold.
MAX_MAPS = 1024


def require_drawable(name: str, t: object, cells: Optional[int] = None) -> Tensor:
    """A real-valued tensor with values (not on ``meta``), small enough to draw.

    ``cells`` is how many numbers will be drawn (default: all of ``t``).
    """
    v.require_tensor(name, t)
    if t.is_complex():
        raise TypeError(f"{name} must be real (weights, scores or a mask), got {t.dtype}; "
                        f"draw {name}.abs() or {name}.real")
    v.require_values(name, t, "a plot draws its values")
    cells = t.numel() if cells is None else cells
    if cells > MAX_CELLS:
        raise ValueError(f"{name} of shape {v.shape_str(t)} has {cells} cells to draw, more than "
                         f"{MAX_CELLS} a figure can show; draw a slice, e.g. {name}[..., :256, :256]")
    return t


def require_labels(name: str, labels: object, n: int, what: str) -> Optional[List[str]]:
    """``None``, or a sequence (not a string) of ``n`` labels, one per ``what``; returned as strings.

    A string is a sequence of characters to Python, so ``"the cat"`` would silently label
    seven positions one letter each; it is refused with the fix.
    """
    if labels is None:
        return None
    return [str(x) for x in require_sequence(name, labels, n, what)]


def require_sequence(name: str, labels: object, n: int, what: str) -> Sequence:
    """A list or tuple (not a string, not a tensor) of ``n`` items, one per ``what``."""
    if isinstance(labels, str):
        raise TypeError(f"{name} must be a list of labels, one per {what}, got the string {labels!r}; "
                        f"write {labels.split()!r} (words) or list({labels!r}) (characters)")
    if isinstance(labels, Tensor) or not isinstance(labels, Sequence):
        raise TypeError(f"{name} must be a list of labels, one per {what}, got {type(labels).__name__}")
    if len(labels) != n:
        raise ValueError(f"{name} must hold {n} labels, one per {what}, got {len(labels)}")
    return labels


def require_mapping(name: str, x: object, what: str) -> Mapping:
    """Raise ``TypeError`` unless ``x`` is a mapping (a ``dict``), written ``what`` in the message."""
    if not isinstance(x, Mapping):
        raise TypeError(f"{name} must be {what}, got {type(x).__name__}")
    return x


def require_indices(name: str, xs: object, n: int, what: str) -> List[int]:
    """A non-empty sequence of ints in ``0 .. n - 1`` (which ``what`` to draw)."""
    items = v.require_int_sequence(name, xs)
    if not items or any(not 0 <= i < n for i in items):
        raise ValueError(f"{name} must be a non-empty selection of {what} 0..{n - 1}, got {items}")
    return items
