"""Input validation shared by the reference implementations.

Every public function checks its arguments here first, so that a wrong shape or
dtype is reported in terms of the argument the user passed, not as an error from
deep inside a matmul.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor


def shape_str(t: Tensor) -> str:
    """Shape of ``t`` written as ``(2, 3, 4)``."""
    return "(" + ", ".join(str(d) for d in t.shape) + ")"


def require_tensor(name: str, t: object) -> Tensor:
    """Raise ``TypeError`` unless ``t`` is a tensor."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    return t


def require_float(name: str, t: Tensor) -> None:
    """Raise ``TypeError`` unless ``t`` has a floating-point dtype."""
    if not t.is_floating_point():
        raise TypeError(
            f"{name} must have a floating-point dtype (float16, bfloat16, float32 or float64), "
            f"got {t.dtype}; convert it with {name}.float()"
        )


def require_min_dim(name: str, t: Tensor, n: int, legend: str) -> None:
    """Raise ``ValueError`` unless ``t`` has at least ``n`` dimensions."""
    if t.dim() < n:
        raise ValueError(f"{name} must have shape {legend}, got {shape_str(t)} ({t.dim()} dims)")


def require_same(names: Sequence[str], tensors: Sequence[Tensor], what: str) -> None:
    """Raise when the tensors disagree on ``what`` ('dtype' or 'device')."""
    values = [getattr(t, what) for t in tensors]
    if any(v != values[0] for v in values[1:]):
        got = ", ".join(f"{n}: {v}" for n, v in zip(names, values))
        raise TypeError(
            f"{', '.join(names)} must share one {what}, got {got}; move them with .to(...) first"
        )


def broadcast_shapes(*shapes: Sequence[int]) -> Tuple[int, ...]:
    """``torch.broadcast_shapes`` in plain Python.

    torch's version imports its symbolic-shape machinery (sympy) on first use,
    which costs over a second in every fresh kernel, e.g. each autograded notebook.

    Raises:
        RuntimeError: when the shapes do not broadcast (as torch's does).
    """
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        for i, d in enumerate(s, start=n - len(s)):
            if d != 1 and out[i] not in (1, d):
                raise RuntimeError(f"shapes {[tuple(x) for x in shapes]} do not broadcast")
            if d != 1:
                out[i] = int(d)
    return tuple(out)


def broadcast_batch(names: Sequence[str], tensors: Sequence[Tensor], legend: str) -> None:
    """Raise ``ValueError`` unless the leading (batch) dims of the tensors broadcast."""
    try:
        broadcast_shapes(*(t.shape[:-2] for t in tensors))
    except RuntimeError:
        got = ", ".join(f"{n} {shape_str(t)}" for n, t in zip(names, tensors))
        raise ValueError(
            f"the batch dimensions (all but the last two) must match or broadcast; got {got}; "
            f"expected {legend}"
        ) from None


def check_mask(
    attn_mask: Optional[Tensor],
    L: int,
    S: int,
    dtype: torch.dtype,
    device: torch.device,
    batch_shape: Optional[Sequence[int]] = None,
) -> None:
    """Check an attention mask against SDPA's rules.

    A bool mask (True = may attend) or a float mask of the query's dtype (added to
    the scores), broadcastable to ``(..., L, S)``.
    """
    if attn_mask is None:
        return
    require_tensor("attn_mask", attn_mask)
    if attn_mask.dtype != torch.bool and attn_mask.dtype != dtype:
        raise TypeError(
            f"attn_mask must be bool (True = may attend) or the query's dtype {dtype} "
            f"(added to the scores), got {attn_mask.dtype}"
        )
    if attn_mask.device != device:
        raise TypeError(f"attn_mask is on {attn_mask.device} but the query is on {device}")
    if attn_mask.dim() < 1:
        raise ValueError("attn_mask must have at least 2 dims, broadcastable to (..., L, S)")
    shape = attn_mask.shape
    rows = shape[-2] if attn_mask.dim() >= 2 else 1
    if shape[-1] not in (1, S) or rows not in (1, L):
        raise ValueError(
            f"attn_mask must broadcast to (..., L, S) = (..., {L}, {S}), got {shape_str(attn_mask)}"
        )
    if batch_shape is not None:
        try:
            fits = broadcast_shapes(tuple(batch_shape), shape[:-2]) == tuple(batch_shape)
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError(
                f"attn_mask {shape_str(attn_mask)} does not broadcast to the batch dims "
                f"{tuple(batch_shape)} of the inputs; expected (..., {L}, {S}) with leading dims "
                f"equal to those or 1"
            )
