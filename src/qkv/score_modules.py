"""Bahdanau's and Luong's attention as modules: a learned score, then :func:`qkv.attend`.

Chapter 2 writes the scores as functions (:mod:`qkv.lookup`); these modules hold their
parameters so that a seq2seq decoder can learn them.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from . import _validate as v
from .lookup import additive_score, attend, luong_score

__all__ = ["AdditiveAttention", "LuongAttention"]


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
        for name, n in (("query_dim", query_dim), ("key_dim", key_dim), ("attn_dim", attn_dim)):
            v.require_int(name, n)
        sizes = {"query_dim": query_dim, "key_dim": key_dim, "attn_dim": attn_dim}
        v.require_weights_fit("AdditiveAttention", sizes, attn_dim * (query_dim + key_dim + 1))
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
        v.require_int("query_dim", query_dim)
        key_dim = query_dim if key_dim is None else v.require_int("key_dim", key_dim)
        self.method = v.require_choice("method", method, ("dot", "general"))
        if method == "dot" and key_dim != query_dim:
            raise ValueError(f"the dot score needs query_dim == key_dim, got {query_dim} and {key_dim}")
        general = method == "general"
        if general:
            sizes = {"query_dim": query_dim, "key_dim": key_dim}
            v.require_weights_fit("LuongAttention", sizes, query_dim * key_dim)
        self.W = nn.Parameter(torch.randn(query_dim, key_dim) / query_dim**0.5) if general else None

    def forward(
        self, query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None
    ) -> Tuple[Tensor, Tensor]:
        """Return ``(context, weights)``; ``attn_mask`` is True where attention is allowed."""
        return attend(luong_score(query, key, self.W), value, attn_mask)
