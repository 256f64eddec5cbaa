"""The wrong versions of the multi-head exercises, for :mod:`.multi_head`'s mistakes.

Each variant computes what a student who made one mistake would return; with its default
switches it gives the right answer (it runs only after the student's code has returned).
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F

import qkv

from .attention import CAUSAL_DIAGONAL_MASKED, CAUSAL_FUTURE_ALLOWED, FILL_HINT, attend
from ..harness import Mistake

TRANSPOSE_HINT = ("reshape to (B, L, H, D // H) first, then transpose(1, 2); a reshape alone "
                  "puts features of different positions into one head")
_MASK_NAMES = ("forward's masks are called mask= (True = may attend) and key_mask= (True = a "
               "real token), and the check passes them by these names; not attn_mask= and "
               "key_padding_mask=, because nn.MultiheadAttention's masks of those names mean "
               "the opposite (True = hidden, True = padding)")
_APPLY = "and apply the mask it returns: scores.masked_fill(~mask, float('-inf'))"


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
    if how == "sizes swapped":  # reshape(B, L, D // H, H): H heads of width D // H mixed up
        return x.reshape(B, L, D // num_heads, num_heads).transpose(1, 2)
    if how == "H // D":  # raises: a size of 0
        return x.reshape(B, L, num_heads, num_heads // D).transpose(1, 2)
    return x.reshape(B, L, num_heads, D // num_heads).transpose(1, 2)


def merge_variant(x, *, how="ok"):
    B, H, L, Dh = x.shape
    if how == "reshape":
        return x.reshape(B, L, H * Dh)
    if how == "interleaved":
        return x.permute(0, 2, 3, 1).reshape(B, L, Dh * H)
    if how == "mean":
        return x.mean(dim=1)
    if how == "sum":
        return x.sum(dim=1)
    if how == "last two":
        return x.transpose(-2, -1).reshape(B, L, H * Dh)
    if how == "along positions":  # torch.cat(x.unbind(1), dim=1): heads one after another
        return torch.cat(x.unbind(1), dim=1)
    if how == "heads first":
        return x.reshape(B, H, L * Dh)
    if how == "unpacked":  # B, L, H, Dh = x.shape: H and L read in the wrong order
        return x.transpose(1, 2).reshape(B, H, L * Dh)
    return x.transpose(1, 2).reshape(B, L, H * Dh)


# The head split written (B, L, head_dim, H) and its inverse at the merge: each a name, a hint
# and the switches of mha_variant (or of _beyond_heads.mhsa) that put it back.
_BLOCK = ("each head takes a contiguous block of head_dim features: reshape(B, L, num_heads, "
          "head_dim).transpose(1, 2) (split_heads)")
HEAD_LAYOUT_SLIPS = [
    ("heads split as (B, L, head_dim, H), then moved to (B, H, L, head_dim) (the head index "
     "varies fastest)", _BLOCK + "; (B, L, head_dim, H) gives head h features h, h + H, ...",
     {"split": "interleaved"}),
    ("heads merged as (B, L, head_dim, H) (permute(0, 2, 3, 1)): the features of the heads "
     "interleaved", "concatenate whole heads, head 0's head_dim features first: "
     "out.transpose(1, 2).reshape(B, L, embed_dim) (merge_heads)", {"merge": "interleaved"}),
    ("heads split and merged as (B, L, head_dim, H) (the head index varies fastest)",
     _BLOCK + "; the merge undoes the interleaving, but each head still attends with the "
     "features h, h + H, ... instead of its own block", {"split": "interleaved",
                                                          "merge": "interleaved"}),
    ("reshape(B, L, head_dim, num_heads).transpose(1, 2): head_dim heads of width num_heads",
     "reshape to (B, L, num_heads, head_dim): num_heads heads, each head_dim features wide, "
     "then transpose(1, 2)", {"split": "sizes swapped"}),
]


def _mask(spec_mask, key_mask, is_causal, B, L, S, query, causal_diag, key_axis):
    """The mask combine_masks gives, or a student's own one with a shifted causal diagonal
    (``causal_diag``) or ``key_mask`` broadcast along the queries (``key_axis="queries"``)."""
    if is_causal and causal_diag:
        spec_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(causal_diag)
        is_causal = False
    if key_axis == "queries" and key_mask is not None:
        mask = qkv.combine_masks(spec_mask, None, is_causal, B, L, S, query)
        pad = key_mask[:, None, :, None]  # (B, 1, S, 1): only right when L == S
        return pad if mask is None else mask & pad
    return qkv.combine_masks(spec_mask, key_mask, is_causal, B, L, S, query)


def _returned_weights(weights, unmasked, batched, average, heads):
    """The weights as returned: ``heads`` mean (right), sum, kept (never averaged), always
    (averaged even when not asked), batch (averaged over dim 0), unmasked (before the mask),
    dim1 (averaged over dim 1: the heads of (B, H, L, S), but the queries of (H, L, S))."""
    if heads == "unmasked":
        weights = unmasked
    if not batched:
        weights = weights[0]
    if heads == "batch":
        return weights.mean(dim=0)
    if heads == "dim1" and average:
        return weights.mean(dim=1)
    if (average and heads != "kept") or heads == "always":
        return weights.sum(dim=-3) if heads == "sum" else weights.mean(dim=-3)
    return weights


def mha_variant(spec, query, key=None, value=None, key_mask=None, need_weights=False,
                 mask=None, average_attn_weights=True, is_causal=False, *,
                 out_proj=True, scale_by="head", split="ok", merge="ok", invert_padding=False,
                 key_proj="k_proj", value_proj="v_proj", dropout=False, fill=float("-inf"),
                 ignore="", heads="mean", value_default="key", softmax_dim=-1,
                 mask_mode="before", causal_diag=0, key_axis="keys"):
    """The module's forward with switches for its mistakes (defaults: the right answer).

    ``scale_by``: head (1/sqrt(head_dim)), embed (1/sqrt(embed_dim)), head_dim (1/head_dim),
    times (sqrt(head_dim)), after (1/sqrt(head_dim) on the weights) or none;
    ``key_proj``/``value_proj`` the projections applied to the key and value; ``split``
    ``"one head"`` attends over the whole embed_dim; ``out_proj`` False (none) or
    ``"before merge"``; ``dropout`` applies dropout to the weights even in eval mode;
    ``ignore`` names the argument left unused (mask, key_mask or is_causal); ``heads`` see
    :func:`_returned_weights`; ``softmax_dim``, ``mask_mode`` and ``fill`` go to
    :func:`._attention.attend`; ``causal_diag``/``key_axis`` see :func:`_mask`.
    """
    if ignore:
        mask, key_mask, is_causal = {"mask": (None, key_mask, is_causal),
                                     "key_mask": (mask, None, is_causal),
                                     "is_causal": (mask, key_mask, False)}[ignore]
    key = query if key is None else key
    value = (key if value_default == "key" else query) if value is None else value
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
    mask = _mask(mask, key_mask, is_causal, B, L, S, query, causal_diag, key_axis)
    if mask is None and mask_mode == "inverted":  # a student's all-True mask, read inverted
        mask = torch.ones(L, S, dtype=torch.bool, device=query.device)
    heads_of = ((lambda t: t[:, None]) if split == "one head"
                else (lambda t: split_variant(t, H, how=split)))
    q, k, v = (heads_of(F.linear(t, W[n], b[n]))
               for t, n in ((query, "q_proj"), (key, key_proj), (value, value_proj)))
    scale = {"head": 1.0 / math.sqrt(D // H), "embed": 1.0 / math.sqrt(D), "head_dim": H / D,
             "none": 1.0, "times": math.sqrt(D // H), "after": 1.0}[scale_by]
    # "inverted fill": masked_fill(mask, ...) on the mask combine_masks returns (None, no fill).
    mode = "inverted" if mask_mode == "inverted fill" else mask_mode
    weights = attend(q, k, None, mask, factor=lambda E, Ev, s: scale, fill=fill, dim=softmax_dim,
                     mask_mode=mode, give="weights")
    if scale_by == "after":
        weights = weights / math.sqrt(D // H)
    unmasked = attend(q, k, None, None, factor=lambda E, Ev, s: scale, give="weights")
    if dropout:
        weights = F.dropout(weights, spec.get("dropout", 0.0))
    out = weights @ v
    if out_proj == "before merge":
        out = F.linear(out, W["out_proj"], b["out_proj"])
    out = out[:, 0] if split == "one head" else merge_variant(out, how=merge)
    if out_proj is True:
        out = F.linear(out, W["out_proj"], b["out_proj"])
    if not batched:
        out = out[0]
    if need_weights:
        return out, _returned_weights(weights, unmasked, batched, average_attn_weights, heads)
    return out


def _m(name: str, hint: str, **switches) -> Mistake:
    return Mistake(name, hint, partial(mha_variant, **switches))


MHA_MISTAKES = [
    _m("no output projection", "apply out_proj to the merged heads", out_proj=False),
    _m("scaled by embed_dim instead of head_dim", "each head's scores are scaled by "
       "1/sqrt(head_dim), head_dim = embed_dim // num_heads", scale_by="embed"),
    _m("no scaling", "scale each head's scores by 1/sqrt(head_dim)", scale_by="none"),
    _m("scaled by 1/head_dim instead of 1/sqrt(head_dim)",
       "divide each head's scores by math.sqrt(head_dim), not by head_dim", scale_by="head_dim"),
    _m("the scores multiplied by sqrt(head_dim) instead of divided",
       "divide the scores by math.sqrt(head_dim)", scale_by="times"),
    _m("scaled after the softmax (the weights divided by sqrt(head_dim))",
       "scale the scores, before the softmax: the weights of a row must sum to one",
       scale_by="after"),
    _m("the key projected with q_proj instead of k_proj",
       "queries come from q_proj(query), keys from k_proj(key)", key_proj="q_proj"),
    _m("the value projected with k_proj instead of v_proj",
       "keys come from k_proj(key), values from v_proj(value)", value_proj="k_proj"),
    _m("softmax over the queries (axis -2) instead of the keys",
       "each query's weights over the keys sum to one: softmax(dim=-1)", softmax_dim=-2),
    _m("softmax over the heads instead of the keys",
       "the scores are (B, H, L, S): softmax over the keys, dim=-1", softmax_dim=1),
    _m("one head over the whole embed_dim (the heads not split)",
       "split q, k and v into num_heads heads of head_dim features (split_heads) and merge "
       "them back after the attention (merge_heads)", split="one head"),
    _m("dropout left on in eval mode", "F.dropout(x, p) drops even after module.eval() (its "
       "training argument defaults to True): pass training=self.training, or use an "
       "nn.Dropout module", dropout=True),
    _m("a finite fill like -1e9 (it overflows in float16)", FILL_HINT, fill=-1e9),
    _m("reshape without transpose when splitting heads", TRANSPOSE_HINT, split="reshape"),
    _m("reshape without transpose when merging heads",
       "transpose(1, 2) back to (B, L, H, Dh) before reshaping to (B, L, D)", merge="reshape"),
    *(_m(name, hint, **switches) for name, hint, switches in HEAD_LAYOUT_SLIPS),
    _m("heads averaged instead of concatenated", "merge the heads side by side (merge_heads): "
       "out_proj takes all embed_dim features", merge="mean"),
    _m("out_proj applied before merging the heads", "merge the heads first (merge_heads), "
       "then out_proj: it maps the embed_dim features of all heads together",
       out_proj="before merge"),
    _m("the mask ignored", "pass mask on to combine_masks(mask, key_mask, is_causal, B, L, S, "
       "query) " + _APPLY, ignore="mask"),
    _m("key_mask ignored", "pass key_mask on to combine_masks " + _APPLY + "; padded keys must "
       "get weight zero", ignore="key_mask"),
    _m("is_causal ignored", "pass is_causal on to combine_masks " + _APPLY + "; with "
       "is_causal=True a query may not attend to later positions", ignore="is_causal"),
    _m("the mask inverted (scores hidden where attention is allowed)",
       "combine_masks returns True where a query may attend: scores.masked_fill(~mask, "
       "float('-inf')); key_mask too is True for real tokens (nn.MultiheadAttention's masks "
       "mean the opposite)", mask_mode="inverted"),
    _m("the fill inverted: scores.masked_fill(mask, ...) hides the keys combine_masks allows",
       "combine_masks returns True where a query may attend: fill where it is False, "
       "scores.masked_fill(~mask, float('-inf'))", mask_mode="inverted fill"),
    _m("key_mask inverted", "key_mask is True for real tokens (qkv's convention; "
       "nn.MultiheadAttention uses the opposite)", invert_padding=True),
    _m("a bool mask added to the scores as 0/1", "adding a bool mask adds 1 where attention "
       "is allowed and 0 elsewhere: nothing is hidden; fill the scores with -inf where it is "
       "False: scores.masked_fill(~mask, float('-inf'))", mask_mode="added"),
    _m("masked scores set to 0 instead of -inf (masked_fill with 0, or scores * mask)",
       "a masked score must become -inf, so that its weight is exactly 0: exp(0) is not 0",
       mask_mode="multiply"),
    _m("the mask applied after the softmax",
       "mask the scores (-inf) before the softmax, so that the allowed weights sum to one",
       mask_mode="after"),
    _m(*CAUSAL_DIAGONAL_MASKED, causal_diag=-1),
    _m(*CAUSAL_FUTURE_ALLOWED, causal_diag=1),
    _m("key_mask broadcast along the queries ((B, 1, S, 1) instead of (B, 1, 1, S))",
       "key_mask (B, S) says which keys are real: key_mask[:, None, None, :] hides key "
       "columns for every head and query (or let combine_masks do it)", key_axis="queries"),
    _m("value defaults to query instead of key", "with key given and value omitted, "
       "value = key (value = key if value is None else value)", value_default="query"),
    _m("the weights not averaged over the heads",
       "with average_attn_weights=True (the default) return weights.mean(dim=-3), (B, L, S); "
       "the per-head (B, H, L, S) only when it is False", heads="kept"),
    _m("the weights averaged even with average_attn_weights=False",
       "return the per-head weights (B, H, L, S) when average_attn_weights=False",
       heads="always"),
    _m("the weights summed over the heads instead of averaged",
       "average the heads' weights (mean over dim 1): each row then still sums to 1",
       heads="sum"),
    _m("the weights averaged over the batch (dim 0) instead of the heads",
       "the weights are (B, H, L, S): average over the heads, dim=-3", heads="batch"),
    _m("the weights averaged over dim 1, the queries of unbatched (H, L, S) weights",
       "dim 1 is the heads only with a batch axis: average over dim=-3, the heads of both "
       "(B, H, L, S) and (H, L, S)", heads="dim1"),
    _m("the weights returned before masking",
       "return the weights of the masked scores, those that multiplied the values",
       heads="unmasked"),
]

MHA_ERROR_HINTS = [
    ("must have the same dtype", "pass device= and dtype= on to every nn.Linear your module "
     "creates"),
    ("without overflow", FILL_HINT),
    ("unexpected keyword argument 'key_mask'", _MASK_NAMES),
    ("unexpected keyword argument 'mask'", _MASK_NAMES),
    ("unexpected keyword argument", "keep the signature of qkv.MultiHeadAttention (the check "
     "passes kdim, vdim, device and dtype, and forward's keyword arguments)"),
    ("required positional argument", "keep the signature of qkv.MultiHeadAttention: forward's "
     "key and value default to None (key = query, value = key), __init__'s bias, kdim, vdim, "
     "dropout, device and dtype are keywords with defaults"),
    ("not enough values to unpack (expected 3, got 2)", "a 2-D query (L, D) is one "
     "unbatched sequence: add a batch axis (query[None], key_mask[None] too) and take it off "
     "the output (and the weights) at the end"),
    ("object has no attribute", "forward reads an attribute that __init__ never set (or "
     "spelled differently): set it there, e.g. self.head_dim = embed_dim // num_heads"),
]
