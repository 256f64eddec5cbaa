"""Whether a result is the right KIND of thing before its values are compared.

A result must be what the reference returns: a plain tensor on the inputs' device with the
reference's dtype, or (``kv_cache_step``) a tuple of such tensors, with ``None`` where the
reference has ``None``. :func:`kind_problem` says in words what is wrong with anything
else: ``None`` (a missing ``return``), a list, a NumPy array, a tuple of the wrong length,
an item of the wrong dtype, a subclass of ``torch.Tensor`` built to pass comparisons.
"""

from __future__ import annotations

import sys

from typing import Any, Optional, Tuple

import torch

#: What to do about a result on the wrong device.
WRONG_DEVICE = ("pass device= taken from the inputs (e.g. device=query.device) to every "
                "torch.ones/zeros/full/arange/tensor you create, or use the *_like functions")

__all__: list = []

Finding = Tuple[str, str]

_DTYPE_HINT = ("take dtype= from the inputs for every tensor you create (a fixed dtype, "
               "torch.tensor(...) without dtype=, or .float()/.double() changes it); a table "
               "or a sum kept in float32 on purpose is fine when the result is cast back to the "
               "inputs' dtype, e.g. .to(x.dtype))")
_BOOL_HINT = "return a bool tensor (True where attention is allowed)"


def shown(value: Any) -> str:
    """``repr(value)`` cut to 80 characters (an int of 5,000 digits has no repr)."""
    try:
        text = repr(value)
    except ValueError:
        return f"an int of more than {sys.get_int_max_str_digits()} digits"
    return text if len(text) <= 80 else text[:77] + "..."


def returned_words(got: Any) -> str:
    """``None (is a return missing?)``, ``a numpy.ndarray``, ``list``: what ``got`` is."""
    if got is None:
        return "None (is the return statement missing?)"
    if isinstance(got, str) and got.startswith("<") and got.endswith(">"):
        return got[1:-1]  # what the harness said the answer returned (see _harness.plain)
    kind = type(got)
    if kind.__module__ == "numpy":
        return f"a NumPy {kind.__name__} (keep the computation in torch)"
    return kind.__name__


def _tensor_problem(got: Any, expected: Any, what: str = "") -> Optional[Finding]:
    if not isinstance(got, torch.Tensor):
        said = f"{what} is" if what else "it returned"
        return (f"{said} {returned_words(got)}, expected a tensor",
                "return the tensor itself (not a tuple, list, NumPy array, number or None)")
    what = what or "the result"
    if got.device != expected.device:
        return (f"{what} is on {got.device}, expected {expected.device} (the inputs' device)",
                WRONG_DEVICE)
    if got.dtype != expected.dtype:
        return (f"{what} has dtype {got.dtype}, expected {expected.dtype}",
                _BOOL_HINT if expected.dtype == torch.bool else _DTYPE_HINT)
    return None


def kind_problem(got: Any, expected: Any, legend: str = "") -> Optional[Finding]:
    """``(what, hint)`` when ``got`` is not the kind of thing ``expected`` is, else ``None``.

    Args:
        got: the student's result.
        expected: the reference's result: a tensor, or a tuple of tensors (or ``None``).
        legend: the result in words, e.g. ``"(output, k_cache, v_cache)"``.
    """
    if isinstance(expected, torch.Tensor):
        return _tensor_problem(got, expected)
    if not isinstance(expected, tuple):
        return None
    n = len(expected)
    said = f" {legend}" if legend else ""
    if not isinstance(got, (tuple, list)):
        return (f"it returned {returned_words(got)}, expected a tuple of {n}{said}",
                f"return all {n} results: return a, b, ...")
    if len(got) != n:
        inner = ", ".join("tensor" if isinstance(g, torch.Tensor) else returned_words(g) for g in got)
        return (f"it returned {len(got)} item(s) ({inner}), expected {n}{said}",
                f"return the {n} results side by side (return a, b, c), not nested in pairs")
    for i, (g, e) in enumerate(zip(got, expected)):
        if e is None:
            continue
        found = _tensor_problem(g, e, f"item {i} of the result")
        if found:
            return found
    return None
