"""Comparison helpers of the checks: is a result close, where does it differ, was an input changed.

:func:`close` decides whether a student's result matches (same shape, equal
within tolerance, NaN equal to NaN, bools identical); :func:`_where_differs`
says where and by how much it does not; :func:`_clone` and :func:`_same` copy a
call's arguments and tell whether the call modified them in place.

Everything these helpers compare with is captured when this module is imported,
so a notebook that later reassigns ``torch.allclose`` or ``torch.testing.assert_close``
does not change a verdict.
"""

from __future__ import annotations

import builtins
from typing import Any, Iterable

import torch
from torch import Tensor

# Taken from torch's C module, not from ``torch.``: a notebook that reassigns
# torch.allclose (even before this module is first imported) cannot change a verdict.
_C = torch._C._VariableFunctions
_allclose = _C.allclose
_equal = _C.equal
_isnan = _C.isnan
_argmax = _C.argmax
_abs = _C.abs
_where = _C.where
_Tensor = torch.Tensor
_float64 = torch.float64
_isinstance = builtins.isinstance


def _as64(t: Tensor) -> Tensor:
    t = t.detach().to("cpu")
    return t if t.dtype == torch.bool else t.to(_float64)


def close(got: Any, expected: Any, rtol: float, atol: float) -> bool:
    """Same shape and equal within tolerance; NaN equals NaN; bools must be identical."""
    if not (_isinstance(got, _Tensor) and _isinstance(expected, _Tensor)):
        return False
    if tuple(got.shape) != tuple(expected.shape):
        return False
    a, b = _as64(got), _as64(expected)
    if a.dtype == torch.bool or b.dtype == torch.bool:
        return a.dtype == b.dtype and _equal(a, b)
    return bool(_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


def shape_str(shape: Iterable[int]) -> str:
    """``(2, 3, 4)``."""
    return "(" + ", ".join(str(int(d)) for d in shape) + ")"


def _where_differs(got: Tensor, expected: Tensor) -> str:
    a, b = _as64(got), _as64(expected)
    if a.dtype == torch.bool or b.dtype == torch.bool:
        diff = (a != b)
        i = int(_argmax(diff.reshape(-1).to(torch.uint8)))
        idx = tuple(int(x) for x in torch.unravel_index(torch.tensor(i), a.shape)) if a.dim() else ()
        return f"first difference at index {idx}: got {a[idx].item()}, expected {b[idx].item()}"
    bad = _isnan(a) & ~_isnan(b)
    if bool(bad.any()):
        n = int(bad.sum())
        return (f"{n} value(s) are NaN where the reference is finite (NaN comes from exp "
                f"overflowing, or from -inf - (-inf) in a row with nothing to attend to)")
    diff = _abs(a - b)
    diff = _where(_isnan(diff), torch.zeros_like(diff), diff)
    i = int(_argmax(diff.reshape(-1)))
    idx = tuple(int(x) for x in torch.unravel_index(torch.tensor(i), a.shape)) if a.dim() else ()
    return (f"largest difference {float(diff.reshape(-1)[i]):.3g} at index {idx}: "
            f"got {float(a[idx]):.6g}, expected {float(b[idx]):.6g}")


def _clone(x: Any) -> Any:
    if _isinstance(x, _Tensor):
        return x.detach().clone()
    if _isinstance(x, (list, tuple)):
        return type(x)(_clone(v) for v in x)
    if _isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    return x


def _same(x: Any, y: Any) -> bool:
    if _isinstance(x, _Tensor):
        return (x.shape == y.shape and x.dtype == y.dtype
                and (_equal(_as64(x), _as64(y))
                     or bool(_allclose(_as64(x), _as64(y), equal_nan=True, rtol=0, atol=0))))
    if _isinstance(x, (list, tuple)):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    if _isinstance(x, dict):
        return all(_same(x[k], y[k]) for k in x)
    return True
