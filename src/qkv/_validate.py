"""Input validation shared by the reference implementations.

Every public function checks its arguments here first, so that a wrong shape or
dtype is reported in terms of the argument the user passed, not as an error from
deep inside a matmul. One helper per rule; each message names the argument, what
it got and what was expected.
"""

from __future__ import annotations

from numbers import Integral
from typing import Iterable, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

# Memory checks live in their own module; they are part of the same rule book.
from ._memory import CHUNKED_HINT, memory_limit, require_fits, require_weights_fit  # noqa: F401


def shape_str(t: Tensor) -> str:
    """Shape of ``t`` written as ``(2, 3, 4)``."""
    return "(" + ", ".join(str(d) for d in t.shape) + ")"


def require_tensor(name: str, t: object) -> Tensor:
    """Raise ``TypeError`` unless ``t`` is a tensor."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    return t


def require_int(name: str, n: object, minimum: int = 1) -> int:
    """Raise ``ValueError`` unless ``n`` is an ``int`` (not a ``bool``) of at least ``minimum``.

    ``True`` is an ``int`` to Python, but a flag passed where a size belongs is a mistake.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < minimum:
        want = {0: "a non-negative int", 1: "a positive int"}.get(minimum, f"an int >= {minimum}")
        raise ValueError(f"{name} must be {want}, got {n!r}")
    return n


def require_int_sequence(name: str, xs: object) -> List[int]:
    """Raise ``TypeError`` unless ``xs`` is an iterable of integers (not bools); return them as a list."""
    items = None if isinstance(xs, (str, bytes)) else list(xs) if isinstance(xs, Iterable) else None
    if items is None or any(isinstance(x, bool) or not isinstance(x, Integral) for x in items):
        raise TypeError(f"{name} must be a sequence of ints or a 1-D integer tensor, got {xs!r}")
    return [int(x) for x in items]


def require_positive_number(name: str, x: object, note: str = "") -> float:
    """Raise ``ValueError`` unless ``x`` is a real number (not a ``bool``) greater than 0.

    ``note`` is added to the message after "a positive number" (say what else is accepted).
    """
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not x > 0:
        raise ValueError(f"{name} must be a positive number{note}, got {x!r}")
    return x


def require_probability(name: str, p: object) -> float:
    """Raise ``ValueError`` unless ``p`` is a number in ``[0, 1]`` (a dropout probability, as torch's)."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {p!r}")
    return p


def require_choice(name: str, value: object, choices: Sequence[object]) -> object:
    """Raise ``ValueError`` unless ``value`` is one of ``choices``."""
    if value not in choices:
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
        raise TypeError(f"{name} must be a floating-point torch.dtype, got {dtype!r}")
    return dtype


def require_instance(name: str, x: object, cls: type, what: str, hint: str = ""):
    """Raise ``TypeError`` unless ``x`` is an instance of ``cls``, written ``what`` in the message."""
    if not isinstance(x, cls):
        raise TypeError(f"{name} must be {what}, got {type(x).__name__}{hint}")
    return x


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
    name: str = "attn_mask",
) -> None:
    """Check an attention mask against SDPA's rules.

    A bool mask (True = may attend) or a float mask of the query's dtype (added to
    the scores), broadcastable to ``(..., L, S)``; ``name`` is what the caller calls it.
    """
    if attn_mask is None:
        return
    require_tensor(name, attn_mask)
    if attn_mask.dtype != torch.bool and attn_mask.dtype != dtype:
        raise TypeError(
            f"{name} must be bool (True = may attend) or the query's dtype {dtype} "
            f"(added to the scores), got {attn_mask.dtype}"
        )
    if attn_mask.device != device:
        raise TypeError(f"{name} is on {attn_mask.device} but the query is on {device}")
    if attn_mask.dim() < 1:
        raise ValueError(f"{name} must have at least 2 dims, broadcastable to (..., L, S)")
    shape = attn_mask.shape
    rows = shape[-2] if attn_mask.dim() >= 2 else 1
    if shape[-1] not in (1, S) or rows not in (1, L):
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


def require_even(name: str, n: int, why: str) -> int:
    """Raise ``ValueError`` unless the size ``n`` is even; ``why`` says what needs pairs."""
    if n % 2:
        raise ValueError(f"{name} must be even ({why}), got {n}")
    return n
