"""Attention as a lookup (chapter 2): hard and soft lookup, the softmax, the first scores.

A hard lookup returns the value of the best-scoring key; a soft lookup softmaxes
the scores and returns the weighted mean of *all* values (with temperature
``sqrt(E)`` it is scaled dot-product attention). Before transformers the score
was learned: Bahdanau's additive ``v^T tanh(W_q q + W_k k)`` or Luong's ``q^T k``
("dot") and ``q^T W k`` ("general"); any score then goes through the masked
softmax (:func:`attention_weights`) and weights the values (:func:`attend`). The
learned scores as modules are in :mod:`qkv.score_modules`.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _validate as v

__all__ = [
    "additive_score",
    "attend",
    "attention_weights",
    "hard_lookup",
    "luong_score",
    "soft_lookup",
    "softmax",
]

_LEGEND = "query (..., L, E), keys (..., S, E), values (..., S, Ev)"


def _check(query: Tensor, keys: Tensor, values: Tensor) -> None:
    v.check_attention_inputs(
        ("query", "keys", "values"), (query, keys, values), _LEGEND,
        width="the same width E", length="the same number of entries S",
    )


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Numerically stable softmax along ``dim``.

    Subtracting the maximum first leaves the result unchanged (softmax is
    invariant to adding a constant) but keeps ``exp`` from overflowing on large
    logits. Half-precision inputs are computed in float32 and cast back.

    Args:
        x: logits, any shape, floating point.
        dim: the dimension that sums to one.

    Returns:
        Tensor of the same shape, dtype and device as ``x``. A slice that is
        ``-inf`` throughout gives NaN, as :func:`torch.softmax` does.

    Shape:
        - x: ``(*)``
        - output: ``(*)``
    """
    v.require_float_tensor("x", x)
    v.require_dim_index("dim", dim, "x", x)
    if x.shape[dim] == 0 if x.dim() else False:
        return x.clone()  # nothing to normalise (torch.softmax returns the empty tensor too)
    work = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    shifted = work - work.amax(dim=dim, keepdim=True)
    e = shifted.exp()
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)


def attention_weights(scores: Tensor, inplace: bool = False) -> Tensor:
    """Row-wise softmax of the scores; rows that allow no key give zeros.

    With ``inplace=True`` (for scores the caller just made) and no gradient
    needed, the scores' memory is reused: three fewer ``L x S`` allocations
    halve the time on CPU, where fresh memory is slow to touch.

    Args:
        scores: masked scores, ``-inf`` where attention is not allowed.
        inplace: may overwrite ``scores``.

    Returns:
        Weights; each row sums to one, or is all zero when it allows no key.

    Shape:
        - scores: ``(..., S)``, output: ``(..., S)``
    """
    v.require_float_tensor("scores", scores, "(..., L, S)", min_dim=1)
    v.require_flag("inplace", inplace)
    if scores.shape[-1] == 0:
        # No keys at all: the weights are empty and, as with torch's SDPA, the output is zero.
        return scores.clone()
    row_max = scores.amax(dim=-1, keepdim=True)
    # A row with no allowed key has max -inf; pin it to 0 so exp gives zeros, not NaN.
    empty = row_max == float("-inf")
    shift = row_max.masked_fill(empty, 0.0)
    if inplace and not scores.requires_grad:
        e = scores.sub_(shift).exp_()
        return e.div_(e.sum(dim=-1, keepdim=True).masked_fill_(empty, 1.0))
    e = (scores - shift).exp()
    total = e.sum(dim=-1, keepdim=True)
    return e / total.masked_fill(empty, 1.0)


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
    _require_fits(query, keys)
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
    v.require_positive_number("temperature", temperature)
    _require_fits(query, keys)
    weights = softmax((query @ keys.transpose(-2, -1)) / temperature, dim=-1)
    return weights @ values, weights


def _require_fits(query: Tensor, key: Tensor, *extra: int, copies: int = 1,
                  what: str = "the (L, S) scores", hint: str = v.CHUNKED_HINT) -> None:
    """Refuse, before allocating, ``copies`` ``(..., L, S, *extra)`` tensors that cannot fit in memory."""
    batch = v.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    shape = (*batch, query.shape[-2], key.shape[-2], *extra)
    v.require_fits(what, shape, query.dtype, query.device, hint, copies)


def _check_scores(query: Tensor, key: Tensor, **params: Tensor) -> None:
    """Decoder and encoder states and the score's parameters: float tensors on one dtype and device."""
    v.require_float_tensor("query", query, "(..., L, Eq)", min_dim=2)
    v.require_float_tensor("key", key, "(..., S, Ek)", min_dim=2)
    for name, t in params.items():
        v.require_float_tensor(name, t)
    names, tensors = ("query", "key", *params), (query, key, *params.values())
    v.require_same(names, tensors, "dtype")
    v.require_same(names, tensors, "device")
    v.broadcast_batch(("query", "key"), (query, key), "query (..., L, Eq), key (..., S, Ek)")


def additive_score(query: Tensor, key: Tensor, W_q: Tensor, W_k: Tensor, v_a: Tensor) -> Tensor:
    """Bahdanau's score ``v_a^T tanh(W_q q_i + W_k k_j)`` for every query-key pair.

    Args:
        query: decoder states (the queries).
        key: encoder states (the keys).
        W_q: projection of the queries into the attention space.
        W_k: projection of the keys into the attention space.
        v_a: the vector that turns each ``tanh`` feature vector into one number.

    Returns:
        Unnormalised scores.

    Shape:
        - query: ``(..., L, Eq)``, key: ``(..., S, Ek)``
        - W_q: ``(A, Eq)``, W_k: ``(A, Ek)``, v_a: ``(A,)``
        - output: ``(..., L, S)``
    """
    _check_scores(query, key, W_q=W_q, W_k=W_k, v_a=v_a)
    A = v_a.shape[-1] if v_a.dim() == 1 else -1
    if v_a.dim() != 1 or W_q.shape != (A, query.shape[-1]) or W_k.shape != (A, key.shape[-1]):
        raise ValueError(
            f"expected W_q (A, Eq), W_k (A, Ek), v_a (A,) with Eq={query.shape[-1]} (the query's "
            f"last dim), Ek={key.shape[-1]} (the key's last dim); got W_q {v.shape_str(W_q)}, W_k {v.shape_str(W_k)}, "
            f"v_a {v.shape_str(v_a)}"
        )
    # (..., L, 1, A) + (..., 1, S, A) broadcasts to every pair: that pairwise tanh is
    # why additive attention costs L*S*A work and memory, not just L*S. The sum and its
    # tanh are held at once, so the peak is two such tensors: refused before either exists.
    _require_fits(query, key, W_q.shape[0], copies=2, what="the (L, S, A) tanh features",
                  hint="score shorter sequences (or fewer at a time), or use a smaller A (W_q's rows)")
    features = torch.tanh((query @ W_q.T).unsqueeze(-2) + (key @ W_k.T).unsqueeze(-3))
    return features @ v_a


def luong_score(query: Tensor, key: Tensor, W: Optional[Tensor] = None) -> Tensor:
    """Luong's multiplicative score: ``q^T k`` ("dot"), or ``q^T W k`` ("general") when ``W`` is given.

    Args:
        query: decoder states.
        key: encoder states.
        W: the bilinear weight of the "general" score, or ``None`` for "dot".

    Returns:
        Unnormalised scores.

    Shape:
        - query: ``(..., L, Eq)``, key: ``(..., S, Ek)`` (``Eq == Ek`` for "dot")
        - W: ``(Eq, Ek)``
        - output: ``(..., L, S)``
    """
    _check_scores(query, key, **({} if W is None else {"W": W}))
    _require_fits(query, key)
    if W is None:
        if query.shape[-1] != key.shape[-1]:
            raise ValueError(
                f"the dot score needs query and key of the same width, got query "
                f"{v.shape_str(query)} and key {v.shape_str(key)}; pass W for the general score"
            )
        return query @ key.transpose(-2, -1)
    if W.shape != (query.shape[-1], key.shape[-1]):
        raise ValueError(
            f"W must have shape (Eq, Ek) = ({query.shape[-1]}, {key.shape[-1]}), "
            f"got {v.shape_str(W)}"
        )
    return query @ W @ key.transpose(-2, -1)


def attend(scores: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Softmax the scores over the keys (respecting a mask) and weight the values.

    Args:
        scores: unnormalised scores.
        value: the values (encoder states, usually).
        attn_mask: bool, ``True`` where attention is allowed, broadcastable to ``(..., L, S)``.

    Returns:
        ``(context, weights)``.

    Shape:
        - scores: ``(..., L, S)``, value: ``(..., S, Ev)``
        - context: ``(..., L, Ev)``, weights: ``(..., L, S)``
    """
    legend = "scores (..., L, S), value (..., S, Ev)"
    v.require_float_tensor("scores", scores, legend, min_dim=2)
    v.require_float_tensor("value", value, legend, min_dim=2)
    v.require_same(("scores", "value"), (scores, value), "dtype")
    v.require_same(("scores", "value"), (scores, value), "device")
    v.require_same_size(("scores", scores, -1), ("value", value, -2), "the same number of keys S", legend)
    v.broadcast_batch(("scores", "value"), (scores, value), legend)
    if attn_mask is not None:
        batch = v.broadcast_shapes(scores.shape[:-2], value.shape[:-2])
        v.check_mask(attn_mask, scores.shape[-2], scores.shape[-1], scores.dtype, scores.device, batch)
        scores = (
            scores.masked_fill(~attn_mask, float("-inf"))
            if attn_mask.dtype == torch.bool
            else scores + attn_mask
        )
    weights = attention_weights(scores)
    return weights @ value, weights
