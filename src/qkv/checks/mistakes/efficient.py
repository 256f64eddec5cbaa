"""The wrong versions of the efficient-attention exercises, for :mod:`.efficient`'s mistakes.

Each variant computes what a student who made one mistake would return; with its default
switches it gives the right answer (it runs only after the student's code has returned).
"""

from __future__ import annotations

import math

import torch


def online_variant(query, key, value, attn_mask=None, is_causal=False, scale=None, chunk_size=256, *,
            rescale_l=True, rescale_acc=True, zero_start=False, divide=True, stop="S"):
    """Online softmax with switches for its mistakes (defaults: the right answer).

    ``zero_start`` starts the running maximum at 0 instead of -inf and leaves out
    the -inf guards, as an answer that never thought of fully negative rows does;
    ``divide=False`` returns the running output without dividing by the running sum;
    ``stop`` where the loop over the keys ends: ``"S"`` (right), ``"floor"`` after the
    last full chunk (range(S // chunk_size)), ``"minus"`` before S - chunk_size.
    """
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    c = 1.0 / math.sqrt(E) if scale is None else scale
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    # The batch dims, broadcast by torch on empty slices: torch.broadcast_shapes imports sympy
    # on first use, about a second in every fresh kernel (each autograded notebook).
    batch = torch.broadcast_tensors(*(t[..., :0, :0] for t in (query, key, value)))[0].shape[:-2]
    start = 0.0 if zero_start else float("-inf")
    m = torch.full((*batch, L, 1), start, dtype=query.dtype, device=query.device)
    l = torch.zeros_like(m)
    acc = torch.zeros(*batch, L, value.shape[-1], dtype=query.dtype, device=query.device)
    end = {"S": S, "floor": S // chunk_size * chunk_size, "minus": S - chunk_size}[stop]
    for j0 in range(0, end, chunk_size):
        s = (query * c) @ key[..., j0:j0 + chunk_size, :].transpose(-2, -1)
        if attn_mask is not None:
            block = attn_mask[..., j0:j0 + chunk_size]
            s = s.masked_fill(~block, float("-inf")) if block.dtype == torch.bool else s + block
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        safe = m_new if zero_start else m_new.masked_fill(m_new == float("-inf"), 0.0)
        p = (s - safe).exp()
        corr = (m - safe).exp()
        l = (l * corr if rescale_l else l) + p.sum(dim=-1, keepdim=True)
        acc = (acc * corr if rescale_acc else acc) + p @ value[..., j0:j0 + chunk_size, :]
        m = m_new
    if not divide:
        return acc
    return acc / l if zero_start else acc / l.masked_fill(l == 0, 1.0)


def short_chunks(query, key, value, attn_mask=None, is_causal=False, scale=None, chunk_size=256):
    """Off-by-one chunk bounds: each chunk stops one key short (j0:j0 + chunk_size - 1)."""
    S = key.shape[-2]
    keep = torch.tensor([(j % chunk_size) != chunk_size - 1 for j in range(S)], device=key.device)
    L = query.shape[-2]
    allowed = keep.expand(L, S)
    if is_causal:
        allowed = allowed & torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            allowed = allowed & attn_mask
        else:
            allowed = allowed & torch.isfinite(attn_mask)
            return online_variant(query, key, value, attn_mask.masked_fill(~allowed, float("-inf")),
                           False, scale, chunk_size)
    return online_variant(query, key, value, allowed, False, scale, chunk_size)


def kv_step_variant(query, key, value, k_cache=None, v_cache=None, scale=None, *, mask="bottom_right",
             diag=0, attend_new=True, new_first=False, return_old=False, cat_dim=-2,
             scale_by="E", fill=float("-inf")):
    """kv_cache_step with switches for its mistakes (the defaults: the right answer).

    ``mask``: bottom_right (right), upper_left (SDPA's is_causal) or None, shifted by
    ``diag``; ``cat_dim`` the axis the cache grows along; ``scale_by``: E (right), S (the
    number of keys) or none; ``fill`` the value masked scores get. As an answer does, the
    mask is built and applied even when it hides nothing (one new token).
    """
    old_k, old_v = k_cache, v_cache
    if k_cache is not None:
        pairs = ((key, k_cache), (value, v_cache)) if new_first else ((k_cache, key), (v_cache, value))
        k_all, v_all = (torch.cat(p, dim=cat_dim) for p in pairs)
    else:
        k_all, v_all = key, value
    k_att, v_att = (k_all, v_all) if attend_new or k_cache is None else (k_cache, v_cache)
    L, S = query.shape[-2], k_att.shape[-2]
    if scale is None:
        scale = {"E": 1.0 / math.sqrt(query.shape[-1]), "S": 1.0 / math.sqrt(S), "none": 1.0,
                 "Ev": 1.0 / math.sqrt(value.shape[-1])}[scale_by]
    scores = (query @ k_att.transpose(-2, -1)) * scale
    if mask is not None:
        shift = diag + (S - L if mask == "bottom_right" else 0)
        allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(shift)
        scores = scores.masked_fill(~allowed, fill)
    out = torch.softmax(scores, dim=-1) @ v_att
    if return_old:
        return out, old_k, old_v
    return out, k_all, v_all
