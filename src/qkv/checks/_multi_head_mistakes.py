"""The wrong versions of the multi-head exercises, for :mod:`.multi_head`'s mistakes.

Each variant computes what a student who made one mistake would return; with its default
switches it gives the right answer (it runs only after the student's code has returned).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import qkv

from ._attention import attend


def split_variant(x, num_heads, *, how="ok"):
    B, L, D = x.shape
    if how == "reshape":
        return x.reshape(B, num_heads, L, D // num_heads)
    if how == "interleaved":
        return x.reshape(B, L, D // num_heads, num_heads).permute(0, 3, 1, 2)
    if how == "no transpose":
        return x.reshape(B, L, num_heads, D // num_heads)
    if how == "transpose first":
        return x.transpose(1, 2).reshape(B, num_heads, L, D // num_heads)
    return x.reshape(B, L, num_heads, D // num_heads).transpose(1, 2)


def merge_variant(x, *, how="ok"):
    B, H, L, Dh = x.shape
    if how == "reshape":
        return x.reshape(B, L, H * Dh)
    if how == "interleaved":
        return x.permute(0, 2, 3, 1).reshape(B, L, Dh * H)
    if how == "mean":
        return x.mean(dim=1)
    if how == "last two":
        return x.transpose(-2, -1).reshape(B, L, H * Dh)
    return x.transpose(1, 2).reshape(B, L, H * Dh)


def mha_variant(spec, query, key=None, value=None, key_mask=None, need_weights=False,
                 mask=None, average_attn_weights=True, is_causal=False, *,
                 out_proj=True, scale_by="head", split="ok", merge="ok", invert_padding=False,
                 value_proj="v_proj", dropout=False, fill=float("-inf"), ignore="",
                 heads="mean"):
    """The module's forward with switches for its mistakes (defaults: the right answer).

    ``scale_by``: head (1/sqrt(head_dim)), embed (1/sqrt(embed_dim)), head_dim (1/head_dim)
    or none; ``value_proj`` the projection applied to the value; ``dropout`` applies
    dropout to the weights even in eval mode (``F.dropout``'s default training=True);
    ``ignore`` names the argument left unused (mask, key_mask or is_causal); ``heads`` is
    how the returned weights treat the heads when they are averaged (mean, sum or kept).
    """
    if ignore:
        mask, key_mask, is_causal = {"mask": (None, key_mask, is_causal),
                                     "key_mask": (mask, None, is_causal),
                                     "is_causal": (mask, key_mask, False)}[ignore]
    key = query if key is None else key
    value = key if value is None else value
    batched = query.dim() == 3
    if not batched:
        query, key, value = query[None], key[None], value[None]
        if key_mask is not None:
            key_mask = key_mask[None]
    if invert_padding and key_mask is not None:
        key_mask = ~key_mask
    B, L, D = query.shape
    S, H = key.shape[1], spec["num_heads"]
    W, b = spec["weights"], spec["biases"]
    mask = qkv.combine_masks(mask, key_mask, is_causal, B, L, S, query)
    q, k, v = (split_variant(F.linear(t, W[n], b[n]), H, how=split)
               for t, n in ((query, "q_proj"), (key, "k_proj"), (value, value_proj)))
    scale = {"head": 1.0 / math.sqrt(D // H), "embed": 1.0 / math.sqrt(D), "head_dim": H / D,
             "none": 1.0}[scale_by]
    weights = attend(q, k, None, mask, factor=lambda E, Ev, s: scale, fill=fill, give="weights")
    if dropout:
        weights = F.dropout(weights, spec.get("dropout", 0.0))
    out = weights @ v
    out = merge_variant(out, how=merge)
    if out_proj:
        out = F.linear(out, W["out_proj"], b["out_proj"])
    if not batched:
        out, weights = out[0], weights[0]
    if need_weights:
        if average_attn_weights and heads != "kept":
            weights = weights.sum(dim=-3) if heads == "sum" else weights.mean(dim=-3)
        return out, weights
    return out
