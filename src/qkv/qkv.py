"""Self- and cross-attention from raw projection matrices, and the variance of q·k.

These are the smallest complete attention layers: one head, no bias, no output
projection, so that every matrix product of the chapter "Query, Key and Value"
is visible. The attention itself is :func:`qkv.scaled_dot_product_attention`.

Weight layout: a projection matrix has shape ``(in_features, out_features)``
and is applied on the right, ``Q = x @ W_q``, as the equations of "Attention Is
All You Need" write it. ``nn.Linear`` stores the transpose: its ``weight`` has
shape ``(out_features, in_features)``, so ``nn.Linear(D, E, bias=False)`` gives
``W_q = linear.weight.T``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _validate as v
from .scaling import scaled_dot_product_attention

_X = "x (..., L, D)"
_CTX = "context (..., S, Dc)"


def _check_weight(name: str, w: object, rows: int, rows_from: str, ref: Tensor) -> None:
    w = v.require_tensor(name, w)
    v.require_float(name, w)
    if w.dim() != 2:
        raise ValueError(
            f"{name} must be a 2-D matrix (in_features, out_features), got {v.shape_str(w)}; "
            f"nn.Linear(in, out).weight has the transposed shape, pass linear.weight.T"
        )
    if w.shape[0] != rows:
        raise ValueError(
            f"{name} must have {rows} rows (the last dim of {rows_from}), got {v.shape_str(w)}; "
            f"the layout is (in_features, out_features) and the product is x @ {name}"
        )
    if w.dtype != ref.dtype or w.device != ref.device:
        raise TypeError(
            f"{name} is {w.dtype} on {w.device} but the input is {ref.dtype} on {ref.device}; "
            f"move it with .to(x)"
        )


def _check_sequence(name: str, t: object, legend: str) -> Tensor:
    t = v.require_tensor(name, t)
    v.require_float(name, t)
    v.require_min_dim(name, t, 2, legend)
    return t


def cross_attention(x: Tensor, context: Tensor, W_q: Tensor, W_k: Tensor, W_v: Tensor) -> Tensor:
    """Queries from ``x``; keys and values from ``context``.

    ``softmax((x W_q)(context W_k)^T / sqrt(E)) (context W_v)``. Each of the L
    positions of ``x`` receives a weighted mixture of the S value vectors of
    ``context``; nothing flows from ``x`` to ``x``.

    Args:
        x: the sequence that asks (e.g. decoder states).
        context: the sequence that is searched and read (e.g. encoder states).
        W_q: query projection, ``(D, E)``, applied as ``x @ W_q``.
        W_k: key projection, ``(Dc, E)``, applied as ``context @ W_k``.
        W_v: value projection, ``(Dc, Ev)``, applied as ``context @ W_v``.

    Returns:
        One output vector per query position.

    Shape:
        - x: ``(L, D)`` or batched ``(..., L, D)``
        - context: ``(S, Dc)`` or batched ``(..., S, Dc)``; batch dims broadcast with x's
        - output: ``(..., L, Ev)``
    """
    x = _check_sequence("x", x, _X)
    context = _check_sequence("context", context, _CTX)
    if context.dtype != x.dtype or context.device != x.device:
        raise TypeError(
            f"context is {context.dtype} on {context.device} but x is {x.dtype} on {x.device}; "
            f"move it with .to(x)"
        )
    _check_weight("W_q", W_q, x.shape[-1], "x", x)
    _check_weight("W_k", W_k, context.shape[-1], "context", x)
    _check_weight("W_v", W_v, context.shape[-1], "context", x)
    if W_q.shape[1] != W_k.shape[1]:
        raise ValueError(
            f"W_q and W_k must project to the same width E (queries and keys are compared "
            f"by a dot product), got W_q {v.shape_str(W_q)} and W_k {v.shape_str(W_k)}"
        )
    v.broadcast_batch(("x", "context"), (x, context), f"{_X} and {_CTX}")
    return scaled_dot_product_attention(x @ W_q, context @ W_k, context @ W_v)


def self_attention(x: Tensor, W_q: Tensor, W_k: Tensor, W_v: Tensor) -> Tensor:
    """Every position of ``x`` attends to every position of ``x``.

    ``softmax((x W_q)(x W_k)^T / sqrt(E)) (x W_v)``: the special case of
    :func:`cross_attention` where the context is the sequence itself.

    Args:
        x: the sequence.
        W_q: query projection ("what am I looking for?"), ``(D, E)``.
        W_k: key projection ("what do I offer to be found by?"), ``(D, E)``.
        W_v: value projection ("what do I hand over when found?"), ``(D, Ev)``.

    Returns:
        One output vector per position.

    Shape:
        - x: ``(L, D)`` or batched ``(..., L, D)``
        - output: ``(..., L, Ev)``
    """
    return cross_attention(x, x, W_q, W_k, W_v)


def dot_product_variance(
    d_k: int,
    n_samples: int,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float32,
) -> float:
    """Measured variance of ``q·k`` for ``q, k`` with independent N(0, 1) components.

    Each of the ``d_k`` products ``q_i k_i`` has mean 0 and variance
    ``E[q_i^2] E[k_i^2] = 1``, and the products are independent, so the sum has
    variance ``d_k``. This function estimates it from ``n_samples`` pairs, so
    its answer is ``d_k`` up to sampling error: the relative standard error is
    about ``sqrt((2 + 6 / d_k) / n_samples)``.

    Args:
        d_k: length of the vectors (positive int).
        n_samples: number of independent (q, k) pairs (at least 2).
        generator: the source of randomness; the samples are drawn on its
            device, so the same seed gives the same answer.
        dtype: floating-point dtype of the samples.

    Returns:
        The unbiased sample variance of the ``n_samples`` dot products.
    """
    for name, n, least in (("d_k", d_k, 1), ("n_samples", n_samples, 2)):
        if isinstance(n, bool) or not isinstance(n, int) or n < least:
            raise ValueError(f"{name} must be an int >= {least}, got {n!r}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator, got {type(generator).__name__}; "
            f"make one with torch.Generator(device).manual_seed(0)"
        )
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    # Draw in chunks of about 2**22 numbers so that d_k = 1024 with a million
    # samples does not need gigabytes at once.
    chunk = max(1, 2**22 // d_k)
    parts = []
    for start in range(0, n_samples, chunk):
        n = min(chunk, n_samples - start)
        q = torch.randn(n, d_k, generator=generator, device=generator.device, dtype=dtype)
        k = torch.randn(n, d_k, generator=generator, device=generator.device, dtype=dtype)
        parts.append((q * k).sum(dim=-1))
    return torch.cat(parts).var().item()
