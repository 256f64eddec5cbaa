"""Wrong answers a student walk found named as another mistake, or named only by "largest
difference": each is now named for what it is.

Each is written as the student wrote it; the words are what the message must say (and, where
the walk saw a wrong name, ``not_words`` what it must no longer say).
"""

import math

import pytest
import torch

from qkv import checks
from qkv.checks import CheckFailed

from named import assert_named

import answers_beyond as a
import answers_capstone as capstone


def temperature_no_keepdim(query, key, value, temperature=1.0):
    s = query @ key.transpose(-2, -1) / (math.sqrt(query.shape[-1]) * temperature)
    e = (s - s.amax(dim=-1, keepdim=True)).exp()
    return (e / e.sum(dim=-1)) @ value


def temperature_sum_over_queries(query, key, value, temperature=1.0):
    s = query @ key.transpose(-2, -1) / (math.sqrt(query.shape[-1]) * temperature)
    e = (s - s.amax(dim=-1, keepdim=True)).exp()
    return (e / e.sum(dim=-2, keepdim=True)) @ value  # the printed sum kept


def temperature_ignored(query, key, value, temperature=1.0):
    return a.attention_with_temperature(query, key, value)


def entropy_over_queries(temperature, generator):
    q, k = torch.randn(16, 8, generator=generator), torch.randn(32, 8, generator=generator)
    w = torch.softmax(q @ k.T / temperature, dim=0)
    return -(w * w.clamp_min(1e-30).log()).sum(dim=-1).mean().item()


def entropy_no_sign(temperature, generator):
    return -a.lookup_entropy(temperature, generator)


def _entropy_terms(temperature, generator):
    q, k = torch.randn(16, 8, generator=generator), torch.randn(32, 8, generator=generator)
    w = torch.softmax(q @ k.T / temperature, dim=-1)
    return -(w * w.clamp_min(1e-30).log())


def entropy_first_query(temperature, generator):
    return _entropy_terms(temperature, generator)[0].sum().item()


def entropy_mean_over_all(temperature, generator):
    return _entropy_terms(temperature, generator).mean().item()


def entropy_sum_over_all(temperature, generator):
    return _entropy_terms(temperature, generator).sum().item()


def _max_weight_of(take):
    def max_weight(d_k, scaled, generator):
        q, k = torch.randn(32, d_k, generator=generator), torch.randn(32, d_k, generator=generator)
        return take(torch.softmax(q @ k.T / (math.sqrt(d_k) if scaled else 1.0), -1)).item()
    return max_weight


def variance_rounded(d_k, n_samples, generator):
    q = torch.randn(n_samples, d_k, generator=generator)
    k = torch.randn(n_samples, d_k, generator=generator)
    return round((q * k).sum(dim=-1).var().item())


def entropy_rounded(temperature, generator):
    return round(a.lookup_entropy(temperature, generator), 1)


def max_weight_median(d_k, scaled, generator):
    q, k = torch.randn(32, d_k, generator=generator), torch.randn(32, d_k, generator=generator)
    s = q @ k.T / (math.sqrt(d_k) if scaled else 1.0)
    return torch.softmax(s, -1).max(-1).values.median().item()


def padded_causal_by_sqrt_s(query, key, value, lengths):
    L, S = query.shape[-2], key.shape[-2]
    allowed = (torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
               & (torch.arange(S, device=query.device)[None, :] < lengths[:, None])[:, None, None])
    s = query @ key.transpose(-2, -1) / math.sqrt(S)
    return torch.softmax(s.masked_fill(~allowed, float("-inf")), -1) @ value


def dilated_first_batch_only(window, dilation):
    def mask_mod(b, h, q_idx, kv_idx):
        gap = q_idx - kv_idx
        return (gap >= 0) & (gap < window * dilation) & (gap % dilation == 0) & (b == 0)
    return mask_mod


def top_k_fill_zero(query, keys, values, k):
    s = query @ keys.transpose(-2, -1)
    kth = s.topk(k, dim=-1).values[..., -1:]
    return torch.softmax(s.masked_fill(s < kth, 0.0), -1) @ values


def top_k_kth_smallest(query, keys, values, k):
    s = query @ keys.transpose(-2, -1)
    kth = s.kthvalue(k, dim=-1, keepdim=True).values  # the k-th smallest
    return torch.softmax(s.masked_fill(s < kth, float("-inf")), -1) @ values


def top_k_scaled(query, keys, values, k):
    return a.top_k_lookup(query / math.sqrt(query.shape[-1]), keys, values, k)


def top_k_weights(query, keys, values, k):
    s = query @ keys.transpose(-2, -1)
    return torch.softmax(s.masked_fill(s < s.topk(k, dim=-1).values[..., -1:], float("-inf")), -1)


def bahdanau_mask_inverted(s, keys, W_q, W_k, v_a, lengths):
    scores = torch.tanh((s @ W_q.T)[:, None, :] + keys @ W_k.T) @ v_a
    real = torch.arange(keys.shape[1], device=keys.device)[None, :] < lengths[:, None]
    return torch.softmax(scores.masked_fill(real, float("-inf")), -1)


def no_self_zeroed_after(x, W_q, W_k, W_v):
    q, k, v = x @ W_q.T, x @ W_k.T, x @ W_v.T
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)
    return w.masked_fill(torch.eye(x.shape[-2], dtype=torch.bool, device=x.device), 0.0) @ v


def mhsa(x, W_q, W_k, W_v, W_o, num_heads, dim=-1, out_t=True, in_t=True, scale=None):
    B, L, D = x.shape

    def split(W):
        return (x @ (W.T if in_t else W)).view(B, L, num_heads, D // num_heads).transpose(1, 2)
    q, k, v = split(W_q), split(W_k), split(W_v)
    by = scale(D, num_heads) if scale else math.sqrt(D // num_heads)
    o = torch.softmax(q @ k.transpose(-2, -1) / by, dim) @ v
    return o.transpose(1, 2).reshape(B, L, D) @ (W_o.T if out_t else W_o)


def self_attention(x, W_q, W_k, W_v, keys_by_q=False, weights_t=False):
    q, k, v = x @ W_q.T, x @ (W_q if keys_by_q else W_k).T, x @ W_v.T
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)
    return (w.transpose(-2, -1) if weights_t else w) @ v


def masked_scores(scores, attn_mask=None, is_causal=False, float_mode="add"):
    if is_causal and attn_mask is not None:
        raise ValueError("pass either attn_mask or is_causal=True, not both")
    if is_causal:
        L, S = scores.shape[-2:]
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=scores.device).tril()
    if attn_mask is None:
        return scores
    if attn_mask.dtype == torch.bool or float_mode == "as bool":
        return scores.masked_fill(~attn_mask, float("-inf"))
    if float_mode == "negative":
        return scores.masked_fill(attn_mask < 0, float("-inf"))
    return scores + attn_mask


def overflow_spread_squared(spread, generator):
    return a.fp16_overflow_rate(spread ** 2, generator)


def overflow_spread_sqrt(spread, generator):
    return a.fp16_overflow_rate(math.sqrt(spread), generator)


def overflow_rows_counted(spread, generator):
    x = (torch.randn(256, 64, generator=generator) * spread).half()
    w = x.exp() / x.exp().sum(-1, keepdim=True)
    return (~torch.isfinite(w)).any(-1).sum().item()


def overflow_percent(spread, generator):
    return 100 * a.fp16_overflow_rate(spread, generator)


def overflow_of_elements(spread, generator):
    x = (torch.randn(256, 64, generator=generator) * spread).half()
    w = x.exp() / x.exp().sum(-1, keepdim=True)
    return (~torch.isfinite(w)).float().mean().item()


def kv_values_from_keys(query, key, value, k_cache=None, v_cache=None, scale=None):
    if k_cache is not None:
        key, value = torch.cat([k_cache, key], -2), torch.cat([v_cache, key], -2)
    L, S = query.shape[-2], key.shape[-2]
    s = query @ key.transpose(-2, -1) * (query.shape[-1] ** -0.5 if scale is None else scale)
    s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=query.device).tril(S - L),
                      float("-inf"))
    return torch.softmax(s, -1) @ value, key, value


def backward_causal_fill_zero(query, key, value, out, lse, grad_out, is_causal=False,
                              scale=None):
    c = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    s = c * (query @ key.transpose(-2, -1))
    if is_causal:
        L, S = s.shape[-2:]
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=s.device).tril(), 0.0)
    p = torch.exp(s - lse[..., None])
    dp = grad_out @ value.transpose(-2, -1)
    ds = p * (dp - (grad_out * out).sum(-1, keepdim=True))
    return c * (ds @ key), c * (ds.transpose(-2, -1) @ query), p.transpose(-2, -1) @ grad_out


def linear_causal_triu(query, key, value, is_causal=False):
    sim = (torch.nn.functional.elu(query) + 1) @ (torch.nn.functional.elu(key) + 1).transpose(
        -2, -1)
    sim = sim.triu() if is_causal else sim
    return sim / (sim.sum(-1, keepdim=True) + 1e-6) @ value


def self_attention_dropout(x, W_q, W_k, W_v):
    q, k, v = x @ W_q.T, x @ W_k.T, x @ W_v.T
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)
    return torch.nn.functional.dropout(w, 0.1) @ v  # training=True is F.dropout's default


def sdpa_dropout(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    L, S = query.shape[-2], key.shape[-2]
    s = query @ key.transpose(-2, -1) * (query.shape[-1] ** -0.5 if scale is None else scale)
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else s + attn_mask
    return torch.nn.functional.dropout(torch.softmax(s, -1), p=0.1) @ value


def softmax_eps(x, dim=-1):
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / (e.sum(dim=dim, keepdim=True) + 1e-6)


def soft_lookup_sqrt_temperature(query, keys, values, temperature=1.0):
    w = torch.softmax(query @ keys.transpose(-2, -1) / math.sqrt(temperature), -1)
    return w @ values, w


def linear_no_eps(query, key, value, is_causal=False):
    f = torch.nn.functional
    sim = (f.elu(query) + 1) @ (f.elu(key) + 1).transpose(-2, -1)
    sim = sim.tril() if is_causal else sim
    return sim / sim.sum(-1, keepdim=True) @ value


def no_self_only_self(x, W_q, W_k, W_v):
    q, k, v = x @ W_q.T, x @ W_k.T, x @ W_v.T
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = ~torch.eye(x.shape[-2], dtype=torch.bool, device=x.device)
    return torch.softmax(s.masked_fill(allowed, float("-inf")), -1) @ v  # fills where allowed


def padded_causal_queries_axis(query, key, value, lengths):
    L, S = query.shape[-2], key.shape[-2]
    causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    real = torch.arange(S, device=query.device)[None, :] < lengths[:, None]
    allowed = causal & real[:, None, :, None]  # over the queries, not the keys
    s = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    return torch.softmax(s.masked_fill(~allowed, float("-inf")), -1) @ value


def bahdanau_from_one(s, keys, W_q, W_k, v_a, lengths):
    scores = torch.tanh((s @ W_q.T)[:, None, :] + keys @ W_k.T) @ v_a
    real = torch.arange(1, keys.shape[1] + 1, device=keys.device)[None, :] < lengths[:, None]
    return torch.softmax(scores.masked_fill(~real, float("-inf")), dim=-1)


def duplicate_with_diagonal(weights, tokens):
    T = tokens.shape[1]
    earlier = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()  # not tril(-1)
    same = (tokens[:, :, None] == tokens[:, None, :]) & earlier
    on = (weights * same[:, None].to(weights.dtype)).sum(-1)
    has = same.any(-1)[:, None].to(weights.dtype)
    return (on * has).sum((0, 2)) / has.sum((0, 2))


def cross_transpose_1_2(x, context, W_q, W_k, W_v):
    q, k, v = x @ W_q.T, context @ W_k.T, context @ W_v.T
    return torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]), -1) @ v


def temperature_without_sqrt_e(query, key, value, temperature=1.0):
    return torch.softmax(query @ key.transpose(-2, -1) / temperature, -1) @ value


def top_k_beyond(query, keys, values, k):
    scores = query @ keys.transpose(-2, -1)
    below = scores.topk(k + 1, dim=-1).values[..., -1:]  # the (k+1)-th best: none at k = S
    return torch.softmax(scores.masked_fill(scores <= below, float("-inf")), -1) @ values


def attention_forward_rope_after_cat(x, params, num_heads, num_kv_heads, k_cache=None,
                                     v_cache=None):
    from qkv import apply_rope, merge_heads, repeat_kv, split_heads
    q = split_heads(x @ params["q_proj.weight"].T, num_heads)
    k = split_heads(x @ params["k_proj.weight"].T, num_kv_heads)
    v = split_heads(x @ params["v_proj.weight"].T, num_kv_heads)
    P = 0 if k_cache is None else k_cache.shape[-2]
    if k_cache is not None:
        k, v = torch.cat([k_cache, k], dim=-2), torch.cat([v_cache, v], dim=-2)
    q, k = apply_rope(q, offset=P), apply_rope(k)  # every key rotated: the cached ones again
    G = num_heads // num_kv_heads
    L, S = q.shape[-2], k.shape[-2]
    s = q @ repeat_kv(k, G).transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.ones(L, S, dtype=torch.bool, device=x.device).tril(S - L)
    w = torch.softmax(s.masked_fill(~allowed, float("-inf")), -1)
    return merge_heads(w @ repeat_kv(v, G)) @ params["out_proj.weight"].T, k, v


def max_weight_flag_inverted(d_k, scaled, generator):
    q, k = torch.randn(32, d_k, generator=generator), torch.randn(32, d_k, generator=generator)
    s = q @ k.T
    if not scaled:
        s = s / math.sqrt(d_k)
    return torch.softmax(s, -1).max(-1).values.mean().item()


def head_difference_model_width(share, generator):
    from qkv import split_heads
    x = torch.randn(16, 32, generator=generator)
    W_q = torch.randn(32, 32, generator=generator) / math.sqrt(32)
    W_k = torch.randn(32, 32, generator=generator) / math.sqrt(32)
    q, k = split_heads((x @ W_q.T)[None], 4)[0], split_heads((x @ W_k.T)[None], 4)[0]
    if share in ("key", "both"):
        k = k[:1].expand_as(k)
    if share == "both":
        q = q[:1].expand_as(q)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(32), -1)  # the model's width
    return torch.stack([0.5 * (w[i] - w[j]).abs().sum(-1).mean()
                        for i in range(4) for j in range(i + 1, 4)]).mean().item()


def alibi_far_ahead(head, generator):
    import qkv
    q, k = torch.randn(64, 16, generator=generator), torch.randn(64, 16, generator=generator)
    s = q @ k.T / 4 + qkv.alibi_bias(8, 64)[head]
    s = s.masked_fill(~torch.ones(64, 64, dtype=torch.bool).tril(), float("-inf"))
    w = torch.softmax(s, -1)[32:]
    far = (torch.arange(64)[None, :] - torch.arange(64)[:, None] > 16)[32:]  # ahead: all masked
    return (w * far).sum(-1).mean().item()


def _call(fn, **kw):
    return lambda *args, **kwargs: fn(*args, **kwargs, **kw)


# name: (check, answer, words the message must hold, words it must no longer hold)
NAMED = {
    "attention_with_temperature: the row sums without keepdim": (
        "check_attention_with_temperature", temperature_no_keepdim, "without keepdim=True",
        "key.T"),
    # Told only "largest difference": the maximum added over dim=-1, the printed sum kept.
    "attention_with_temperature: the printed sum over dim=-2 kept": (
        "check_attention_with_temperature", temperature_sum_over_queries,
        "the sums over the queries (dim=-2)", ""),
    "attention_with_temperature: the temperature ignored": (
        "check_attention_with_temperature", temperature_ignored, "the temperature ignored", ""),
    "lookup_entropy: softmax over the queries": (
        "check_lookup_entropy", entropy_over_queries, "softmax over the queries", "bits"),
    "lookup_entropy: the minus sign dropped": (
        "check_lookup_entropy", entropy_no_sign, "the minus sign dropped", ""),
    # The first query's entropy passed the visible check (its mean is right, and its spread
    # was off by more than 4 only on some seeds); the other two were told only "averages".
    "lookup_entropy: one query's entropy": (
        "check_lookup_entropy", entropy_first_query, "the entropy of one query", ""),
    "lookup_entropy: the mean over the keys too": (
        "check_lookup_entropy", entropy_mean_over_all, "the mean over the keys too", ""),
    "lookup_entropy: summed over the queries": (
        "check_lookup_entropy", entropy_sum_over_all, "summed over the queries", ""),
    "max_weight: mean then max": (
        "check_max_weight", _max_weight_of(lambda w: w.mean(-1).max()),
        "each row averaged before the max", ""),
    "max_weight: the indices of max": (
        "check_max_weight", _max_weight_of(lambda w: w.max(-1)[1].float().mean()),
        "the positions of the largest weights", ""),
    # Told "not the formula" and "a selection that is always empty": it measured, then rounded.
    "dot_product_variance: round(var)": (
        "check_dot_product_variance", variance_rounded, "rounded to 0 decimals", "formula"),
    "lookup_entropy: round(entropy, 1)": (
        "check_lookup_entropy", entropy_rounded, "rounded to 1 decimal", "always empty"),
    "max_weight: the median over the queries": (
        "check_max_weight", max_weight_median, "the median over the queries", ""),
    "padded_causal_attention: scaled by sqrt(S)": (
        "check_padded_causal_attention", padded_causal_by_sqrt_s,
        "scaling by sqrt(S), the number of keys", "batch elements"),
    "dilated_window_mask_mod: b == 0 left in": (
        "check_dilated_window_mask_mod", dilated_first_batch_only,
        "the mask depends on the batch element or the head", ""),
    "top_k_lookup: the dropped keys filled with 0": (
        "check_top_k_lookup", top_k_fill_zero, "set to 0 instead of -inf", ""),
    # Told only "largest difference", or a shape with no hint (wrong13).
    "top_k_lookup: the threshold at the k-th smallest (kthvalue)": (
        "check_top_k_lookup", top_k_kth_smallest, "the k-th smallest", ""),
    "top_k_lookup: the scores divided by sqrt(E)": (
        "check_top_k_lookup", top_k_scaled, "divided by sqrt(E)", ""),
    "top_k_lookup: the weights returned": (
        "check_top_k_lookup", top_k_weights, "weights @ values", ""),
    "padded_bahdanau_weights: the mask inverted": (
        "check_padded_bahdanau_weights", bahdanau_mask_inverted, "the mask inverted", ""),
    "self_attention_no_self: the diagonal zeroed after the softmax": (
        "check_self_attention_no_self", no_self_zeroed_after, "zeroed after the softmax", ""),
    "multi_head_self_attention: softmax over the queries": (
        "check_multi_head_self_attention", _call(mhsa, dim=-2), "softmax over the queries", ""),
    "multi_head_self_attention: W_o not transposed": (
        "check_multi_head_self_attention", _call(mhsa, out_t=False), "merged @ W_o instead", ""),
    # Told only "largest difference" (wrong13).
    "multi_head_self_attention: x @ W_q, x @ W_k, x @ W_v": (
        "check_multi_head_self_attention", _call(mhsa, in_t=False), "x @ W_v instead of x @ W_q.T", ""),
    "multi_head_self_attention: no projection transposed": (
        "check_multi_head_self_attention", _call(mhsa, in_t=False, out_t=False),
        "no projection transposed", ""),
    "multi_head_self_attention: scaled by head_dim": (
        "check_multi_head_self_attention", _call(mhsa, scale=lambda D, H: D // H),
        "scaled by the head's width itself", ""),
    "multi_head_self_attention: scaled by sqrt(num_heads)": (
        "check_multi_head_self_attention", _call(mhsa, scale=lambda D, H: math.sqrt(H)),
        "scaled by sqrt(num_heads)", ""),
    "multi_head_self_attention: softmax over the heads": (
        "check_multi_head_self_attention", _call(mhsa, dim=1), "softmax over the heads", ""),
    "self_attention: the keys projected with W_q": (
        "check_self_attention", _call(self_attention, keys_by_q=True), "projected with W_q", ""),
    "self_attention: the weights transposed": (
        "check_self_attention", _call(self_attention, weights_t=True), "weights transposed", ""),
    "masked_scores: a float mask's negative entries made -inf": (
        "check_masked_scores", _call(masked_scores, float_mode="negative"),
        "negative entries made -inf", ""),
    "masked_scores: a float mask inverted with ~": (
        "check_masked_scores", _call(masked_scores, float_mode="as bool"),
        "a float attn_mask is a bias", ""),
    "fp16_overflow_rate: spread taken for a variance": (
        "check_fp16_overflow_rate", overflow_spread_squared, "spread taken for a variance",
        "not a measurement"),
    # Named after "no row overflows", whose causes it did not list.
    "fp16_overflow_rate: the logits multiplied by sqrt(spread)": (
        "check_fp16_overflow_rate", overflow_spread_sqrt, "multiplied by sqrt(spread)", ""),
    # Told only "averages 41.85 where ... 0.1658".
    "fp16_overflow_rate: the rows counted": (
        "check_fp16_overflow_rate", overflow_rows_counted, "the number of rows that overflow",
        ""),
    "fp16_overflow_rate: a percentage": (
        "check_fp16_overflow_rate", overflow_percent, "a percentage of the rows", ""),
    "fp16_overflow_rate: the fraction of the weights": (
        "check_fp16_overflow_rate", overflow_of_elements, "the fraction of the weights", ""),
    "kv_cache_step: the keys appended to the value cache": (
        "check_kv_cache_step", kv_values_from_keys, "appended to the value cache",
        "wrong dim"),
    "attention_backward: the causal scores filled with 0": (
        "check_attention_backward", backward_causal_fill_zero, "filled with 0 instead of -inf",
        ""),
    # Told "part of the computation ran in float16": GELU's tanh approximation is that close.
    "block_forward: GELU's tanh approximation": (
        "check_block_forward", capstone.make_block(act="gelu_tanh"),
        "GELU's tanh approximation (GPT-2's)", "float16"),
    # Told only "largest difference".
    "block_forward: LayerNorm instead of RMSNorm": (
        "check_block_forward", capstone.make_block(norm_kind="layer"),
        "LayerNorm instead of RMSNorm", ""),
    "block_forward: SiLU instead of GELU": (
        "check_block_forward", capstone.make_block(act="silu"), "SiLU in the MLP instead of GELU",
        ""),
    "dropout_block_forward: GELU's tanh approximation": (
        "check_dropout_block_forward", capstone.make_dropout_block(act="gelu_tanh"),
        "GELU's tanh approximation (GPT-2's)", "float16"),
    # Told "a scale applied twice": the kept entries scaled by 1 / 0.9, not 1 / 0.75.
    "dropout_block_forward: the dropout rate written in": (
        "check_dropout_block_forward", capstone.make_dropout_block(fixed_rate=0.1),
        "the dropout rate ignored (a fixed rate)", "a scale applied twice"),
    # Told "ran in bfloat16": on random logits the loss is only a few percent off.
    "repeat_loss: the shift the wrong way": (
        "check_repeat_loss", a.repeat_loss_shifted_backwards, "the shift the wrong way",
        "bfloat16"),
    "linear_attention: causal with triu": (
        "check_linear_attention", linear_causal_triu, "the future kept instead of the past", ""),
    # The same, and it passed on some seeds.
    "linear_attention: the + 1e-6 left out": (
        "check_linear_attention", linear_no_eps, "+ 1e-6 left out", "float32"),
    # Told "part of the computation ran in bfloat16".
    "soft_lookup: divided by sqrt(temperature)": (
        "check_soft_lookup", soft_lookup_sqrt_temperature, "divided by sqrt(temperature)",
        "bfloat16"),
    # Told only "largest difference" (or the generic NaN story).
    "self_attention_no_self: the mask inverted (only itself)": (
        "check_self_attention_no_self", no_self_only_self, "attends only to itself", ""),
    "padded_causal_attention: the padding mask over the queries": (
        "check_padded_causal_attention", padded_causal_queries_axis,
        "over the queries instead of the keys", "overflowing"),
    "padded_bahdanau_weights: positions counted from 1": (
        "check_padded_bahdanau_weights", bahdanau_from_one, "the last real state masked too", ""),
    "duplicate_token_score: tril() instead of tril(-1)": (
        "check_duplicate_token_score", duplicate_with_diagonal, "tril() instead of tril(-1)", ""),
    "attention_forward: RoPE after the cache is appended": (
        "check_attention_forward", attention_forward_rope_after_cat,
        "the cached keys rotated twice", "largest difference"),
    "attention_with_temperature: the 1/sqrt(E) left out": (
        "check_attention_with_temperature", temperature_without_sqrt_e,
        "the 1/sqrt(E) left out", ""),
    # Told the generic "over 48 seeds your mean ... averages".
    "max_weight: scaled inverted": (
        "check_max_weight", max_weight_flag_inverted, "scaled inverted", ""),
    "head_difference: divided by sqrt(32), the model's width": (
        "check_head_difference", head_difference_model_width, "sqrt(32), the model's width", ""),
    # Told "this is not a measurement": it measures, on keys that are all masked.
    "alibi_far_weight: the keys ahead counted (all masked)": (
        "check_alibi_far_weight", alibi_far_ahead, "whatever the inputs drawn",
        "this is not a measurement"),
    # An IndexError with no hint.
    "cross_attention: K.transpose(1, 2) on unbatched input": (
        "check_cross_attention", cross_transpose_1_2, "count from the end", ""),
    # Told "topk along the keys: dim=-1", which it is.
    "top_k_lookup: the cut at the (k+1)-th largest": (
        "check_top_k_lookup", top_k_beyond, "k can be S", ""),
    # Told only "largest difference": two calls on the same input differ.
    "self_attention: dropout left on": (
        "check_self_attention", self_attention_dropout, "dropout left on", ""),
    "scaled_dot_product_attention: dropout left on": (
        "check_scaled_dot_product_attention", sdpa_dropout, "dropout left on", "largest difference"),
}


@pytest.mark.parametrize("check,answer", [("check_self_attention", self_attention_dropout),
                                          ("check_scaled_dot_product_attention", sdpa_dropout)])
def test_dropout_left_on_is_a_named_mistake(check, answer):
    """``qkv report`` counts it under its name, not as an unnamed failure."""
    with pytest.raises(CheckFailed) as info:
        getattr(checks, check)(answer)
    assert info.value.result.mistake == "dropout left on (the result is random)"


def _float32_softmax(x, dim=-1):
    e = (x.float() - x.float().amax(dim, keepdim=True)).exp()
    return (e / e.sum(dim, keepdim=True)).to(x.dtype)


def test_an_epsilon_in_softmax_s_sum_and_a_softmax_in_float32_are_told_apart():
    """A softmax's sum is at least 1, so an epsilon of 1e-6 added to it moves the result by
    about what float32's rounding does, and a named mistake for it matched a float32 softmax
    too (honest12: told to remove an epsilon it never had). What tells them apart is how:
    the epsilon scales each row by a factor of its own, rounding moves each value on its own."""
    with pytest.raises(CheckFailed) as info:
        checks.check_softmax(softmax_eps)
    said = str(info.value)
    assert "a denominator a little off: an epsilon added" in said and "float32" not in said, said
    with pytest.raises(CheckFailed) as info:
        checks.check_softmax(_float32_softmax)
    said = str(info.value)
    assert "ran in float32" in said and "epsilon added to the sum" not in said, said
    assert "denominator" not in said, said


@pytest.mark.parametrize("name", NAMED)
def test_the_slip_is_named(name):
    assert_named(*NAMED[name])
