"""Catalogues of student answers for the efficient checks (chunked_attention, kv_cache_step):
wrong ones (each with the words its hint must contain) and right ones written differently (each
passes)."""

import math

import torch
import torch.nn.functional as F

import qkv


# ----------------------------------------------------------------------------- chunked_attention
def make_chunked(rescale=True, materialise=False, stable=True, first_max=None, short=False,
                 fill="finfo", causal_diag=0, divide=True, stop="S"):
    def chunked_attention(query, key, value, attn_mask=None, is_causal=False, scale=None,
                          chunk_size=256):
        L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
        c = 1 / math.sqrt(E) if scale is None else scale
        if is_causal:
            attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(causal_diag)
        if materialise:
            s = query @ key.transpose(-2, -1) * c
            if attn_mask is not None:
                s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
                    else s + attn_mask
            return torch.softmax(s, -1) @ value
        outs = []
        for i0 in range(0, L, chunk_size):
            q = query[..., i0:i0 + chunk_size, :] * c
            m = l = acc = None
            for j0 in range(0, S if stop == "S" else S - chunk_size, chunk_size):
                j1 = j0 + chunk_size - (1 if short else 0)
                s = q @ key[..., j0:j1, :].transpose(-2, -1)
                if attn_mask is not None:
                    blk = attn_mask[..., i0:i0 + chunk_size, j0:j1]
                    low = torch.finfo(s.dtype).min if fill == "finfo" else fill
                    s = s.masked_fill(~blk, low) if blk.dtype == torch.bool else s + blk
                vj = value[..., j0:j1, :]
                if m is None and first_max == "zero":
                    m = torch.zeros_like(s[..., :1])
                    l, acc = torch.zeros_like(m), torch.zeros_like(q[..., :1] * vj[..., :1, :])
                if m is None:
                    m = s.amax(-1, keepdim=True) if stable else torch.zeros_like(s[..., :1])
                    p = (s - m).exp()
                    l, acc = p.sum(-1, keepdim=True), p @ vj
                    continue
                m_new = torch.maximum(m, s.amax(-1, keepdim=True)) if stable else m
                p = (s - m_new).exp()
                r = (m - m_new).exp() if rescale else torch.ones_like(m)
                l = l * r + p.sum(-1, keepdim=True)
                acc = acc * r + p @ vj
                m = m_new
            outs.append(acc / l if divide else acc)
        return torch.cat(outs, dim=-2)
    return chunked_attention


CHUNKED_WRONG = {
    "no rescaling": (make_chunked(rescale=False), "does not rescale its running sums"),
    "no running max": (make_chunked(stable=False), "overflows"),
}
CHUNKED_RIGHT = {"online softmax": make_chunked()}

CHUNKED_WRONG.update({
    "initial max 0": (make_chunked(first_max="zero"), "starts at 0 instead of -inf"),
    "chunk one key short": (make_chunked(short=True), "chunk bounds off by one"),
    "causal mask hides the diagonal": (make_chunked(causal_diag=-1),
                                       "causal mask off by one (the diagonal is masked)"),
    "-1e9 fill (overflows in float16)": (make_chunked(fill=-1e9), "a finite fill like -1e9"),
    "float32's finfo.min fill (overflows in float16)":
        (make_chunked(fill=torch.finfo(torch.float32).min), "torch.finfo(scores.dtype).min"),
})


# ----------------------------------------------------------------------------- kv_cache_step
def make_kv(mask="bottom_right", attend_new=True, new_first=False, return_old=False, cat_dim=-2,
            scale_by="E", diag=0, fill=float("-inf"), give="triple"):
    def kv_cache_step(query, key, value, k_cache=None, v_cache=None, scale=None):
        if k_cache is None:
            k_all, v_all = key, value
        elif new_first:
            k_all, v_all = torch.cat([key, k_cache], dim=cat_dim), torch.cat([value, v_cache], dim=cat_dim)
        else:
            k_all, v_all = torch.cat([k_cache, key], dim=cat_dim), torch.cat([v_cache, value], dim=cat_dim)
        k_att, v_att = (k_all, v_all) if attend_new or k_cache is None else (k_cache, v_cache)
        L, S = query.shape[-2], k_att.shape[-2]
        # S: the number of keys, Ev: the values' width (the mistakes)
        d = {"E": query.shape[-1], "S": S, "Ev": value.shape[-1]}[scale_by]
        c = 1 / math.sqrt(d) if scale is None else scale
        s = query @ k_att.transpose(-2, -1) * c
        if mask == "bottom_right":
            allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(S - L + diag)
            s = s.masked_fill(~allowed, fill)
        elif mask == "is_causal":
            allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
            s = s.masked_fill(~allowed, float("-inf"))
        out = torch.softmax(s, dim=-1) @ v_att
        if give == "output":
            return out
        if give == "nested":
            return out, (k_all, v_all)
        return (out, k_cache, v_cache) if return_old else (out, k_all, v_all)
    return kv_cache_step


def kv_with_sdpa(query, key, value, k_cache=None, v_cache=None, scale=None):
    if k_cache is not None:
        key, value = torch.cat((k_cache, key), -2), torch.cat((v_cache, value), -2)
    L, S = query.shape[-2], key.shape[-2]
    offset = torch.arange(L, device=query.device)[:, None] + (S - L)
    mask = torch.arange(S, device=query.device)[None, :] <= offset
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale), key, value


KV_WRONG = {
    "upper-left causal": (make_kv(mask="is_causal"), "aligned to the upper left"),
    "no mask": (make_kv(mask=None), "no causal mask among several new tokens"),
    "attends to the old cache only": (make_kv(attend_new=False), "only to the old cache"),
    "new before old": (make_kv(new_first=True), "put before the cache"),
    "returns the old caches": (make_kv(return_old=True), "old caches returned"),
    "concatenated on the wrong dim": (make_kv(cat_dim=-1), "the cache appended on the wrong dim"),
    "concatenated on the heads dim": (make_kv(cat_dim=1), "the cache appended on the wrong dim"),
    "scaled by 1/sqrt(S)": (make_kv(scale_by="S"), "scaled by 1/sqrt(S)"),
    "mask hides the new token itself": (make_kv(diag=-1), "causal mask off by one (each new token"),
    "mask shows one future token": (make_kv(diag=1), "causal mask off by one (one future key"),
    "-1e9 fill (overflows in float16)": (make_kv(fill=-1e9), "a finite fill like -1e9"),
    "calls the reference": (lambda *a, **k: qkv.kv_cache_step(*a, **k), "qkv.kv_cache_step"),
}
KV_RIGHT = {"softmax by hand": make_kv()}


# ----------------------------------------------------------------------------- found by trying
# Mistakes a student made while trying the exercises (issue 13, item 5).
CHUNKED_WRONG.update({
    "never divided by l": (make_chunked(divide=False), "never divided by the running sum"),
    "loop stops at S - chunk_size": (make_chunked(stop="minus"), "the last keys left out"),
})
KV_WRONG.update({
    "scaled by 1/sqrt(Ev)": (make_kv(scale_by="Ev"), "1/sqrt(Ev)"),
    "returns the output only": (make_kv(give="output"), "expected a tuple of 3"),
    "returns (output, (k, v))": (make_kv(give="nested"), "not nested in pairs"),
})
