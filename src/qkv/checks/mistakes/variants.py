"""The wrong versions of chapter 9's exercises, for :mod:`.variants`'s mistakes.

Each variant computes what a student who made one mistake would return; with its default
switches it gives the right answer (it runs only after the student's code has returned).
"""

from __future__ import annotations

import math

import torch

from .attention import attend


def repeat_variant(x, n_rep, *, how="interleave", dim=-3):
    """``repeat_kv`` with switches: ``how`` is interleave (right), tile or unmerged; ``dim``
    the axis repeated along."""
    if how == "tile":  # heads [a, b] -> [a, b, a, b]: torch.repeat / torch.cat of copies
        return torch.cat([x] * n_rep, dim=dim)
    if how == "unmerged":  # the group axis left in: (B, Hkv, n_rep, S, E)
        return x.unsqueeze(-3).expand(*x.shape[:-2], n_rep, *x.shape[-2:])
    return x.repeat_interleave(n_rep, dim=dim)


def gqa_variant(query, key, value, is_causal=False, scale=None, *, kv="interleave",
                queries="all", scale_by="E"):
    """Grouped-query attention with switches (the defaults: the right answer).

    ``kv``: how the key/value heads reach the query heads (interleave, tile); ``queries``:
    all (right), first (one query head per group) or mean (a group's query heads averaged);
    ``scale_by``: E (right), Hq or Hkv (a head count read where E belongs).
    """
    Hq, Hkv = query.shape[-3], key.shape[-3]
    G = Hq // Hkv
    if queries != "all":
        grouped = query.unflatten(-3, (Hkv, G))
        query = grouped[..., 0, :, :] if queries == "first" else grouped.mean(dim=-3)
        G = 1
    key, value = (repeat_variant(t, G, how=kv) for t in (key, value))
    if scale is None and scale_by != "E":
        scale = 1.0 / math.sqrt({"Hq": Hq, "Hkv": Hkv}[scale_by])
    return attend(query, key, value, None, 0.0, is_causal, scale)


def gqa_attention_mistake(fn):
    """An attention mistake (SDPA's argument order) made after the key/value heads are repeated."""
    def wrong(query, key, value, is_causal=False, scale=None):
        G = query.shape[-3] // key.shape[-3]
        key, value = (t.repeat_interleave(G, dim=-3) for t in (key, value))
        return fn(query, key, value, None, 0.0, is_causal, scale)
    return wrong


def bottom_right_variant(L, S=None, device=None, *, diag=0, align="bottom", invert=False,
                         square=False):
    """``causal_mask_bottom_right`` with switches: ``align`` bottom (right), top, or flipped
    (``tril(L - S)``), shifted by ``diag``; ``invert`` the opposite convention; ``square``
    S ignored."""
    S = L if S is None or square else S
    shift = {"bottom": S - L, "top": 0, "flipped": L - S}[align]
    allowed = torch.ones(L, S, dtype=torch.bool, device=device).tril(shift + diag)
    return ~allowed if invert else allowed
