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


def split_sizes_swapped(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, L, D // num_heads, num_heads).transpose(1, 2)


def split_width_zero(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, L, num_heads, num_heads // D).transpose(1, 2)


def split_float_width(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, L, num_heads, D / num_heads).transpose(1, 2)


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


def merge_sum(x):
    return x.sum(1)


def merge_cat_positions(x):
    return torch.cat(x.unbind(1), dim=1)


def merge_heads_first(x):
    B, H, L, Dh = x.shape
    return x.reshape(B, H, L * Dh)


def merge_unpacked_wrong(x):
    B, L, H, Dh = x.shape
    return x.transpose(1, 2).reshape(B, L, H * Dh)


def merge_not_joined(x):
    return x.transpose(1, 2)


def merge_flatten_too_much(x):
    return x.transpose(1, 2).flatten(1)


SPLIT_WRONG = {
    "reshape without transpose": (split_reshape_only, "reshape without transpose"),
    "transposing first": (split_transpose_first, "transposing before the reshape"),
    "transposing first, then view": (split_transpose_first_view, "transposing before the reshape"),
    "reshape(B, L, D // H, H)": (split_sizes_swapped, "head width swapped"),
    "head width H // D": (split_width_zero, "num_heads // D"),
    "head width D / H (a float)": (split_float_width, "use D // H"),
}
SPLIT_RIGHT = {"view + permute": split_ok, "unflatten": split_unflatten}
MERGE_WRONG = {
    "reshape without transpose": (merge_reshape_only, "reshape without transpose"),
    "view on a non-contiguous tensor": (merge_view, "contiguous"),
    "last two dims swapped": (merge_last_two_swapped, "the last two axes swapped"),
    "heads summed": (merge_sum, "heads summed"),
    "cat on dim 1": (merge_cat_positions, "along the positions"),
    "reshape(B, H, L * Dh)": (merge_heads_first, "heads kept in front"),
    "B, L, H, Dh = x.shape": (merge_unpacked_wrong, "unpacked in the wrong order"),
    # Not catalogued: the generic describer says which axes to join or split.
    "transpose without reshape": (merge_not_joined, "axes 2, 3 (sizes 2, 4) should be one axis"),
    "flatten(1)": (merge_flatten_too_much, "joined too many"),
}
MERGE_RIGHT = {"transpose + reshape": merge_ok, "cat of heads": merge_cat}


# ----------------------------------------------------------------------------- MultiHeadAttention
def make_mha(**o):
    """A student's module; each option of ``o`` (all off: a right answer) makes one mistake
    or writes a right answer differently."""
    o = {"scale_by": "head", "fill": float("-inf"), "key_proj": "k_proj", "value_proj": "v_proj",
         "dropout": "eval", "heads": "mean", "sdim": -1, "mask_op": "fill", "diag": 0, **o}

    class MHA(nn.Module):
        def __init__(self, embed_dim, num_heads, bias=True, kdim=None, vdim=None, dropout=0.0,
                     device=None, dtype=None):
            super().__init__()
            f = {"device": device, "dtype": dtype}
            bias = bias and not o.get("no_bias")
            self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
            self.head_dim = embed_dim // num_heads
            self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **f)
            kwidth = embed_dim if o.get("k_width") == "embed" else kdim or embed_dim
            self.k_proj = nn.Linear(kwidth, embed_dim, bias=bias, **f)
            self.v_proj = nn.Linear(vdim or embed_dim, embed_dim, bias=bias, **f)
            self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **f)
            self.drop = nn.Dropout(dropout)

        def forward(self, query, key=None, value=None, key_mask=None, need_weights=False,
                    mask=None, average_attn_weights=True, is_causal=False):
            key = query if key is None else key
            value = (query if o.get("value_is_query") else key) if value is None else value
            if o.get("fresh_layer"):  # new random weights at every call
                self.q_proj = nn.Linear(self.embed_dim, self.embed_dim, dtype=query.dtype)
            unbatched = query.dim() == 2 and not o.get("no_unbatched")
            if unbatched:
                query, key, value = query[None], key[None], value[None]
                if key_mask is not None and not o.get("unbatched_key_mask"):
                    key_mask = key_mask[None]  # (S,) -> (1, S)
            B, L, D = query.shape
            S, H = key.shape[1], self.num_heads
            q = self.q_proj(query).view(B, L, H, -1).transpose(1, 2)
            k = getattr(self, o["key_proj"])(key).view(B, S, H, -1).transpose(1, 2)
            v = getattr(self, o["value_proj"])(value).view(B, S, H, -1).transpose(1, 2)
            allowed = self.allowed(B, L, S, key_mask, mask, is_causal, query.device)
            if o.get("builtin_attention"):
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
                w = raw = None
            else:
                w, raw = self.weights(q, k, allowed)
                out = w @ v
            out = out.transpose(1, 2).reshape(B, L, D)
            if not o.get("no_out_proj"):
                out = self.out_proj(out)
            if o.get("unmasked_weights"):
                w = raw
            per_head = w
            if need_weights and (average_attn_weights or o["heads"] == "always"):
                w = {"mean": w.mean(1), "always": w.mean(1), "sum": w.sum(1), "kept": w,
                     "batch": w.mean(0), "dim1": w.mean(1)}[o["heads"]]
            if unbatched:
                out = out[0]
                w = w[0] if w is not None else None
                if o["heads"] == "dim1" and need_weights and average_attn_weights:
                    w = per_head[0].mean(1)  # unbatched (H, L, S): dim 1 is the queries
            if o.get("swapped"):
                return (w if need_weights else None), out
            return out, (w if need_weights or o.get("weights_always") else None)

        def allowed(self, B, L, S, key_mask, mask, is_causal, device):
            allowed = torch.ones(B, 1, L, S, dtype=torch.bool, device=device)
            if is_causal and o.get("ignore") != "is_causal":
                causal = torch.ones(L, S, dtype=torch.bool, device=device).tril(o["diag"])
                allowed = allowed & causal
            if mask is not None and o.get("ignore") != "mask":
                allowed = allowed & mask
            if key_mask is not None and o.get("ignore") != "key_mask":
                pad = (key_mask[:, None, :, None] if o.get("key_on_queries")
                       else key_mask[:, None, None, :])
                allowed = allowed & pad
            return allowed

        def weights(self, q, k, allowed):
            d = {"head": math.sqrt(self.head_dim), "embed": math.sqrt(self.embed_dim),
                 "head_dim": self.head_dim, "times": 1 / math.sqrt(self.head_dim)}[o["scale_by"]]
            if o.get("einsum"):
                s = torch.einsum("bhle,bhse->bhls", q, k) / d
            else:
                s = q @ k.transpose(-2, -1) / d
            raw = s.softmax(-1)
            fill = torch.finfo(s.dtype).min if o["fill"] == "finfo" else o["fill"]
            if o["mask_op"] == "fill":
                s = s.masked_fill(~allowed, fill)
            elif o["mask_op"] == "inverted":
                s = s.masked_fill(allowed, fill)
            elif o["mask_op"] == "added":
                s = s + allowed
            elif o["mask_op"] == "zero":
                s = s.masked_fill(~allowed, 0.0)
            w = s.softmax(o["sdim"])
            if o["mask_op"] == "after":
                w = w.masked_fill(~allowed, 0.0)
            if o["dropout"] == "module":
                w = self.drop(w)
            elif o["dropout"] == "always":
                w = F.dropout(w, self.dropout)  # training defaults to True, even in eval
            elif o["dropout"] == "fixed half":  # its own rate, on in eval: random outputs
                w = F.dropout(w, 0.5)
            else:
                w = F.dropout(w, self.dropout, training=self.training)
            return w, raw
    return MHA


class MHASubclass(qkv.MultiHeadAttention):
    """Delegates to the reference by inheriting its forward."""


class MHATorchNames(make_mha()):
    """PyTorch's names for the masks (with the course's meaning)."""

    def forward(self, query, key=None, value=None, key_padding_mask=None, need_weights=False,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        return super().forward(query, key, value, key_padding_mask, need_weights, attn_mask,
                               average_attn_weights, is_causal)


MHA_WRONG = {
    "no output projection": (make_mha(no_out_proj=True), "no output projection"),
    "weights returned with need_weights=False": (make_mha(weights_always=True),
                                                 "must return (output, None)"),
    "scaled by embed_dim": (make_mha(scale_by="embed"), "embed_dim instead of head_dim"),
    "F.scaled_dot_product_attention inside": (make_mha(builtin_attention=True),
                                              "torch.nn.functional.scaled_dot_product_attention"),
    "inherits the reference": (MHASubclass, "qkv.MultiHeadAttention"),
    "scaled by 1/head_dim": (make_mha(scale_by="head_dim"), "1/head_dim instead of 1/sqrt"),
    "multiplied by sqrt(head_dim)": (make_mha(scale_by="times"), "multiplied by sqrt(head_dim)"),
    "V projected with k_proj": (make_mha(value_proj="k_proj"), "value projected with k_proj"),
    "K projected with q_proj": (make_mha(key_proj="q_proj"), "key projected with q_proj"),
    "dropout left on in eval": (make_mha(dropout="always"), "dropout left on in eval mode"),
    "dropout of its own left on in eval": (make_mha(dropout="fixed half"),
                                           "gave different outputs: dropout is still on"),
    "k_proj as wide as embed_dim": (make_mha(k_width="embed"), "self.k_proj.weight has shape"),
    # The weight-shape message's hint says where the width comes from.
    "k_proj as wide as embed_dim (its hint)": (make_mha(k_width="embed"),
                                               "k_proj = nn.Linear(kdim, embed_dim)"),
    "dropout of its own left on in eval (its hint)": (make_mha(dropout="fixed half"),
                                                      "F.dropout needs training=self.training"),
    "-1e9 fill (overflows in float16)": (make_mha(fill=-1e9), "a finite fill like -1e9"),
    "the (L, S) mask ignored": (make_mha(ignore="mask"), "the mask ignored"),
    "key_mask ignored": (make_mha(ignore="key_mask"), "key_mask ignored"),
    "is_causal ignored": (make_mha(ignore="is_causal"), "is_causal ignored"),
    "weights not averaged": (make_mha(heads="kept"), "not averaged over the heads"),
    "weights summed over heads": (make_mha(heads="sum"), "summed over the heads"),
    "weights always averaged": (make_mha(heads="always"), "average_attn_weights=False"),
    "weights averaged over the batch": (make_mha(heads="batch"), "over the batch"),
    # Told "the scores that go into the softmax are wrong".
    "weights averaged over dim 1 after unbatching": (make_mha(heads="dim1"),
                                                     "the queries of unbatched (H, L, S)"),
    "weights returned before masking": (make_mha(unmasked_weights=True), "before masking"),
    "softmax over the queries": (make_mha(sdim=-2), "softmax over the queries"),
    "softmax over the heads": (make_mha(sdim=1), "softmax over the heads"),
    "masked_fill(mask, -inf)": (make_mha(mask_op="inverted"), "the mask inverted"),
    "bool mask added": (make_mha(mask_op="added"), "added to the scores as 0/1"),
    "masked scores set to 0": (make_mha(mask_op="zero"), "set to 0 instead of -inf"),
    "mask applied after the softmax": (make_mha(mask_op="after"), "after the softmax"),
    "causal tril(-1)": (make_mha(diag=-1), "the diagonal is masked"),
    "key_mask on the query axis": (make_mha(key_on_queries=True), "along the queries"),
    # Its view(B, S, H, -1) raises before the values differ: the case's label says it.
    "value defaults to query": (make_mha(value_is_query=True), "value omitted (value defaults "
                                                               "to key)"),
    "Linear layers without bias": (make_mha(no_bias=True), "q_proj has no bias"),
    "a new q_proj in forward": (make_mha(fresh_layer=True), "replaced or changed self.q_proj"),
    "(weights, output) returned": (make_mha(swapped=True), "return (output, weights)"),
    "PyTorch's mask names": (MHATorchNames, "key_mask= (True = a real token)"),
    "2-D query not handled": (make_mha(no_unbatched=True), "unbatched sequence"),
    "an unbatched query's key_mask left (S,)": (make_mha(unbatched_key_mask=True),
                                               "with key_mask (S,)"),
}
MHA_RIGHT = {
    "matmul": make_mha(),
    "einsum": make_mha(einsum=True),
    "nn.Dropout module": make_mha(dropout="module"),
    "finfo.min fill of the scores' dtype": make_mha(fill="finfo"),
}
