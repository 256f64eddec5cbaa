"""Half precision in the checks: one float16 or bfloat16 case per exercise that should support it.

An answer can be right in float32 and wrong in float16: a mask filled with ``-1e9``
(float16 ends at 65504, so ``masked_fill`` refuses the value), an ``exp`` that
overflows at 11. :func:`half_case` makes such a case with tolerances for its dtype,
and :func:`via_float32` wraps a reference so that, on half inputs, it computes in
float32 and rounds the result once to the inputs' dtype.

Why the reference runs in float32 rather than in the half dtype: a student's half
answer rounds at every step (the product, the scale, ``exp``, the sum, the division)
in an order of its own; the exact answer rounded once is the fairest target, and a
float32 result is exact far below half precision's resolution. A reference run in
float16 would add its own rounding to the student's, so the tolerance would have to
cover both and would depend on the order in which :mod:`qkv` happens to compute.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from ._exercise import Args, Case

HALF = (torch.float16, torch.bfloat16)

#: (rtol, atol) per half dtype. A right answer's error is a few roundings of the
#: dtype's epsilon (float16: 1e-3, bfloat16: 8e-3) on values of order one; the named
#: mistakes differ by far more, and each half case comes last, after the float32/64
#: cases have already named the mistakes that do not depend on precision.
HALF_TOLERANCES = {torch.float16: (1e-2, 1e-2), torch.bfloat16: (4e-2, 4e-2)}


def half_case(label: str, build: Callable[[torch.Generator, torch.device, torch.dtype], Args],
              dtype: torch.dtype = torch.float16) -> Case:
    """A :class:`Case` in ``dtype`` (float16 or bfloat16) with that dtype's tolerances."""
    rtol, atol = HALF_TOLERANCES[dtype]
    return Case(label, build, dtype, rtol=rtol, atol=atol)


def _half_dtype(x: Any) -> Optional[torch.dtype]:
    if isinstance(x, torch.Tensor):
        return x.dtype if x.dtype in HALF else None
    if isinstance(x, torch.dtype):
        return x if x in HALF else None
    items = x.values() if isinstance(x, dict) else x if isinstance(x, (list, tuple)) else ()
    for v in items:
        found = _half_dtype(v)
        if found is not None:
            return found
    return None


def _cast(x: Any, src: Any, dst: torch.dtype) -> Any:
    """``x`` with every tensor (and dtype value) of a dtype in ``src`` turned into ``dst``."""
    if isinstance(x, torch.Tensor):
        return x.to(dst) if x.dtype in src else x
    if isinstance(x, torch.dtype):
        return dst if x in src else x
    if isinstance(x, dict):
        return {k: _cast(v, src, dst) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(v, src, dst) for v in x)
    return x


def via_float32(reference: Callable[..., Any]) -> Callable[..., Any]:
    """``reference`` computing in float32 on half inputs, its result rounded to their dtype.

    On float32 and float64 inputs it is ``reference`` itself.
    """
    def run(*args: Any, **kwargs: Any) -> Any:
        half = _half_dtype((args, kwargs))
        if half is None:
            return reference(*args, **kwargs)
        out = reference(*_cast(args, HALF, torch.float32), **_cast(kwargs, HALF, torch.float32))
        return _cast(out, (torch.float32,), half)
    return run
