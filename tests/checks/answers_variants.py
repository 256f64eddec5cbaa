"""Catalogues of student answers for chapter 9's checks (repeat_kv, grouped_query_attention,
causal_mask_bottom_right): wrong ones (each with the words its hint must contain) and right ones
written differently (each passes)."""

import math

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right


# ----------------------------------------------------------------------------- repeat_kv
def repeat_interleave(x, n_rep):
    return x.repeat_interleave(n_rep, dim=1)


def repeat_expand(x, n_rep):  # Llama's repeat_kv
    B, H, S, E = x.shape
    return x[:, :, None, :, :].expand(B, H, n_rep, S, E).reshape(B, H * n_rep, S, E)


def repeat_index(x, n_rep):
    heads = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x[:, heads]


def repeat_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_seq(x, n_rep):
    return x.repeat_interleave(n_rep, dim=2)


def repeat_unmerged(x, n_rep):
    B, H, S, E = x.shape
    return x[:, :, None].expand(B, H, n_rep, S, E)


def repeat_float32(x, n_rep):
    return x.float().repeat_interleave(n_rep, dim=1)


REPEAT_WRONG = {
    "tiled": (repeat_tiled, "wrong head grouping"),
    "sequence axis": (repeat_seq, "sequence axis"),
    "group axis left in": (repeat_unmerged, "group axis left in"),
    "float32 always": (repeat_float32, "dtype"),
}
REPEAT_RIGHT = {"repeat_interleave": repeat_interleave, "expand and reshape": repeat_expand,
                "index": repeat_index}


# ----------------------------------------------------------------------------- grouped_query_attention
def _attend(q, k, v, is_causal, scale, *, align=0, diag=0, fill=float("-inf")):
    L, S = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale
    if is_causal:
        allowed = torch.ones(L, S, dtype=torch.bool, device=q.device).tril(diag + align * (S - L))
        scores = scores.masked_fill(~allowed, fill)
    return torch.softmax(scores, dim=-1) @ v


def make_gqa(grouping="interleave", queries="all", scale_by="E", align=0, diag=0):
    def grouped_query_attention(query, key, value, is_causal=False, scale=None):
        Hq, Hkv = query.shape[1], key.shape[1]
        G = Hq // Hkv
        if scale is None and scale_by == "Hq":
            scale = 1.0 / math.sqrt(query.shape[1])
        if queries == "first":
            query = query[:, ::G]
            G = 1
        if grouping == "interleave":
            key, value = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
        else:
            key, value = key.repeat(1, G, 1, 1), value.repeat(1, G, 1, 1)
        return _attend(query, key, value, is_causal, scale, align=align, diag=diag)
    return grouped_query_attention


def gqa_grouped_view(query, key, value, is_causal=False, scale=None):
    B, Hq, L, E = query.shape
    Hkv = key.shape[1]
    q = query.reshape(B, Hkv, Hq // Hkv, L, E)
    out = _attend(q, key[:, :, None], value[:, :, None], is_causal, scale)
    return out.reshape(B, Hq, L, -1)


def gqa_loop(query, key, value, is_causal=False, scale=None):
    G = query.shape[1] // key.shape[1]
    heads = [_attend(query[:, h], key[:, h // G], value[:, h // G], is_causal, scale)
             for h in range(query.shape[1])]
    return torch.stack(heads, dim=1)


def gqa_with_sdpa(query, key, value, is_causal=False, scale=None):
    return F.scaled_dot_product_attention(query, key, value, is_causal=is_causal, scale=scale,
                                          enable_gqa=True)


GQA_WRONG = {
    "tiled kv heads": (make_gqa(grouping="tile"), "wrong head grouping"),
    "scale by Hq": (make_gqa(scale_by="Hq"), "1/sqrt(Hq)"),
    "queries shared": (make_gqa(queries="first"), "queries shared instead of keys"),
    "bottom-right causal": (make_gqa(align=1), "bottom right"),
    "causal diagonal masked": (make_gqa(diag=-1), "off by one"),
    "torch's SDPA": (gqa_with_sdpa, "scaled_dot_product_attention"),
    # This function takes no attn_mask: not "a bool mask added to the scores as 0/1".
    "is_causal ignored": (lambda query, key, value, is_causal=False, scale=None:
                          make_gqa()(query, key, value, False, scale), "is_causal ignored"),
}
GQA_RIGHT = {"repeat_interleave": make_gqa(), "grouped view": gqa_grouped_view, "loop over heads": gqa_loop}


# ----------------------------------------------------------------------------- causal_mask_bottom_right
def bottom_right_tril(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(S - L)


def bottom_right_arange(L, S=None, device=None):
    S = L if S is None else S
    rows = torch.arange(L, device=device)[:, None] + (S - L)
    return torch.arange(S, device=device)[None, :] <= rows


def bottom_right_flip(L, S=None, device=None):
    S = L if S is None else S
    # Counted from the last query and the last key, the mask is an upper triangle.
    return torch.ones(L, S, dtype=torch.bool, device=device).triu().flip(0, 1)


def top_left(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()


def shifted_minus(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(S - L - 1)


def shifted_plus(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(S - L + 1)


def flipped_sign(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(L - S)


def inverted(L, S=None, device=None):
    return ~bottom_right_tril(L, S, device)


def torch_lower_right(L, S=None, device=None):
    S = L if S is None else S
    return causal_lower_right(L, S)._materialize(device=device or torch.device("cpu"))


MASK_WRONG = {
    "top left": (top_left, "top left"),
    "diagonal masked": (shifted_minus, "own key is masked"),
    "one future key": (shifted_plus, "one future key"),
    "shifted the wrong way": (flipped_sign, "wrong way"),
    "inverted": (inverted, "inverted mask"),
    "torch's causal_lower_right": (torch_lower_right, "calls torch.nn.attention.bias.causal_lower_right"),
}
MASK_RIGHT = {"tril": bottom_right_tril, "arange comparison": bottom_right_arange,
              "flips": bottom_right_flip}


# ----------------------------------------------------------------------------- found by trying
# Mistakes a student made while trying the exercises (issue 13, item 5).
def repeat_view_of_expand(x, n_rep):
    B, H, S, E = x.shape
    return x[:, :, None].expand(B, H, n_rep, S, E).view(B, H * n_rep, S, E)


def repeat_stacked_last(x, n_rep):
    B, H, S, E = x.shape
    return torch.stack([x] * n_rep, dim=-1).reshape(B, H * n_rep, S, E)


def bottom_right_tril_flipped(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril().flip(0, 1)


REPEAT_WRONG.update({
    "view of an expanded tensor": (repeat_view_of_expand, "use .reshape"),
    "copies stacked on the last axis": (repeat_stacked_last, "the right values in the wrong places"),
})
MASK_WRONG["tril flipped both ways"] = (bottom_right_tril_flipped, "upper-triangular")
