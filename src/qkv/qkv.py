"""Self- and cross-attention from raw projection matrices (chapter 3).

These are the smallest complete attention layers: one head, no bias, no output
projection, so that every matrix product of the chapter "Query, Key and Value"
is visible. The attention itself is :func:`qkv.scaled_dot_product_attention`.

Weight layout: a projection matrix has shape ``(out_features, in_features)``,
the layout of ``nn.Linear``'s ``weight`` (and of every weight matrix in the course:
the additive score's ``W_q`` and ``W_k``, the multi-head module's layers), and is
applied as ``Q = x @ W_q.T``, as ``nn.Linear`` computes ``y = x A^T``. A bias-free
``nn.Linear(D, E)`` gives ``W_q = linear.weight`` as it is.
"""

from __future__ import annotations

from torch import Tensor

from . import _validate as v
from .scaling import scaled_dot_product_attention

__all__ = [
    "cross_attention",
    "self_attention",
]

_X = "x (..., L, D)"
_CTX = "context (..., S, Dc)"
_WEIGHTS = {"context": "W_q (E, D), W_k (E, Dc), W_v (Ev, Dc)", "x": "W_q (E, D), W_k (E, D), W_v (Ev, D)"}


def _check_weight(name: str, w: object, columns: int, columns_from: str, x: Tensor) -> None:
    w = v.require_float_tensor(name, w)
    if w.dim() != 2:
        raise ValueError(
            f"{name} must be a 2-D matrix (out_features, in_features), as nn.Linear's weight, "
            f"got {v.shape_str(w)}"
        )
    if w.shape[1] != columns:
        raise ValueError(
            f"{name} must have {columns} columns (the last dim of {columns_from}), got "
            f"{v.shape_str(w)}; the layout is nn.Linear's (out_features, in_features) and the "
            f"product is {columns_from} @ {name}.T"
        )
    v.require_like(name, w, "x", x)


def _check(x: object, context: object, W_q: object, W_k: object, W_v: object, source: str) -> None:
    """Check the arguments; ``source`` names where keys and values come from ("context" or "x").

    The inputs are checked before the weights, their batch dims included: when x and context
    disagree, that is what the message says, not a weight's width that follows from it.
    """
    v.require_float_tensor("x", x, _X, min_dim=2)
    if source == "context":
        v.require_float_tensor("context", context, _CTX, min_dim=2)
        v.require_like("context", context, "x", x)
        v.broadcast_batch(("x", "context"), (x, context), f"{_X} and {_CTX}")
    _check_weight("W_q", W_q, x.shape[-1], "x", x)
    _check_weight("W_k", W_k, context.shape[-1], source, x)
    _check_weight("W_v", W_v, context.shape[-1], source, x)
    if W_q.shape[0] != W_k.shape[0]:
        raise ValueError(
            f"W_q has {W_q.shape[0]} rows but W_k has {W_k.shape[0]}: their rows are the width E "
            f"of the queries (x @ W_q.T) and of the keys ({source} @ W_k.T), which are compared "
            f"by a dot product, so W_q and W_k need the same number of rows; got W_q "
            f"{v.shape_str(W_q)} and W_k {v.shape_str(W_k)}; expected {_WEIGHTS[source]}"
        )


def cross_attention(x: Tensor, context: Tensor, W_q: Tensor, W_k: Tensor, W_v: Tensor) -> Tensor:
    """Queries from ``x``; keys and values from ``context``.

    ``softmax((x W_q^T)(context W_k^T)^T / sqrt(E)) (context W_v^T)``. Each of the L
    positions of ``x`` receives a weighted mixture of the S value vectors of
    ``context``; nothing flows from ``x`` to ``x``.

    Args:
        x: the sequence that asks (e.g. decoder states).
        context: the sequence that is searched and read (e.g. encoder states).
        W_q: query projection, ``(E, D)``, applied as ``x @ W_q.T``.
        W_k: key projection, ``(E, Dc)``, applied as ``context @ W_k.T``.
        W_v: value projection, ``(Ev, Dc)``, applied as ``context @ W_v.T``.

    Returns:
        One output vector per query position.

    Shape:
        - x: ``(L, D)`` or batched ``(..., L, D)``
        - context: ``(S, Dc)`` or batched ``(..., S, Dc)``; batch dims broadcast with x's
        - output: ``(..., L, Ev)``
    """
    _check(x, context, W_q, W_k, W_v, "context")
    return scaled_dot_product_attention(x @ W_q.T, context @ W_k.T, context @ W_v.T)


def self_attention(x: Tensor, W_q: Tensor, W_k: Tensor, W_v: Tensor) -> Tensor:
    """Every position of ``x`` attends to every position of ``x``.

    ``softmax((x W_q^T)(x W_k^T)^T / sqrt(E)) (x W_v^T)``: the special case of
    :func:`cross_attention` where the context is the sequence itself.

    Args:
        x: the sequence.
        W_q: query projection ("what am I looking for?"), ``(E, D)``.
        W_k: key projection ("what do I offer to be found by?"), ``(E, D)``.
        W_v: value projection ("what do I hand over when found?"), ``(Ev, D)``.

    Returns:
        One output vector per position.

    Shape:
        - x: ``(L, D)`` or batched ``(..., L, D)``
        - output: ``(..., L, Ev)``
    """
    _check(x, x, W_q, W_k, W_v, "x")  # first, so that bad input is named x, not context
    return cross_attention(x, x, W_q, W_k, W_v)
