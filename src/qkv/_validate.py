"""Input validation shared by the reference implementations.

Every public function checks its arguments here first, so that a wrong shape or
dtype is reported in terms of the argument the user passed, not as an error from
deep inside a matmul. One helper per rule; each message names the argument, what
it got and what was expected.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

# Memory checks live in their own module; they are part of the same rule book.
from ._memory import CHUNKED_HINT, memory_limit, require_fits, require_weights_fit  # noqa: F401
# So do the checks of sizes, flags and numbers: `from . import _validate as v` reaches them all.
from ._scalars import (  # noqa: F401
    default_scale, require_callable, require_choice, require_device, require_even, require_finite_number,
    require_flag,
    require_float_dtype, require_instance, require_int, require_int_sequence, require_positive_number,
    require_probability,
)


def shape_str(t: Tensor) -> str:
    """Shape of ``t`` written as ``(2, 3, 4)``."""
    return "(" + ", ".join(str(d) for d in t.shape) + ")"


def require_tensor(name: str, t: object) -> Tensor:
    """Raise ``TypeError`` unless ``t`` is a tensor."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    return t


def require_values(name: str, t: Tensor, why: str) -> Tensor:
    """Raise ``ValueError`` when ``t`` is on the ``meta`` device, for an argument whose values matter.

    A meta tensor has a shape but no values: shape-only code runs on it (a useful way to check
    shapes), but a result that depends on the values (lengths, positions) cannot be made.
    ``why`` says what needs the values.
    """
    if t.device.type == "meta":
        raise ValueError(f"{name} is on the 'meta' device, which holds no values, but {why}; "
                         f"pass it on a real device such as 'cpu'")
    return t


def require_dim_index(name: str, dim: object, tensor_name: str, t: Tensor) -> int:
    """Raise ``ValueError`` unless ``dim`` is an int that indexes a dimension of ``t``."""
    if isinstance(dim, bool) or not isinstance(dim, int) or not -t.dim() <= dim < max(t.dim(), 1):
        raise ValueError(
            f"{name}={dim!r} is out of range for {tensor_name} of shape {shape_str(t)}; "
            f"expected an int in [{-t.dim()}, {max(t.dim(), 1)})"
        )
    return dim


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


def require_dim(name: str, t: object, n: int, legend: str) -> Tensor:
    """Raise unless ``t`` is a tensor with exactly ``n`` dimensions, shaped as ``legend`` says."""
    require_tensor(name, t)
    if t.dim() != n:
        raise ValueError(f"{name} must have shape {legend}, got {shape_str(t)}")
    return t


def require_tokens(name: str, t: object, vocab_size: int, legend: str) -> Tensor:
    """Raise unless ``t`` is a 2-D integer tensor of token ids in ``[0, vocab_size)``."""
    require_dim(name, t, 2, legend)
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids (torch.long), got {t.dtype}")
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= vocab_size):
        raise ValueError(
            f"{name} must hold token ids in [0, {vocab_size}) (vocab_size), got values from "
            f"{int(t.min())} to {int(t.max())}"
        )
    return t


def require_float_tensor(name: str, t: object, legend: Optional[str] = None, min_dim: int = 0) -> Tensor:
    """The three rules every data argument follows: a tensor, floating point, enough dims."""
    t = require_tensor(name, t)
    require_float(name, t)
    if min_dim:
        require_min_dim(name, t, min_dim, legend or "")
    return t


def require_same_size(a: Tuple[str, Tensor, int], b: Tuple[str, Tensor, int], what: str, legend: str) -> None:
    """Raise ``ValueError`` unless two tensors agree in one dim each.

    ``a`` and ``b`` are ``(name, tensor, dim)``; ``what`` says what the dim means
    ("the same last dim E"), ``legend`` the shapes expected.
    """
    (na, ta, da), (nb, tb, db) = a, b
    if ta.shape[da] != tb.shape[db]:
        raise ValueError(
            f"{na} and {nb} must have {what}, got {na} {shape_str(ta)} and {nb} {shape_str(tb)}; "
            f"expected {legend}"
        )


def check_attention_inputs(
    names: Sequence[str],
    tensors: Sequence[object],
    legend: str,
    width: str = "the same last dim E",
    length: str = "the same sequence length S (dim -2)",
) -> None:
    """Queries, keys (and values): float tensors of one dtype and device, widths and lengths that agree.

    ``names`` and ``tensors`` hold the queries, the keys and optionally the values;
    ``width`` and ``length`` say in the message what must agree.
    """
    for name, t in zip(names, tensors):
        require_float_tensor(name, t, legend, min_dim=2)
    require_same(names, tensors, "dtype")
    require_same(names, tensors, "device")
    q, k = (names[0], tensors[0], -1), (names[1], tensors[1], -1)
    require_same_size(q, k, width, legend)
    if len(tensors) > 2:
        require_same_size((names[1], tensors[1], -2), (names[2], tensors[2], -2), length, legend)
    broadcast_batch(names, tensors, legend)


def require_same(names: Sequence[str], tensors: Sequence[Tensor], what: str) -> None:
    """Raise when the tensors disagree on ``what`` ('dtype' or 'device')."""
    values = [getattr(t, what) for t in tensors]
    if any(v != values[0] for v in values[1:]):
        got = ", ".join(f"{n}: {v}" for n, v in zip(names, values))
        raise TypeError(
            f"{', '.join(names)} must share one {what}, got {got}; move them with .to(...) first"
        )


def require_like(name: str, t: Tensor, ref_name: str, ref: Tensor) -> None:
    """Raise ``TypeError`` unless ``t`` has the dtype and device of ``ref``."""
    if t.dtype != ref.dtype or t.device != ref.device:
        raise TypeError(
            f"{name} is {t.dtype} on {t.device} but {ref_name} is {ref.dtype} on {ref.device}; "
            f"move it with .to({ref_name})"
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
    *,
    name: str = "attn_mask",
) -> None:
    """Check an attention mask against SDPA's rules.

    A bool mask (True = may attend) or a float mask of the query's dtype (added to
    the scores), broadcastable to ``(..., L, S)``. ``name`` is the argument's name in
    the caller, for the messages.
    """
    if attn_mask is None:
        return
    require_tensor(name, attn_mask)
    _check_mask_kind(name, attn_mask, dtype)
    if attn_mask.device != device:
        raise TypeError(f"{name} is on {attn_mask.device} but the query is on {device}; "
                        f"move it with {name}.to(query.device)")
    shape = attn_mask.shape
    rows = shape[-2] if attn_mask.dim() >= 2 else 1
    if attn_mask.dim() < 1 or shape[-1] not in (1, S) or rows not in (1, L):
        raise ValueError(
            f"{name} must broadcast to (..., L, S) = (..., {L}, {S}), got {shape_str(attn_mask)}"
        )
    if batch_shape is not None:
        try:
            fits = broadcast_shapes(tuple(batch_shape), shape[:-2]) == tuple(batch_shape)
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError(
                f"{name} {shape_str(attn_mask)} does not broadcast to the batch dims "
                f"{tuple(batch_shape)} of the inputs; expected (..., {L}, {S}) with leading dims "
                f"equal to those or 1"
            )


def _check_mask_kind(name: str, mask: Tensor, dtype: torch.dtype) -> None:
    """A bool mask, or a float mask of the queries' dtype that is not a bool mask in disguise.

    An integer or float mask of 0s and 1s is almost always meant as "1 = may attend", but
    SDPA would add it to the scores (and torch refuses integer masks): that changes every
    weight a little and hides nothing, a silently wrong answer, so it is refused.
    """
    if mask.dtype == torch.bool:
        return
    if not mask.is_floating_point():
        raise TypeError(
            f"{name} must be bool (True = may attend) or the query's dtype {dtype} (added to the "
            f"scores), got {mask.dtype}; for a 0/1 mask where 1 means 'may attend' pass {name}.bool()"
        )
    if mask.dtype != dtype:
        raise TypeError(
            f"{name} must be bool (True = may attend) or the query's dtype {dtype} (added to the "
            f"scores), got {mask.dtype}; convert it with {name}.to(query.dtype)"
        )
    if mask.numel() and mask.device.type != "meta" and _zeros_and_ones(mask):
        raise ValueError(
            f"{name} is a float mask of 0s and 1s; a float mask is ADDED to the scores (0 = keep, "
            f"-inf = hide), so its 1s would hide nothing. For 1 = may attend pass {name}.bool(); "
            f"for an additive mask use 0 and float('-inf') (qkv.to_additive_mask({name}.bool()))"
        )


def _zeros_and_ones(mask: Tensor) -> bool:
    """True when ``mask`` holds both 0 and 1 and nothing else (cheap: most float masks have -inf)."""
    with torch.no_grad():
        if mask.amin().item() != 0 or mask.amax().item() != 1:
            return False
        return bool(((mask == 0) | (mask == 1)).all())


def require_lengths(name: str, lengths: object) -> Tensor:
    """Sequence lengths: ints or a 1-D integer tensor of non-negative values; return a tensor.

    Lengths count tokens; a float tensor would be truncated without a word, so it is refused.
    """
    if not isinstance(lengths, Tensor):
        return _non_negative(name, torch.as_tensor(require_int_sequence(name, lengths), dtype=torch.long))
    if lengths.dim() != 1 or lengths.is_floating_point() or lengths.is_complex() or lengths.dtype == torch.bool:
        raise ValueError(
            f"{name} must be a 1-D integer tensor or a list of ints, got dtype "
            f"{lengths.dtype} and shape {shape_str(lengths)}"
        )
    return _non_negative(name, lengths)


def _non_negative(name: str, lengths: Tensor) -> Tensor:
    require_values(name, lengths, "the mask is made from the lengths' values")
    if lengths.numel() and bool((lengths < 0).any()):
        raise ValueError(f"{name} must be non-negative, got {lengths.tolist()}")
    return lengths
