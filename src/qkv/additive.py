"""Attention before transformers: additive (Bahdanau) and multiplicative (Luong) scores.

Bahdanau et al. (2015) score a decoder state ``q`` against an encoder state ``k``
with a small feed-forward network, ``v^T tanh(W_q q + W_k k)``. Luong et al.
(2015) use a product: ``q^T k`` ("dot") or ``q^T W k`` ("general"). Either score
goes through a softmax over the keys and weights the values, exactly as in
:func:`qkv.scaled_dot_product_attention`.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from . import _validate as v
from .scaling import attention_weights


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
    for name, t in (("query", query), ("key", key), ("W_q", W_q), ("W_k", W_k), ("v_a", v_a)):
        v.require_tensor(name, t)
        v.require_float(name, t)
    v.require_min_dim("query", query, 2, "(..., L, Eq)")
    v.require_min_dim("key", key, 2, "(..., S, Ek)")
    A = v_a.shape[-1] if v_a.dim() == 1 else -1
    if v_a.dim() != 1 or W_q.shape != (A, query.shape[-1]) or W_k.shape != (A, key.shape[-1]):
        raise ValueError(
            f"expected W_q (A, Eq), W_k (A, Ek), v_a (A,) with Eq={query.shape[-1]}, "
            f"Ek={key.shape[-1]}; got W_q {v.shape_str(W_q)}, W_k {v.shape_str(W_k)}, "
            f"v_a {v.shape_str(v_a)}"
        )
    # (..., L, 1, A) + (..., 1, S, A) broadcasts to every pair: that pairwise tanh is
    # why additive attention costs L*S*A work and memory, not just L*S.
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
    for name, t in (("query", query), ("key", key)):
        v.require_tensor(name, t)
        v.require_float(name, t)
    v.require_min_dim("query", query, 2, "(..., L, Eq)")
    v.require_min_dim("key", key, 2, "(..., S, Ek)")
    if W is None:
        if query.shape[-1] != key.shape[-1]:
            raise ValueError(
                f"the dot score needs query and key of the same width, got query "
                f"{v.shape_str(query)} and key {v.shape_str(key)}; pass W for the general score"
            )
        return query @ key.transpose(-2, -1)
    v.require_tensor("W", W)
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
    if attn_mask is not None:
        v.check_mask(attn_mask, scores.shape[-2], scores.shape[-1], scores.dtype, scores.device)
        scores = (
            scores.masked_fill(~attn_mask, float("-inf"))
            if attn_mask.dtype == torch.bool
            else scores + attn_mask
        )
    weights = attention_weights(scores)
    return weights @ value, weights


class AdditiveAttention(nn.Module):
    """Bahdanau attention with learned ``W_q``, ``W_k`` and ``v_a``.

    Args:
        query_dim: width ``Eq`` of the queries (decoder states).
        key_dim: width ``Ek`` of the keys (encoder states).
        attn_dim: width ``A`` of the hidden layer inside the score.

    Shape:
        - query: ``(..., L, Eq)``, key: ``(..., S, Ek)``, value: ``(..., S, Ev)``
        - output: context ``(..., L, Ev)``, weights ``(..., L, S)``
    """

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int) -> None:
        super().__init__()
        self.W_q = nn.Parameter(torch.randn(attn_dim, query_dim) / query_dim**0.5)
        self.W_k = nn.Parameter(torch.randn(attn_dim, key_dim) / key_dim**0.5)
        self.v_a = nn.Parameter(torch.randn(attn_dim) / attn_dim**0.5)

    def forward(
        self, query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None
    ) -> Tuple[Tensor, Tensor]:
        """Return ``(context, weights)``; ``attn_mask`` is True where attention is allowed."""
        return attend(additive_score(query, key, self.W_q, self.W_k, self.v_a), value, attn_mask)


class LuongAttention(nn.Module):
    """Luong attention with the "dot" or "general" score.

    Args:
        query_dim: width of the queries.
        key_dim: width of the keys (must equal ``query_dim`` for "dot").
        method: ``"dot"`` (no parameters) or ``"general"`` (a ``(query_dim, key_dim)`` matrix).

    Shape:
        - query: ``(..., L, Eq)``, key: ``(..., S, Ek)``, value: ``(..., S, Ev)``
        - output: context ``(..., L, Ev)``, weights ``(..., L, S)``
    """

    def __init__(self, query_dim: int, key_dim: Optional[int] = None, method: str = "dot") -> None:
        super().__init__()
        key_dim = query_dim if key_dim is None else key_dim
        if method not in ("dot", "general"):
            raise ValueError(f"method must be 'dot' or 'general', got {method!r}")
        if method == "dot" and key_dim != query_dim:
            raise ValueError(f"the dot score needs query_dim == key_dim, got {query_dim} and {key_dim}")
        self.method = method
        self.W = (
            nn.Parameter(torch.randn(query_dim, key_dim) / query_dim**0.5)
            if method == "general"
            else None
        )

    def forward(
        self, query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None
    ) -> Tuple[Tensor, Tensor]:
        """Return ``(context, weights)``; ``attn_mask`` is True where attention is allowed."""
        return attend(luong_score(query, key, self.W), value, attn_mask)
