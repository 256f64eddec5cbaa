"""Comparison helpers of the checks: is a result close, where does it differ, was an input changed.

:func:`close` decides whether a student's result matches (same shape, equal within
tolerance, NaN equal to NaN, bools identical); :func:`_where_differs` says where and by how
much it does not; :func:`_clone` and :func:`_same` copy a call's arguments and tell whether
the call modified them in place. The checks compare plain tensors that crossed as data.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
from torch import Tensor


def is_tensor(x: Any) -> bool:
    """A ``torch.Tensor``."""
    return isinstance(x, torch.Tensor)


def shape_of(t: Tensor) -> tuple:
    """``t.shape`` as a tuple of ints."""
    return tuple(int(d) for d in t.shape)


def _as64(t: Tensor) -> Tensor:
    t = t.detach().to("cpu")
    return t if t.dtype == torch.bool else t.to(torch.float64)


def close(got: Any, expected: Any, rtol: float, atol: float) -> bool:
    """Same shape and equal within tolerance; NaN equals NaN; bools must be identical."""
    if not (is_tensor(got) and is_tensor(expected)):
        return False
    if shape_of(got) != shape_of(expected):
        return False
    a, b = _as64(got), _as64(expected)
    if a.dtype == torch.bool or b.dtype == torch.bool:
        return a.dtype == b.dtype and torch.equal(a, b)
    return bool(torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


def close_each(got: Any, expected: Any, rtol: float, atol: float) -> bool:
    """A tuple of tensors, as many as the reference's, each :func:`close` to its own (an
    exercise that returns several, such as a gradient of each input)."""
    return isinstance(got, (tuple, list)) and len(got) == len(expected) and all(
        close(g, e, rtol, atol) for g, e in zip(got, expected))


def shape_str(shape: Iterable[int]) -> str:
    """``(2, 3, 4)``."""
    return "(" + ", ".join(str(int(d)) for d in shape) + ")"


def _unravel(i: int, shape: tuple) -> tuple:
    idx = []
    for d in reversed(shape):
        idx.append(i % d)
        i //= d
    return tuple(reversed(idx))


def _where_differs(got: Tensor, expected: Tensor) -> str:
    a, b = _as64(got), _as64(expected)
    shape = shape_of(a)
    if a.dtype == torch.bool or b.dtype == torch.bool:
        i = int(a.ne(b).reshape(-1).to(torch.uint8).argmax())
        idx = _unravel(i, shape)
        return f"first difference at index {idx}: got {a[idx].item()}, expected {b[idx].item()}"
    bad = a.isnan() & ~b.isnan()
    if bool(bad.any()):
        return (f"{int(bad.sum())} value(s) are NaN where the reference is finite (NaN comes "
                f"from exp overflowing, or from -inf - (-inf) in a row with nothing to attend to)")
    diff = (a - b).abs()
    diff = torch.where(diff.isnan(), torch.zeros_like(diff), diff)
    flat = diff.reshape(-1)
    i = int(flat.argmax())
    idx = _unravel(i, shape)
    return (f"largest difference {float(flat[i]):.3g} at index {idx}: "
            f"got {float(a[idx]):.6g}, expected {float(b[idx]):.6g}")


def _clone(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(v) for v in x)
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    return x


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal to the last bit, NaN where the other is NaN."""
    return bool(torch.equal(_as64(a).nan_to_num(), _as64(b).nan_to_num())
                and torch.equal(_as64(a).isnan(), _as64(b).isnan()))


def _within_rounding(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal to the dtype's rounding (64 epsilons of the largest value) when floating point."""
    if not a.is_floating_point():
        return _equal(a, b)
    tol = 64 * torch.finfo(a.dtype).eps
    scale = float(b.nan_to_num(0, 0, 0).abs().max()) if b.numel() else 0.0
    return bool(torch.allclose(_as64(a), _as64(b), rtol=tol, atol=tol * scale, equal_nan=True))


def _alike(x: Any, y: Any, leaf: Callable[[torch.Tensor, torch.Tensor], bool]) -> bool:
    """``x`` and ``y`` of the same structure (tensors in lists, tuples and dicts), each pair
    of tensors of one shape and dtype and ``leaf``-equal."""
    if isinstance(x, torch.Tensor):
        return (isinstance(y, torch.Tensor) and x.shape == y.shape and x.dtype == y.dtype
                and leaf(x, y))
    if isinstance(x, (list, tuple)):
        return isinstance(y, (list, tuple)) and len(x) == len(y) and all(
            _alike(a, b, leaf) for a, b in zip(x, y))
    if isinstance(x, dict):
        return isinstance(y, dict) and all(k in y and _alike(x[k], y[k], leaf) for k in x)
    return True


def same_but_rounding(x: Any, y: Any) -> bool:
    """:func:`_same`, but floating-point tensors need only agree to their dtype's rounding:
    what summing in another order changes (an answer that visits the keys in a random order),
    unlike dropout (zeros, and the rest scaled)."""
    return _alike(x, y, _within_rounding)


def _same(x: Any, y: Any) -> bool:
    return _alike(x, y, _equal)
