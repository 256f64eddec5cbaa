"""Catalogues of student answers for the multi-head checks (split_heads, merge_heads,
MultiHeadAttention): wrong ones (each with the words its hint must contain) and right ones
written differently (each passes)."""

import math

import torch
import torch.nn.functional as F
from torch import nn

import qkv


# ----------------------------------------------------------------------------- split/merge heads
def split_ok(x, num_heads):
    B, L, D = x.shape
    return x.view(B, L, num_heads, D // num_heads).permute(0, 2, 1, 3)


def split_unflatten(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).transpose(1, 2)


def split_reshape_only(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, num_heads, L, D // num_heads)


def split_transpose_first(x, num_heads):
    B, L, D = x.shape
    x = x.transpose(1, 2)  # (B, D, L)
    return x.reshape(B, num_heads, L, D // num_heads)


def split_transpose_first_view(x, num_heads):
    B, L, D = x.shape
    return x.transpose(1, 2).view(B, num_heads, L, D // num_heads)


def merge_ok(x):
    B, H, L, Dh = x.shape
    return x.transpose(1, 2).reshape(B, L, H * Dh)


def merge_cat(x):
    return torch.cat(x.unbind(1), dim=-1)


def merge_reshape_only(x):
    B, H, L, Dh = x.shape
    return x.reshape(B, L, H * Dh)


def merge_last_two_swapped(x):
    B, H, L, Dh = x.shape
    return x.transpose(2, 3).reshape(B, L, H * Dh)


def merge_view(x):
    B, H, L, Dh = x.shape
    return x.transpose(1, 2).view(B, L, H * Dh)


SPLIT_WRONG = {
    "reshape without transpose": (split_reshape_only, "reshape without transpose"),
    "transposing first": (split_transpose_first, "transposing before the reshape"),
    "transposing first, then view": (split_transpose_first_view, "transposing before the reshape"),
}
SPLIT_RIGHT = {"view + permute": split_ok, "unflatten": split_unflatten}
MERGE_WRONG = {
    "reshape without transpose": (merge_reshape_only, "reshape without transpose"),
    "view on a non-contiguous tensor": (merge_view, "contiguous"),
    "last two dims swapped": (merge_last_two_swapped, "the last two axes swapped"),
}
MERGE_RIGHT = {"transpose + reshape": merge_ok, "cat of heads": merge_cat}


# ----------------------------------------------------------------------------- MultiHeadAttention
def make_mha(out_proj=True, scale_by="head", einsum=False, builtin_attention=False,
             fill=float("-inf"), value_proj="v_proj", dropout="eval", ignore="", heads="mean"):
    class MHA(nn.Module):
        def __init__(self, embed_dim, num_heads, bias=True, kdim=None, vdim=None, dropout=0.0,
                     device=None, dtype=None):
            super().__init__()
            f = {"device": device, "dtype": dtype}
            self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
            self.head_dim = embed_dim // num_heads
            self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **f)
            self.k_proj = nn.Linear(kdim or embed_dim, embed_dim, bias=bias, **f)
            self.v_proj = nn.Linear(vdim or embed_dim, embed_dim, bias=bias, **f)
            self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **f)
            self.drop = nn.Dropout(dropout)

        def forward(self, query, key=None, value=None, key_mask=None, need_weights=False,
                    mask=None, average_attn_weights=True, is_causal=False):
            key = query if key is None else key
            value = key if value is None else value
            unbatched = query.dim() == 2
            if unbatched:
                query, key, value = query[None], key[None], value[None]
            B, L, D = query.shape
            S, H = key.shape[1], self.num_heads
            q = self.q_proj(query).view(B, L, H, -1).transpose(1, 2)
            k = self.k_proj(key).view(B, S, H, -1).transpose(1, 2)
            v = getattr(self, value_proj)(value).view(B, S, H, -1).transpose(1, 2)
            allowed = torch.ones(B, 1, L, S, dtype=torch.bool, device=query.device)
            if is_causal and ignore != "is_causal":
                allowed = allowed & torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
            if mask is not None and ignore != "mask":
                allowed = allowed & mask
            if key_mask is not None and ignore != "key_mask":
                allowed = allowed & key_mask[:, None, None, :]
            if builtin_attention:
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
                w = None
            else:
                d = {"head": math.sqrt(self.head_dim), "embed": math.sqrt(self.embed_dim),
                     "head_dim": self.head_dim}[scale_by]
                if einsum:
                    s = torch.einsum("bhle,bhse->bhls", q, k) / d
                else:
                    s = q @ k.transpose(-2, -1) / d
                w = s.masked_fill(~allowed, torch.finfo(s.dtype).min if fill == "finfo" else fill)
                w = w.softmax(-1)
                if dropout == "module":
                    w = self.drop(w)
                elif dropout == "always":
                    w = F.dropout(w, self.dropout)  # training defaults to True, even in eval
                else:
                    w = F.dropout(w, self.dropout, training=self.training)
                out = w @ v
            out = out.transpose(1, 2).reshape(B, L, D)
            if out_proj:
                out = self.out_proj(out)
            if need_weights and average_attn_weights:
                w = {"mean": w.mean(1), "sum": w.sum(1), "kept": w}[heads]
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
    "scaled by 1/head_dim": (make_mha(scale_by="head_dim"), "1/head_dim instead of 1/sqrt"),
    "V projected with k_proj": (make_mha(value_proj="k_proj"), "value projected with k_proj"),
    "dropout left on in eval": (make_mha(dropout="always"), "dropout left on in eval mode"),
    "-1e9 fill (overflows in float16)": (make_mha(fill=-1e9), "a finite fill like -1e9"),
    "the (L, S) mask ignored": (make_mha(ignore="mask"), "the mask ignored"),
    "key_mask ignored": (make_mha(ignore="key_mask"), "key_mask ignored"),
    "is_causal ignored": (make_mha(ignore="is_causal"), "is_causal ignored"),
    "weights not averaged": (make_mha(heads="kept"), "not averaged over the heads"),
    "weights summed over heads": (make_mha(heads="sum"), "summed over the heads"),
}
MHA_RIGHT = {
    "matmul": make_mha(),
    "einsum": make_mha(einsum=True),
    "nn.Dropout module": make_mha(dropout="module"),
    "finfo.min fill of the scores' dtype": make_mha(fill="finfo"),
}
