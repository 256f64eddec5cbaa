"""Catalogues of student answers for the mask, multi-head and chunked checks."""

import math

import torch
import torch.nn.functional as F
from torch import nn

import qkv


# ----------------------------------------------------------------------------- causal_mask
def causal_ok(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()


def causal_arange(L, S=None, device=None):
    S = L if S is None else S
    return torch.arange(S, device=device)[None, :] <= torch.arange(L, device=device)[:, None]


def causal_moved(L, S=None, device=None):
    S = L if S is None else S
    return ~torch.triu(torch.ones(L, S, dtype=torch.bool), diagonal=1).to(device)


def causal_triu(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).triu(1)


def causal_no_diag(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(-1)


def causal_bottom(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(S - L)


def causal_no_device(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool).tril()


def causal_float(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, device=device).tril()


CAUSAL_WRONG = {
    "inverted": (causal_triu, "inverted mask"),
    "off by one": (causal_no_diag, "off by one"),
    "bottom right": (causal_bottom, "bottom right"),
    "device ignored": (causal_no_device, "device="),
    "float instead of bool": (causal_float, "bool"),
}
CAUSAL_RIGHT = {"tril": causal_ok, "arange comparison": causal_arange, "moved with .to": causal_moved}


# ----------------------------------------------------------------------------- padding_mask
def _lengths(lengths):
    return lengths if isinstance(lengths, torch.Tensor) else torch.tensor(lengths)


def padding_ok(lengths, S=None):
    lengths = torch.as_tensor(lengths)
    S = int(lengths.max()) if S is None else S
    return torch.arange(S, device=lengths.device)[None, :] < lengths[:, None]


def padding_loop(lengths, S=None):
    lengths = _lengths(lengths)
    S = int(lengths.max()) if S is None else S
    mask = torch.zeros(len(lengths), S, dtype=torch.bool, device=lengths.device)
    for i, n in enumerate(lengths.tolist()):
        mask[i, :n] = True
    return mask


def padding_inverted(lengths, S=None):
    return ~padding_ok(lengths, S)


def padding_inclusive(lengths, S=None):
    lengths = torch.as_tensor(lengths)
    S = int(lengths.max()) if S is None else S
    return torch.arange(S, device=lengths.device)[None, :] <= lengths[:, None]


def padding_no_device(lengths, S=None):
    lengths = torch.as_tensor(lengths)
    S = int(lengths.max()) if S is None else S
    return torch.arange(S)[None, :] < lengths[:, None]


def padding_list_fails(lengths, S=None):
    S = int(lengths.max()) if S is None else S
    return torch.arange(S, device=lengths.device)[None, :] < lengths[:, None]


PADDING_WRONG = {
    "inverted": (padding_inverted, "inverted mask"),
    "off by one": (padding_inclusive, "off by one"),
    "wrong device": (padding_no_device, "device="),
    "list input": (padding_list_fails, "torch.as_tensor"),
}
PADDING_RIGHT = {"arange comparison": padding_ok, "loop": padding_loop}


# ----------------------------------------------------------------------------- split/merge heads
def split_ok(x, num_heads):
    B, L, D = x.shape
    return x.view(B, L, num_heads, D // num_heads).permute(0, 2, 1, 3)


def split_unflatten(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).transpose(1, 2)


def split_reshape_only(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, num_heads, L, D // num_heads)


def merge_ok(x):
    B, H, L, Dh = x.shape
    return x.transpose(1, 2).reshape(B, L, H * Dh)


def merge_cat(x):
    return torch.cat(x.unbind(1), dim=-1)


def merge_reshape_only(x):
    B, H, L, Dh = x.shape
    return x.reshape(B, L, H * Dh)


def merge_view(x):
    B, H, L, Dh = x.shape
    return x.transpose(1, 2).view(B, L, H * Dh)


SPLIT_WRONG = {"reshape without transpose": (split_reshape_only, "reshape without transpose")}
SPLIT_RIGHT = {"view + permute": split_ok, "unflatten": split_unflatten}
MERGE_WRONG = {
    "reshape without transpose": (merge_reshape_only, "reshape without transpose"),
    "view on a non-contiguous tensor": (merge_view, "contiguous"),
}
MERGE_RIGHT = {"transpose + reshape": merge_ok, "cat of heads": merge_cat}


# ----------------------------------------------------------------------------- MultiHeadAttention
def make_mha(out_proj=True, scale_by="head", einsum=False, builtin_attention=False):
    class MHA(nn.Module):
        def __init__(self, embed_dim, num_heads, bias=True, kdim=None, vdim=None, dropout=0.0,
                     device=None, dtype=None):
            super().__init__()
            f = {"device": device, "dtype": dtype}
            self.embed_dim, self.num_heads = embed_dim, num_heads
            self.head_dim = embed_dim // num_heads
            self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **f)
            self.k_proj = nn.Linear(kdim or embed_dim, embed_dim, bias=bias, **f)
            self.v_proj = nn.Linear(vdim or embed_dim, embed_dim, bias=bias, **f)
            self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **f)

        def forward(self, query, key=None, value=None, key_padding_mask=None, need_weights=False,
                    attn_mask=None, average_attn_weights=True, is_causal=False):
            key = query if key is None else key
            value = key if value is None else value
            unbatched = query.dim() == 2
            if unbatched:
                query, key, value = query[None], key[None], value[None]
            B, L, D = query.shape
            S, H = key.shape[1], self.num_heads
            q = self.q_proj(query).view(B, L, H, -1).transpose(1, 2)
            k = self.k_proj(key).view(B, S, H, -1).transpose(1, 2)
            v = self.v_proj(value).view(B, S, H, -1).transpose(1, 2)
            allowed = torch.ones(B, 1, L, S, dtype=torch.bool, device=query.device)
            if is_causal:
                allowed = allowed & torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
            if attn_mask is not None:
                allowed = allowed & attn_mask
            if key_padding_mask is not None:
                allowed = allowed & key_padding_mask[:, None, None, :]
            if builtin_attention:
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
                w = None
            else:
                d = self.head_dim if scale_by == "head" else self.embed_dim
                if einsum:
                    s = torch.einsum("bhle,bhse->bhls", q, k) / math.sqrt(d)
                else:
                    s = q @ k.transpose(-2, -1) / math.sqrt(d)
                w = s.masked_fill(~allowed, -1e9).softmax(-1)
                out = w @ v
            out = out.transpose(1, 2).reshape(B, L, D)
            if out_proj:
                out = self.out_proj(out)
            if need_weights:
                w = w.mean(1) if average_attn_weights else w
            if unbatched:
                out = out[0]
                w = w[0] if w is not None else None
            return out, (w if need_weights else None)
    return MHA


class MHASubclass(qkv.MultiHeadAttention):
    """Delegates to the reference by inheriting its forward."""


MHA_WRONG = {
    "no output projection": (make_mha(out_proj=False), "no output projection"),
    "scaled by embed_dim": (make_mha(scale_by="embed"), "embed_dim instead of head_dim"),
    "F.scaled_dot_product_attention inside": (make_mha(builtin_attention=True),
                                              "torch.nn.functional.scaled_dot_product_attention"),
    "inherits the reference": (MHASubclass, "qkv.MultiHeadAttention"),
}
MHA_RIGHT = {"matmul": make_mha(), "einsum": make_mha(einsum=True)}


# ----------------------------------------------------------------------------- chunked_attention
def make_chunked(rescale=True, materialise=False, stable=True, first_max=None, short=False):
    def chunked_attention(query, key, value, attn_mask=None, is_causal=False, scale=None,
                          chunk_size=256):
        L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
        c = 1 / math.sqrt(E) if scale is None else scale
        if is_causal:
            attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
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
            for j0 in range(0, S, chunk_size):
                j1 = j0 + chunk_size - (1 if short else 0)
                s = q @ key[..., j0:j1, :].transpose(-2, -1)
                if attn_mask is not None:
                    blk = attn_mask[..., i0:i0 + chunk_size, j0:j1]
                    s = s.masked_fill(~blk, -1e9) if blk.dtype == torch.bool else s + blk
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
            outs.append(acc / l)
        return torch.cat(outs, dim=-2)
    return chunked_attention


CHUNKED_WRONG = {
    "no rescaling": (make_chunked(rescale=False), "does not rescale its running sums"),
    "materialises L x S": (make_chunked(materialise=True), "full (L, S) score matrix"),
    "no running max": (make_chunked(stable=False), "overflows"),
}
CHUNKED_RIGHT = {"online softmax": make_chunked()}

CHUNKED_WRONG.update({
    "initial max 0": (make_chunked(first_max="zero"), "starts at 0 instead of -inf"),
    "chunk one key short": (make_chunked(short=True), "chunk bounds off by one"),
})


# ----------------------------------------------------------------------------- kv_cache_step
def make_kv(mask="bottom_right", attend_new=True, new_first=False, return_old=False, cat_dim=-2):
    def kv_cache_step(query, key, value, k_cache=None, v_cache=None, scale=None):
        if k_cache is None:
            k_all, v_all = key, value
        elif new_first:
            k_all, v_all = torch.cat([key, k_cache], dim=cat_dim), torch.cat([value, v_cache], dim=cat_dim)
        else:
            k_all, v_all = torch.cat([k_cache, key], dim=cat_dim), torch.cat([v_cache, value], dim=cat_dim)
        k_att, v_att = (k_all, v_all) if attend_new or k_cache is None else (k_cache, v_cache)
        L, S = query.shape[-2], k_att.shape[-2]
        c = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
        s = query @ k_att.transpose(-2, -1) * c
        if mask == "bottom_right":
            allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(S - L)
            s = s.masked_fill(~allowed, float("-inf"))
        elif mask == "is_causal":
            allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
            s = s.masked_fill(~allowed, float("-inf"))
        out = torch.softmax(s, dim=-1) @ v_att
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
    "concatenated on the wrong dim": (make_kv(cat_dim=-1), "wrong on"),
    "calls the reference": (lambda *a, **k: qkv.kv_cache_step(*a, **k), "qkv.kv_cache_step"),
}
KV_RIGHT = {"softmax by hand": make_kv(), "torch SDPA with a bottom-right mask": kv_with_sdpa}
