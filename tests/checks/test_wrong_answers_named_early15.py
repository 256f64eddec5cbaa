"""Wrong answers of the wrong15 walk (assignments 02, 04, 05) that passed, or failed with only
"largest difference" or a message blaming another cause: each is now named for what it is.

Each is written as the student wrote it, unless said otherwise; the words are what the message
must say (and ``not_words`` what it must no longer say).
"""

import math

import pytest
import torch
from torch import nn

from qkv import combine_masks, merge_heads, split_heads
from qkv.checks import check_question

from named import assert_named


def dot_product_variance_all_pairs(d_k, n_samples, generator):
    """``(q @ k.T).var()``, computed without its n x n matrix (the same number to float32's
    rounding, in a fraction of the time and memory): the variance of all n^2 products."""
    q = torch.randn(n_samples, d_k, generator=generator, device=generator.device).double()
    k = torch.randn(n_samples, d_k, generator=generator, device=generator.device).double()
    count = n_samples ** 2
    mean = (q.sum(0) @ k.sum(0)) / count
    return ((((q.T @ q) * (k.T @ k)).sum() - count * mean ** 2) / (count - 1)).item()


def test_variance_of_every_query_against_every_key_is_named():
    assert_named("check_dot_product_variance", dot_product_variance_all_pairs,
                 "every query against every key")


# --------------------------------------------------------------------------- softmax (02)


def softmax_max_over_last_axis(x, dim=-1):
    e = (x - x.amax(dim=-1, keepdim=True)).exp()  # the max over -1, the sum over dim
    return e / e.sum(dim=dim, keepdim=True)


def test_softmax_with_its_max_over_the_last_axis_is_named():
    assert_named("check_softmax", softmax_max_over_last_axis, "max taken over the last axis")


# --------------------------------------------------------------------------- top_k_lookup (02)


def top_k_lookup_k_plus_one(query, keys, values, k):
    s = query @ keys.transpose(-2, -1)
    kth = s.topk(min(k + 1, s.shape[-1]), dim=-1).values[..., -1:]
    return torch.softmax(s.masked_fill(s < kth, float("-inf")), -1) @ values


def top_k_lookup_keep_inverted(query, keys, values, k):
    s = query @ keys.transpose(-2, -1)
    kth = s.topk(k, dim=-1).values[..., -1:]
    return torch.softmax(s.masked_fill(s >= kth, float("-inf")), -1) @ values


def test_top_k_lookup_keeping_k_plus_one_keys_is_named():
    assert_named("check_top_k_lookup", top_k_lookup_k_plus_one, "k + 1 keys kept")


def test_top_k_lookup_with_the_keep_mask_inverted_is_named():
    assert_named("check_top_k_lookup", top_k_lookup_keep_inverted, "keep mask inverted")


# --------------------------------------------------------------------------- sparsemax_lookup (02)


def sparsemax_lookup_tau_at_k(query, keys, values, temperature=1.0):
    z = query @ keys.transpose(-2, -1) / temperature
    srt = z.sort(-1, descending=True).values
    cum = srt.cumsum(-1)
    j = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    k = (1 + j * srt > cum).sum(-1, keepdim=True)
    tau = (cum.gather(-1, k.clamp_max(z.shape[-1] - 1)) - 1) / k  # index k, not k - 1
    w = (z - tau).clamp_min(0)
    return w @ values, w


def test_sparsemax_with_tau_read_at_index_k_is_named():
    assert_named("check_sparsemax_lookup", sparsemax_lookup_tau_at_k,
                 "tau read at index k instead of k - 1", not_words="rows do not sum")


# --------------------------------------------------------------------------- attention_with_temperature (04)


def attention_with_temperature_max_over_queries(query, key, value, temperature=1.0):
    s = query @ key.transpose(-2, -1) / (math.sqrt(query.shape[-1]) * temperature)
    s = s - s.amax(dim=-2, keepdim=True)  # the max on the printed (wrong) axis
    return (s.exp() / s.exp().sum(-1, keepdim=True)) @ value


def test_temperature_attention_with_its_max_over_the_queries_is_named():
    assert_named("check_attention_with_temperature", attention_with_temperature_max_over_queries,
                 "maximum subtracted over the queries (dim=-2)")


# --------------------------------------------------------------------------- assignment 5


def talking_heads_post_mix_first(query, key, value, pre_mix, post_mix):
    s = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    s = torch.einsum("jh,bhls->bjls", pre_mix, s)
    s = torch.einsum("jh,bhls->bjls", post_mix, s)  # post_mix before the softmax
    return torch.softmax(s, -1) @ value


def _head_difference(share, generator, *, queries_too=False, half=0.5):
    x = torch.randn(16, 32, generator=generator)
    W_q = torch.randn(32, 32, generator=generator) / math.sqrt(32)
    W_k = torch.randn(32, 32, generator=generator) / math.sqrt(32)
    q, k = split_heads((x @ W_q.T)[None], 4)[0], split_heads((x @ W_k.T)[None], 4)[0]
    if share in ("key", "both"):
        k = k[:1].expand_as(k)
    if share == "both" or (share == "key" and queries_too):
        q = q[:1].expand_as(q)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), -1)
    return torch.stack([half * (w[a] - w[b]).abs().sum(-1).mean()
                        for a in range(4) for b in range(a + 1, 4)]).mean().item()


def head_difference_without_half(share, generator):
    return _head_difference(share, generator, half=1.0)


def head_difference_queries_shared_for_key(share, generator):
    return _head_difference(share, generator, queries_too=True)


def test_talking_heads_with_post_mix_before_the_softmax_is_named():
    assert_named("check_talking_heads_attention", talking_heads_post_mix_first,
                 "post_mix applied before the softmax")


def test_head_difference_without_the_half_is_named():
    assert_named("check_head_difference", head_difference_without_half, "without its 1/2")


def test_head_difference_sharing_the_queries_too_for_key_is_named_not_an_empty_selection():
    assert_named("check_head_difference", head_difference_queries_shared_for_key,
                 "shares the queries too", not_words="always empty")


# --------------------------------------------------------------------------- MultiHeadAttention (05)


class MultiHeadAttentionFillInverted(nn.Module):
    """Right but for ``scores.masked_fill(mask, ...)`` on the mask combine_masks returns."""

    def __init__(self, embed_dim, num_heads, bias=True, kdim=None, vdim=None, dropout=0.0,
                 device=None, dtype=None):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        f = {"device": device, "dtype": dtype}
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **f)
        self.k_proj = nn.Linear(kdim or embed_dim, embed_dim, bias=bias, **f)
        self.v_proj = nn.Linear(vdim or embed_dim, embed_dim, bias=bias, **f)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **f)

    def forward(self, query, key=None, value=None, key_mask=None, need_weights=False, mask=None,
                average_attn_weights=True, is_causal=False):
        key = query if key is None else key
        value = key if value is None else value
        batched = query.dim() == 3
        if not batched:
            query, key, value = (t.unsqueeze(0) for t in (query, key, value))
            key_mask = None if key_mask is None else key_mask.unsqueeze(0)
        B, L, S = query.shape[0], query.shape[1], key.shape[1]
        mask = combine_masks(mask, key_mask, is_causal, B, L, S, query)
        q, k, v = (split_heads(p(t), self.num_heads) for p, t in
                   ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value)))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))  # the fill inverted
        w = scores.softmax(-1)
        out = self.out_proj(merge_heads(w @ v))
        if not batched:
            out, w = out[0], w[0]
        return (out, None) if not need_weights else (out, w.mean(-3) if average_attn_weights
                                                     else w)


def test_multi_head_attention_with_the_fill_inverted_names_the_fill_not_key_mask():
    assert_named("check_MultiHeadAttention", MultiHeadAttentionFillInverted,
                 "masked_fill(~mask", not_words="key_mask inverted")


# --------------------------------------------------------------------------- questions (05)


def test_multi_head_q1_answered_in_millions_is_told_so(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # the first answer is recorded in the working directory
    with pytest.raises(AssertionError, match="that is in millions"):
        check_question("multi_head_q1", 1.05, embed_dim=512)


# --------------------------------------------------------------------------- draw order (02, 04)


def lookup_entropy_keys_first(temperature, generator):
    k = torch.randn(32, 8, generator=generator)
    q = torch.randn(16, 8, generator=generator)
    w = torch.softmax(q @ k.T / temperature, dim=-1)
    return -(w * w.clamp_min(1e-30).log()).sum(-1).mean().item()


def max_weight_keys_first(d_k, scaled, generator):
    k = torch.randn(32, d_k, generator=generator)
    q = torch.randn(32, d_k, generator=generator)
    s = q @ k.T / (math.sqrt(d_k) if scaled else 1)
    return torch.softmax(s, -1).max(-1).values.mean().item()


def test_lookup_entropy_with_the_keys_drawn_first_is_named():
    assert_named("check_lookup_entropy", lookup_entropy_keys_first, "keys drawn before")


def test_max_weight_with_the_keys_drawn_first_is_named():
    assert_named("check_max_weight", max_weight_keys_first, "keys drawn before")
