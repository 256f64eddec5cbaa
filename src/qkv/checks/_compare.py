"""Comparison helpers of the checks: is a result close, where does it differ, was an input changed.

:func:`close` decides whether a student's result matches (same shape, equal
within tolerance, NaN equal to NaN, bools identical); :func:`_where_differs`
says where and by how much it does not; :func:`_clone` and :func:`_same` copy a
call's arguments and tell whether the call modified them in place;
:func:`not_plain` refuses anything but a plain tensor.

Everything these helpers call is captured when this module is imported, from torch's
C types (``torch._C._VariableFunctions`` and ``torch._C.TensorBase``, which Python code
cannot change), never looked up on ``torch`` or on ``torch.Tensor`` when a check runs:
a notebook that reassigns ``torch.allclose``, ``torch.Tensor.allclose`` or
``Tensor.__eq__``, before or after the checks are imported, does not change a verdict.
"""

from __future__ import annotations

import builtins
import types
from typing import Any, Iterable, Optional

import torch
from torch import Tensor

_VF = torch._C._VariableFunctions
_TB = torch._C.TensorBase
_allclose = _VF.allclose
_equal = _VF.equal
_isnan = _VF.isnan
_argmax = _VF.argmax
_abs = _VF.abs
_where = _VF.where
_zeros_like = _VF.zeros_like
_sub = _VF.sub
_detach = _TB.detach
_to = _TB.to
_clone_t = _TB.clone
_reshape = _TB.reshape
_item = _TB.item
_dim = _TB.dim
_getitem = _TB.__getitem__
_any = _TB.any
_sum = _TB.sum
_ne = _TB.ne
_and = _TB.__and__
_invert = _TB.__invert__
_shape = _TB.__dict__["shape"].__get__
_dtype = _TB.__dict__["dtype"].__get__
_device = _TB.__dict__["device"].__get__
_Tensor = torch.Tensor
_float64 = torch.float64
_bool = torch.bool
_uint8 = torch.uint8
_isinstance = builtins.isinstance
_type = builtins.type
_tuple = builtins.tuple
_int = builtins.int
_float = builtins.float
_bool_ = builtins.bool
_len = builtins.len
_zip = builtins.zip
_all = builtins.all
_list = builtins.list
_dict = builtins.dict

# The captured functions must be torch's own: a notebook that ran before the checks were
# imported could otherwise have planted its own. C functions cannot be defined in a cell.
for _f in (_allclose, _equal, _isnan, _argmax, _abs, _where, _zeros_like, _sub):
    if _type(_f) is not types.BuiltinFunctionType:
        raise ImportError("torch's comparison functions were replaced before qkv.checks was "
                          "imported; restart the kernel")


def is_tensor(x: Any) -> bool:
    """A plain ``torch.Tensor``, not a subclass (whose methods could say anything)."""
    return _type(x) is _Tensor


def not_plain(x: Any) -> Optional[str]:
    """Why ``x`` (a result) is refused before any comparison, or ``None`` for a plain tensor.

    A subclass of ``torch.Tensor`` can redefine every method a comparison would call,
    and its ``__torch_function__`` is consulted even by torch's C functions, so nothing
    but an exact ``torch.Tensor`` is compared.
    """
    if _isinstance(x, _Tensor) and _type(x) is not _Tensor:
        return (f"it returned a {_type(x).__name__}, a subclass of torch.Tensor; the checks "
                f"compare plain tensors only (return a torch.Tensor)")
    return None


def shape_of(t: Tensor) -> tuple:
    """``t.shape`` as a tuple of ints, read from torch's C type."""
    return _tuple(_shape(t))


def _as64(t: Tensor) -> Tensor:
    t = _to(_detach(t), "cpu")
    return t if _dtype(t) == _bool else _to(t, _float64)


def close(got: Any, expected: Any, rtol: float, atol: float) -> bool:
    """Same shape and equal within tolerance; NaN equals NaN; bools must be identical."""
    if not (is_tensor(got) and is_tensor(expected)):
        return False
    if shape_of(got) != shape_of(expected):
        return False
    a, b = _as64(got), _as64(expected)
    if _dtype(a) == _bool or _dtype(b) == _bool:
        return _dtype(a) == _dtype(b) and _equal(a, b)
    return _bool_(_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


def shape_str(shape: Iterable[int]) -> str:
    """``(2, 3, 4)``."""
    return "(" + ", ".join(str(_int(d)) for d in shape) + ")"


def _unravel(i: int, shape: tuple) -> tuple:
    idx = []
    for d in reversed(shape):
        idx.append(i % d)
        i //= d
    return _tuple(reversed(idx))


def _where_differs(got: Tensor, expected: Tensor) -> str:
    a, b = _as64(got), _as64(expected)
    shape = shape_of(a)
    if _dtype(a) == _bool or _dtype(b) == _bool:
        i = _int(_argmax(_to(_reshape(_ne(a, b), (-1,)), _uint8)))
        idx = _unravel(i, shape)
        return (f"first difference at index {idx}: got {_item(_getitem(a, idx))}, "
                f"expected {_item(_getitem(b, idx))}")
    bad = _and(_isnan(a), _invert(_isnan(b)))
    if _bool_(_any(bad)):
        n = _int(_sum(bad))
        return (f"{n} value(s) are NaN where the reference is finite (NaN comes from exp "
                f"overflowing, or from -inf - (-inf) in a row with nothing to attend to)")
    diff = _abs(_sub(a, b))
    diff = _where(_isnan(diff), _zeros_like(diff), diff)
    flat = _reshape(diff, (-1,))
    i = _int(_argmax(flat))
    idx = _unravel(i, shape)
    return (f"largest difference {_float(_getitem(flat, i)):.3g} at index {idx}: "
            f"got {_float(_getitem(a, idx)):.6g}, expected {_float(_getitem(b, idx)):.6g}")


def _clone(x: Any) -> Any:
    if _isinstance(x, _Tensor):
        return _clone_t(_detach(x))
    if _isinstance(x, (_list, _tuple)):
        return _type(x)(_clone(v) for v in x)
    if _isinstance(x, _dict):
        return {k: _clone(v) for k, v in x.items()}
    return x


def _same(x: Any, y: Any) -> bool:
    if _isinstance(x, _Tensor):
        if not _isinstance(y, _Tensor) or shape_of(x) != shape_of(y) or _dtype(x) != _dtype(y):
            return False
        a, b = _as64(x), _as64(y)
        return _equal(a, b) or _bool_(_allclose(a, b, equal_nan=True, rtol=0, atol=0))
    if _isinstance(x, (_list, _tuple)):
        return _len(x) == _len(y) and _all(_same(a, b) for a, b in _zip(x, y))
    if _isinstance(x, _dict):
        return _all(_same(x[k], y[k]) for k in x)
    return True
