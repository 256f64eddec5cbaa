"""The wrong versions of the efficient-attention exercises, for :mod:`.efficient`'s mistakes.

Each variant computes what a student who made one mistake would return; with its default
switches it gives the right answer (it runs only after the student's code has returned).
:func:`chunk_by_chunk` is the one mistake no output shows: the keys' chunks ignored.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

from ..harness import ExerciseRule, whole_scores
from .attention import row_softmax


def chunk_by_chunk(chunk_of: Callable[[tuple, dict], Any], name: str) -> Callable[..., Any]:
    """How a chunked exercise calls the student: refused when the answer built the whole
    ``(L, S)`` score matrix (the chunk size ignored gives the right numbers, and none of the
    memory the exercise is about), with a mask or without: a mask, or a bias made whole from
    it, may be ``(L, S)``; scores may not (see :func:`whole_scores`).

    Args:
        chunk_of: the chunk size from the call's ``(args, kwargs)``.
        name: the argument's name, for the message.
    """
    def run(student: Any, query: Any, key: Any, *rest: Any, **kwargs: Any) -> Any:
        args = (query, key, *rest)
        chunk, L, S = chunk_of(args, kwargs), query.shape[-2], key.shape[-2]
        # The keys or values transposed whole, (E, S) or (Ev, S), have the shape of the
        # scores when E or Ev equals L: such a case is not watched (the others still are).
        if S <= chunk or L in (query.shape[-1], args[2].shape[-1] if len(args) > 2 else None):
            return student(*args, **kwargs)
        out, seen = whole_scores(lambda: student(*args, **kwargs), L, S, (query, key))
        if seen:
            raise ExerciseRule(
                f"with {name}={chunk} it built a tensor of shape {seen}: the whole (L, S) = "
                f"({L}, {S}) score matrix, which this exercise never makes",
                f"compute one chunk of keys at a time, query @ key[..., j0:j0 + {name}, :]"
                f".transpose(-2, -1) of shape (..., L, {name}), and combine the chunks with "
                f"the running maximum and sums")
        return out
    return run


def online_variant(query, key, value, attn_mask=None, is_causal=False, scale=None, chunk_size=256, *,
                   rescale_l=True, rescale_acc=True, zero_start=False, divide=True, stop="S",
                   mask_from0=False, guard=True, frozen=False, end_guard=False, upside_down=False,
                   carry=True, causal_from0=False):
    """Online softmax with switches for its mistakes (defaults: the right answer).

    ``zero_start`` starts the running maximum at 0 instead of -inf and leaves out
    the -inf guards, as an answer that never thought of fully negative rows does;
    ``divide=False`` returns the running output without dividing by the running sum;
    ``stop`` where the loop over the keys ends: ``"S"`` (right), ``"floor"`` after the
    last full chunk (range(S // chunk_size)), ``"minus"`` before S - chunk_size;
    ``mask_from0`` slices every chunk's mask from column 0 (the mask of the first chunk's keys);
    ``guard=False`` shifts by a running maximum of -inf too (NaN for a row whose chunks so far
    were all masked); ``frozen=True`` keeps the first chunk's maximum for good (nothing is
    rescaled, and a later chunk scoring far above the first overflows); ``end_guard``
    (with ``zero_start``): the division guarded (0 where l = 0); ``upside_down``: the rescale
    factor exp(m_new - m); ``carry=False``: m set to the chunk's own maximum after each chunk,
    not m_new; ``causal_from0`` (with ``is_causal``): each chunk's causal columns counted from
    its first key (arange(j1 - j0)); ``mask_from0`` then applies to a given attn_mask only.
    """
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    c = 1.0 / math.sqrt(E) if scale is None else scale
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    from0 = causal_from0 if is_causal else mask_from0
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
            first = 0 if from0 else j0
            block = attn_mask[..., first:first + s.shape[-1]]
            s = s.masked_fill(~block, float("-inf")) if block.dtype == torch.bool else s + block
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        if frozen and j0 > 0:
            m_new = m
        safe = m_new if zero_start or not guard else m_new.masked_fill(m_new == float("-inf"), 0.0)
        p = (s - safe).exp()
        corr = (safe - m).exp() if upside_down else (m - safe).exp()
        l = (l * corr if rescale_l else l) + p.sum(dim=-1, keepdim=True)
        acc = (acc * corr if rescale_acc else acc) + p @ value[..., j0:j0 + chunk_size, :]
        m = m_new if carry else s.amax(dim=-1, keepdim=True)
    if not divide:
        return acc
    return acc / l if zero_start and not end_guard else acc / l.masked_fill(l == 0, 1.0)


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
             scale_by="E", fill=float("-inf"), scale_given=True, stable=True, v_from_key=False,
             dim=-1, invert=False):
    """kv_cache_step with switches for its mistakes (the defaults: the right answer).

    ``mask``: bottom_right (right), upper_left (SDPA's is_causal) or None, shifted by
    ``diag``; ``cat_dim`` the axis the cache grows along; ``scale_by``: E (right), S (the
    number of keys) or none (``scale_given=False``: whether or not ``scale`` is given);
    ``fill`` the value masked scores get; ``stable=False``: no row maximum subtracted;
    ``v_from_key``: the new keys appended to the value cache (copied from the line above). As an
    answer does, the mask is built and applied even when it hides nothing (one new token).
    ``new_first="key"``: the key cache after the new keys, the value cache before (as right);
    ``dim``: the softmax's axis; ``invert``: the mask inverted (the allowed keys hidden).
    """
    old_k, old_v = k_cache, v_cache
    if k_cache is not None:
        value = key if v_from_key else value
        pairs = ((key, k_cache) if new_first else (k_cache, key),
                 (value, v_cache) if new_first is True else (v_cache, value))
        k_all, v_all = (torch.cat(p, dim=cat_dim) for p in pairs)
    else:
        k_all, v_all = key, value
    k_att, v_att = (k_all, v_all) if attend_new or k_cache is None else (k_cache, v_cache)
    L, S = query.shape[-2], k_att.shape[-2]
    if scale is None or not scale_given:
        scale = {"E": 1.0 / math.sqrt(query.shape[-1]), "S": 1.0 / math.sqrt(S), "none": 1.0,
                 "Ev": 1.0 / math.sqrt(value.shape[-1])}[scale_by]
    scores = (query @ k_att.transpose(-2, -1)) * scale
    if mask is not None:
        shift = diag + (S - L if mask == "bottom_right" else 0)
        allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(shift)
        scores = scores.masked_fill(allowed if invert else ~allowed, fill)
    out = row_softmax(scores, dim=dim, stable=stable) @ v_att
    if return_old:
        return out, old_k, old_v
    return out, k_all, v_all


def backward_variant(query, key, value, out, lse, grad_out, is_causal=False, scale=None, *,
                     weights="lse", delta="out", scale_dq=True, scale_dk=True, dk_t=True, dv_t=True,
                     mask="right", scale_given=True, default=None):
    """attention_backward with switches for its mistakes (the defaults: the right answer).

    ``weights``: how P is recomputed: ``"lse"`` (right, ``exp(s - lse)``), ``"exp"`` (no lse
    subtracted), ``"unscaled"`` (``exp(q k^T - lse)``, the scale forgotten), ``"lse_row"``
    (``lse`` not unsqueezed, so subtracted along the keys) or ``"dim-2"`` (a softmax over the
    queries); ``delta``: the softmax backward's row term, ``"out"`` (right, rowsum(dO * O)),
    ``"dp"`` (rowsum(dP)), ``"flat"`` (rowsum(dO * O) without keepdim: subtracted along the
    keys) or ``"none"``; ``dk_t``/``dv_t``: whether dS and P are transposed
    for dK and dV; ``mask`` (with ``is_causal``): ``"right"`` (P zeroed where j > i),
    ``"none"`` (P left as exp(s - lse) there), ``"inverted"`` (P zeroed where j <= i),
    ``"dp"`` (dP zeroed instead of P), ``"bottom_right"`` (j <= i + S - L allowed),
    ``"strict"`` (j < i allowed: the diagonal masked too) or ``"zero"`` (the hidden scores
    filled with 0, not -inf: P = exp(0 - lse) there); ``scale_given=False``: 1/sqrt(E) even
    when ``scale`` is given; ``default``: the factor when ``scale`` is None (1/sqrt(E) when
    None: right; 1.0, the default forgotten).
    """
    if default is None:
        default = 1.0 / math.sqrt(query.shape[-1])
    c = default if scale is None or not scale_given else scale
    s = query @ key.transpose(-2, -1)
    if weights == "exp":
        p = (s * c).exp()
    elif weights == "unscaled":
        p = (s - lse[..., None]).exp()
    elif weights == "lse_row":
        p = (s * c - lse).exp()
    elif weights == "dim-2":
        p = torch.softmax(s * c, dim=-2)
    else:
        p = (s * c - lse[..., None]).exp()
    allowed = None
    if is_causal:
        L, S = s.shape[-2:]
        i = torch.arange(L, device=s.device)[:, None]
        j = torch.arange(S, device=s.device)[None, :]
        allowed = {"right": j <= i, "none": None, "dp": j <= i, "inverted": j > i,
                   "bottom_right": j <= i + S - L, "strict": j < i, "zero": j <= i}[mask]
    if allowed is not None and mask == "zero":
        p = torch.where(allowed, p, torch.exp(-lse[..., None]).expand_as(p))
    elif allowed is not None and mask != "dp":
        p = p.masked_fill(~allowed, 0.0)
    grad_value = (p.transpose(-2, -1) if dv_t else p) @ grad_out
    dp = grad_out @ value.transpose(-2, -1)
    if allowed is not None and mask == "dp":
        dp = dp.masked_fill(~allowed, 0.0)
    d = {"out": (grad_out * out).sum(-1, keepdim=True), "dp": dp.sum(-1, keepdim=True),
         "flat": (grad_out * out).sum(-1),
         "none": torch.zeros_like(dp[..., :1])}[delta]
    ds = p * (dp - d)
    grad_query = (c if scale_dq else 1.0) * (ds @ key)
    grad_key = (c if scale_dk else 1.0) * ((ds.transpose(-2, -1) if dk_t else ds) @ query)
    return grad_query, grad_key, grad_value


def ring_variant(query, key, value, k_ring, v_ring, pos, scale=None, *, slot="mod",
                 seen="filled", before=False, shift=False, scale_by="E", fill=float("-inf"),
                 stable=True, scale_given=True):
    """sliding_kv_cache_step with switches for its mistakes (the defaults: the right answer).

    ``slot``: where the new key goes, ``"mod"`` (right, pos % W), ``"next"`` ((pos + 1) % W),
    ``"prev"`` ((pos - 1) % W) or ``"clamp"`` (min(pos, W - 1): the ring never wraps);
    ``seen``: the slots attended to, ``"filled"`` (right, slots 0..pos), ``"all"`` (unwritten
    ones too) or ``"before"`` (slots < pos: the own key hidden) or ``"modulo"`` (slots <= pos %
    W: wrong once the ring has wrapped) or ``"inverted"`` (the written slots hidden);
    ``scale_given=False``: 1/sqrt(E) even when ``scale`` is given; ``before``:
    attend to the old ring and the new key side by side, then write (W + 1 keys once the ring
    is full); ``shift``: drop the oldest row and append the new one (torch.cat) instead of
    writing a slot; ``stable=False``: no row maximum subtracted.
    """
    W = k_ring.shape[-2]
    c = {"E": 1.0 / math.sqrt(query.shape[-1]), "none": 1.0}[scale_by] if (
        scale is None or not scale_given) else scale
    filled = torch.arange(W, device=query.device) <= pos
    if shift:
        new_k = torch.cat([k_ring[..., 1:, :], key], dim=-2)
        new_v = torch.cat([v_ring[..., 1:, :], value], dim=-2)
        filled = filled.flip(-1)  # the filled rows are the last ones
    else:
        at = {"mod": pos % W, "next": (pos + 1) % W, "prev": (pos - 1) % W,
              "clamp": min(pos, W - 1)}[slot]
        new_k, new_v = k_ring.clone(), v_ring.clone()
        new_k[..., at, :], new_v[..., at, :] = key[..., 0, :], value[..., 0, :]
    if before:
        att_k, att_v = torch.cat([k_ring, key], dim=-2), torch.cat([v_ring, value], dim=-2)
        allowed = torch.cat([torch.arange(W, device=query.device) < pos,
                             torch.ones(1, dtype=torch.bool, device=query.device)])
    else:
        att_k, att_v = new_k, new_v
        allowed = {"filled": filled, "all": torch.ones_like(filled),
                   "before": torch.arange(W, device=query.device) < pos,
                   "modulo": torch.arange(W, device=query.device) <= pos % W,
                   "inverted": ~filled}[seen]
    scores = (query @ att_k.transpose(-2, -1)) * c
    out = row_softmax(scores.masked_fill(~allowed, fill), stable=stable) @ att_v
    return out, new_k, new_v
