"""Attention as a lookup: the hard one a dictionary does, and the soft one attention does.

A hard lookup scores the query against every key, takes the single best key and
returns its value. A soft lookup turns the same scores into weights with a
softmax and returns the weighted mean of *all* values. The temperature sets how
sharp the weights are: as it goes to zero the soft lookup becomes the hard one,
as it grows the result tends to the plain mean of the values. Scaled dot-product
attention is the soft lookup with temperature ``sqrt(E)``.
"""

from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor

from . import _validate as v
from .scaling import softmax

_LEGEND = "query (..., L, E), keys (..., S, E), values (..., S, Ev)"


def _check(query: Tensor, keys: Tensor, values: Tensor) -> None:
    for name, t in (("query", query), ("keys", keys), ("values", values)):
        v.require_tensor(name, t)
        v.require_float(name, t)
        v.require_min_dim(name, t, 2, _LEGEND)
    v.require_same(("query", "keys", "values"), (query, keys, values), "dtype")
    v.require_same(("query", "keys", "values"), (query, keys, values), "device")
    if query.shape[-1] != keys.shape[-1]:
        raise ValueError(
            f"query and keys must have the same width E, got query {v.shape_str(query)} and "
            f"keys {v.shape_str(keys)}; expected {_LEGEND}"
        )
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(
            f"keys and values must have the same number of entries S, got keys "
            f"{v.shape_str(keys)} and values {v.shape_str(values)}; expected {_LEGEND}"
        )
    v.broadcast_batch(("query", "keys", "values"), (query, keys, values), _LEGEND)


def hard_lookup(query: Tensor, keys: Tensor, values: Tensor) -> Tuple[Tensor, Tensor]:
    """Return the value of the best-matching key (largest dot product), and one-hot weights.

    A Python ``dict`` is the special case where the query equals one key exactly.
    The weights come from ``argmax``, so no gradient flows back to the query or the keys.

    Args:
        query: what we look for.
        keys: what each entry advertises.
        values: what each entry holds.

    Returns:
        ``(output, weights)``; ties go to the first best key.

    Shape:
        - query: ``(..., L, E)``, keys: ``(..., S, E)``, values: ``(..., S, Ev)``
        - output: ``(..., L, Ev)``, weights: ``(..., L, S)``
    """
    _check(query, keys, values)
    scores = query @ keys.transpose(-2, -1)
    best = scores.argmax(dim=-1, keepdim=True)
    weights = torch.zeros_like(scores).scatter_(-1, best, 1.0)
    return weights @ values, weights


def soft_lookup(
    query: Tensor, keys: Tensor, values: Tensor, temperature: float = 1.0
) -> Tuple[Tensor, Tensor]:
    """Weighted mean of all values, weights ``softmax(query . key / temperature)``.

    Every output depends smoothly on the query, the keys and the values, so a
    loss on the output can be minimised by gradient descent on all three; the
    hard lookup gives no gradient to the query or the keys.

    Args:
        query: what we look for.
        keys: what each entry advertises.
        values: what each entry holds.
        temperature: positive; small values sharpen the weights towards the
            best key, large values flatten them towards the mean.
            ``temperature = sqrt(E)`` gives :func:`qkv.scaled_dot_product_attention`.

    Returns:
        ``(output, weights)``; each row of ``weights`` sums to one.

    Shape:
        - query: ``(..., L, E)``, keys: ``(..., S, E)``, values: ``(..., S, Ev)``
        - output: ``(..., L, Ev)``, weights: ``(..., L, S)``
    """
    _check(query, keys, values)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    weights = softmax((query @ keys.transpose(-2, -1)) / temperature, dim=-1)
    return weights @ values, weights
