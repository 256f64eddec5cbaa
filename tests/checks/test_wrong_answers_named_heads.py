"""Wrong answers that got only "largest difference" (fixwrong14): the head split with its
two sizes swapped, a single projection left untransposed, and the temperature exercise's half
fix that keeps the printed 1/E. Each is written as a student would; the words are what the
message must now say."""

import itertools
import math

import pytest
import torch

from qkv import checks

from named import assert_named

import answers_multi_head as A


# ------------------------------------------------ the head split: reshape(B, L, head_dim, H)
def split_interleaved(t, B, L, H):
    return t.reshape(B, L, t.shape[-1] // H, H).permute(0, 3, 1, 2)  # (B, H, L, head_dim)


def split_swapped_transposed(t, B, L, H):
    return t.reshape(B, L, t.shape[-1] // H, H).transpose(1, 2)  # (B, head_dim, L, H)


def split_ok(t, B, L, H):
    return t.reshape(B, L, H, t.shape[-1] // H).transpose(1, 2)


def merge_interleaved(o, B, L, D):
    return o.permute(0, 2, 3, 1).reshape(B, L, D)  # (B, L, head_dim, H): the inverse slip


def merge_ok(o, B, L, D):
    return o.transpose(1, 2).reshape(B, L, D)


def mhsa(x, W_q, W_k, W_v, W_o, num_heads, split=split_ok, merge=merge_ok, plain=""):
    """The fixed function, with ``plain`` naming the projections left without .T."""
    B, L, D = x.shape
    head_dim = D // num_heads

    def proj(t, W, name):
        return t @ (W if name in plain else W.T)
    q, k, v = (split(proj(x, W, n), B, L, num_heads) for W, n in ((W_q, "q"), (W_k, "k"),
                                                                  (W_v, "v")))
    out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(head_dim), dim=-1) @ v
    return proj(merge(out, B, L, D), W_o, "o")


def _mhsa(**kw):
    return lambda *args: mhsa(*args, **kw)


def make_mha_split(split, merge=merge_ok):
    """A student's module whose forward splits (and merges) the heads inline."""
    base = A.make_mha()

    class MHA(base):
        def forward(self, query, key=None, value=None, key_mask=None, need_weights=False,
                    mask=None, average_attn_weights=True, is_causal=False):
            key = query if key is None else key
            value = key if value is None else value
            unbatched = query.dim() == 2
            if unbatched:
                query, key, value = query[None], key[None], value[None]
                key_mask = None if key_mask is None else key_mask[None]
            B, L, D = query.shape
            S, H = key.shape[1], self.num_heads
            q = split(self.q_proj(query), B, L, H)
            k, v = split(self.k_proj(key), B, S, H), split(self.v_proj(value), B, S, H)
            allowed = self.allowed(B, L, S, key_mask, mask, is_causal, query.device)
            w, _ = self.weights(q, k, allowed)
            out = self.out_proj(merge(w @ v, B, L, D))
            if need_weights and average_attn_weights:
                w = w.mean(1)
            if unbatched:
                out, w = out[0], w[0]
            return out, (w if need_weights else None)
    return MHA


# ------------------------------------------------ the temperature exercise's half fix
def temperature_half_fix_over_e(query, key, value, temperature=1.0):
    E = query.shape[-1]
    scores = query @ key.transpose(-2, -1) / (E * temperature)  # the printed / E kept
    e = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    return (e / e.sum(dim=-2, keepdim=True)) @ value  # the printed sum over dim=-2 kept


_PROJ = {"q": "x @ W_q", "k": "x @ W_k", "v": "x @ W_v", "o": "merged @ W_o"}

# name: (check, answer, words the message must hold)
NAMED = {
    "split_heads: reshape(B, L, head_dim, H).permute(0, 3, 1, 2)": (
        "check_split_heads", lambda x, H: split_interleaved(x, *x.shape[:2], H),
        "heads interleaved"),
    "merge_heads: permute(0, 2, 3, 1).reshape(B, L, D)": (
        "check_merge_heads", lambda o: merge_interleaved(o, o.shape[0], o.shape[2],
                                                         o.shape[1] * o.shape[3]),
        "heads interleaved"),
    "multi_head_self_attention: split as (B, L, head_dim, H)": (
        "check_multi_head_self_attention", _mhsa(split=split_interleaved),
        "heads split as (B, L, head_dim, H)"),
    "multi_head_self_attention: merged as (B, L, head_dim, H)": (
        "check_multi_head_self_attention", _mhsa(merge=merge_interleaved),
        "heads merged as (B, L, head_dim, H)"),
    "multi_head_self_attention: split and merged as (B, L, head_dim, H)": (
        "check_multi_head_self_attention", _mhsa(split=split_interleaved,
                                                 merge=merge_interleaved),
        "heads split and merged as (B, L, head_dim, H)"),
    "multi_head_self_attention: reshape(B, L, head_dim, H).transpose(1, 2)": (
        "check_multi_head_self_attention", _mhsa(split=split_swapped_transposed),
        "head_dim heads of width num_heads"),
    "MultiHeadAttention: split as (B, L, head_dim, H)": (
        "check_MultiHeadAttention", make_mha_split(split_interleaved),
        "heads split as (B, L, head_dim, H)"),
    "MultiHeadAttention: merged as (B, L, head_dim, H)": (
        "check_MultiHeadAttention", make_mha_split(split_ok, merge_interleaved),
        "heads merged as (B, L, head_dim, H)"),
    "MultiHeadAttention: split and merged as (B, L, head_dim, H)": (
        "check_MultiHeadAttention", make_mha_split(split_interleaved, merge_interleaved),
        "heads split and merged as (B, L, head_dim, H)"),
    "MultiHeadAttention: reshape(B, L, head_dim, H).transpose(1, 2)": (
        "check_MultiHeadAttention", make_mha_split(split_swapped_transposed),
        "head_dim heads of width num_heads"),
    "attention_with_temperature: the half fix, / E kept too": (
        "check_attention_with_temperature", temperature_half_fix_over_e,
        "the sums over the queries (dim=-2), the printed function's, kept, and the "
        "printed scale 1/E"),
}
# Each set of projections left without .T but all four (named "no projection transposed").
for n in (1, 2, 3):
    for left in itertools.combinations("qkvo", n):
        words = [_PROJ[p] for p in left]
        wrong = " and ".join([", ".join(words[:-1]), words[-1]] if n > 1 else words)
        NAMED[f"multi_head_self_attention: {wrong} without .T"] = (
            "check_multi_head_self_attention", _mhsa(plain="".join(left)), wrong + " instead")


@pytest.mark.parametrize("name", NAMED)
def test_the_slip_is_named(name):
    assert_named(*NAMED[name])


@pytest.mark.parametrize("check,answer", [
    ("check_multi_head_self_attention", _mhsa()),
    ("check_MultiHeadAttention", make_mha_split(split_ok)),
])
def test_the_right_answers_written_so_pass(check, answer):
    getattr(checks, check)(answer)
