"""Answers to the variations of assignments 1 to 4 (qkv.checks._variations_early), written as
students would: several honest forms of each right answer, and wrong ones with the mistake the
check must name."""

import math

import torch

# ------------------------------------------------------------------ assignment 1: coverage


def coverage_attention(query, keys, coverage, W_q, W_k, w_c, v_a):
    hidden = (query @ W_q.T).unsqueeze(1) + keys @ W_k.T + coverage.unsqueeze(-1) * w_c
    weights = torch.softmax(torch.tanh(hidden) @ v_a, dim=-1)
    return (weights.unsqueeze(-1) * keys).sum(1), weights


def coverage_attention_einsum(query, keys, coverage, W_q, W_k, w_c, v_a):
    hidden = (torch.einsum("ad,bd->ba", W_q, query)[:, None]
              + torch.einsum("ad,bsd->bsa", W_k, keys) + torch.einsum("bs,a->bsa", coverage, w_c))
    scores = torch.einsum("bsa,a->bs", torch.tanh(hidden), v_a)
    scores = scores - scores.max(dim=1, keepdim=True).values
    weights = scores.exp() / scores.exp().sum(1, keepdim=True)
    return torch.bmm(weights[:, None, :], keys)[:, 0], weights


def coverage_attention_loop(query, keys, coverage, W_q, W_k, w_c, v_a):
    pq = query @ W_q.T
    scores = torch.stack([torch.tanh(pq + keys[:, j] @ W_k.T + coverage[:, j:j + 1] * w_c) @ v_a
                          for j in range(keys.shape[1])], dim=1)
    weights = torch.nn.functional.softmax(scores, dim=1)
    return weights[:, None, :].matmul(keys).squeeze(1), weights


def coverage_attention_after(query, keys, coverage, W_q, W_k, w_c, v_a):
    hidden = torch.tanh((query @ W_q.T).unsqueeze(1) + keys @ W_k.T) + coverage.unsqueeze(-1) * w_c
    weights = torch.softmax(hidden @ v_a, dim=-1)
    return (weights.unsqueeze(-1) * keys).sum(1), weights


def coverage_attention_none(query, keys, coverage, W_q, W_k, w_c, v_a):
    weights = torch.softmax(torch.tanh((query @ W_q.T).unsqueeze(1) + keys @ W_k.T) @ v_a, dim=-1)
    return (weights.unsqueeze(-1) * keys).sum(1), weights


def coverage_attention_swapped(query, keys, coverage, W_q, W_k, w_c, v_a):
    return coverage_attention(query, keys, coverage, W_q, W_k, w_c, v_a)[::-1]


def coverage_attention_batch(query, keys, coverage, W_q, W_k, w_c, v_a):
    hidden = (query @ W_q.T).unsqueeze(1) + keys @ W_k.T + coverage.unsqueeze(-1) * w_c
    weights = torch.softmax(torch.tanh(hidden) @ v_a, dim=0)
    return (weights.unsqueeze(-1) * keys).sum(1), weights


# ------------------------------------------------------------------ assignment 2: sparsemax


def _sparsemax_sort(z):
    srt, _ = torch.sort(z, dim=-1, descending=True)
    cum = srt.cumsum(-1)
    k = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)
    support = 1 + k * srt > cum
    k_z = support.sum(-1, keepdim=True)
    tau = (cum.gather(-1, k_z - 1) - 1) / k_z
    return torch.clamp(z - tau, min=0)


def sparsemax_lookup(query, keys, values, temperature=1.0):
    weights = _sparsemax_sort(query @ keys.transpose(-2, -1) / temperature)
    return weights @ values, weights


def sparsemax_lookup_bisection(query, keys, values, temperature=1.0):
    """tau found by bisection: sum_j max(z_j - tau, 0) = 1, with tau in [max z - 1, max z]."""
    z = (query @ keys.transpose(-2, -1) / temperature).double()
    hi = z.amax(-1, keepdim=True)
    lo = hi - 1
    for _ in range(80):
        mid = (lo + hi) / 2
        over = (z - mid).clamp_min(0).sum(-1, keepdim=True) > 1
        lo, hi = torch.where(over, mid, lo), torch.where(over, hi, mid)
    weights = (z - (lo + hi) / 2).clamp_min(0).to(query.dtype)
    return weights @ values, weights


def sparsemax_lookup_drop(query, keys, values, temperature=1.0):
    """Michelot's algorithm: drop the keys below the threshold until none is."""
    z = query @ keys.transpose(-2, -1) / temperature
    keep = torch.ones_like(z, dtype=torch.bool)
    for _ in range(z.shape[-1]):
        n = keep.sum(-1, keepdim=True)
        tau = ((z * keep).sum(-1, keepdim=True) - 1) / n
        keep = keep & (z > tau)
    n = keep.sum(-1, keepdim=True)
    tau = ((z * keep).sum(-1, keepdim=True) - 1) / n
    weights = torch.relu(z - tau)
    return weights @ values, weights


def sparsemax_lookup_softmax(query, keys, values, temperature=1.0):
    weights = torch.softmax(query @ keys.transpose(-2, -1) / temperature, dim=-1)
    return weights @ values, weights


def sparsemax_lookup_no_minus_one(query, keys, values, temperature=1.0):
    z = query @ keys.transpose(-2, -1) / temperature
    srt = z.sort(dim=-1, descending=True).values
    cum = srt.cumsum(-1)
    k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    k_z = (1 + k * srt > cum).sum(-1, keepdim=True)
    weights = (z - cum.gather(-1, k_z - 1) / k_z).clamp_min(0)
    return weights @ values, weights


def sparsemax_lookup_one_more(query, keys, values, temperature=1.0):
    z = query @ keys.transpose(-2, -1) / temperature
    srt = z.sort(dim=-1, descending=True).values
    cum = srt.cumsum(-1)
    k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    k_z = ((1 + k * srt >= cum).sum(-1, keepdim=True) + 1).clamp(max=z.shape[-1])  # one too many
    weights = (z - (cum.gather(-1, k_z - 1) - 1) / k_z).clamp_min(0)
    return weights @ values, weights


def sparsemax_lookup_untempered(query, keys, values, temperature=1.0):
    return sparsemax_lookup(query, keys, values)  # the temperature never reaches the scores


def sparsemax_lookup_all(query, keys, values, temperature=1.0):
    z = query @ keys.transpose(-2, -1) / temperature
    tau = (z.sum(-1, keepdim=True) - 1) / z.shape[-1]
    weights = (z - tau).clamp_min(0)
    return weights @ values, weights


# ------------------------------------------------------------------ assignment 3: a null slot


def self_attention_with_null(x, W_q, W_k, W_v, k_null, v_null):
    Q, K, V = x @ W_q.T, x @ W_k.T, x @ W_v.T
    K = torch.cat([K, k_null.expand(*K.shape[:-2], 1, K.shape[-1])], dim=-2)
    V = torch.cat([V, v_null.expand(*V.shape[:-2], 1, V.shape[-1])], dim=-2)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    return torch.softmax(scores, dim=-1) @ V


def self_attention_with_null_apart(x, W_q, W_k, W_v, k_null, v_null):
    """The null slot apart: its exponential joins the sum, its value the output."""
    Q, K, V = x @ W_q.T, x @ W_k.T, x @ W_v.T
    E = Q.shape[-1]
    s = Q @ K.transpose(-2, -1) / E**0.5
    s0 = (Q @ k_null / E**0.5).unsqueeze(-1)
    m = torch.maximum(s.amax(-1, keepdim=True), s0)
    e, e0 = (s - m).exp(), (s0 - m).exp()
    return (e @ V + e0 * v_null) / (e.sum(-1, keepdim=True) + e0)


def self_attention_with_null_no_value(x, W_q, W_k, W_v, k_null, v_null):
    Q, K, V = x @ W_q.T, x @ W_k.T, x @ W_v.T
    K = torch.cat([K, k_null.expand(*K.shape[:-2], 1, K.shape[-1])], dim=-2)
    w = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), dim=-1)
    return w[..., :-1] @ V


def self_attention_with_null_unscaled(x, W_q, W_k, W_v, k_null, v_null):
    Q, K, V = x @ W_q.T, x @ W_k.T, x @ W_v.T
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    s = torch.cat([s, (Q @ k_null)[..., None]], dim=-1)
    w = torch.softmax(s, dim=-1)
    return w[..., :-1] @ V + w[..., -1:] * v_null


# ------------------------------------------------------------------ assignment 4: off by one


def quiet_attention(query, key, value, scale=None):
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    s = query @ key.transpose(-2, -1) * scale
    m = s.amax(-1, keepdim=True).clamp(min=0)
    e = (s - m).exp()
    return e / (torch.exp(-m) + e.sum(-1, keepdim=True)) @ value


def quiet_attention_zero_logit(query, key, value, scale=None):
    """A zero score appended to every row, the usual softmax, and that column dropped."""
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    s = query @ key.transpose(-2, -1) * scale
    s = torch.cat([s, torch.zeros_like(s[..., :1])], dim=-1)
    return torch.softmax(s, dim=-1)[..., :-1] @ value


def quiet_attention_softplus(query, key, value, scale=None):
    """log(1 + sum exp s) = softplus(logsumexp s); weights exp(s - that)."""
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    s = query @ key.transpose(-2, -1) * scale
    log_total = torch.nn.functional.softplus(torch.logsumexp(s, dim=-1, keepdim=True))
    return (s - log_total).exp() @ value


def quiet_attention_row_max(query, key, value, scale=None):
    """The row's maximum subtracted, not clamped at 0: exp(-m) may overflow to inf, and the
    weights, of about exp(m), are then 0 as they should be."""
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    s = query @ key.transpose(-2, -1) * scale
    m = s.amax(-1, keepdim=True)
    e = (s - m).exp()
    return e / ((-m).exp() + e.sum(-1, keepdim=True)) @ value


def quiet_attention_softmax(query, key, value, scale=None):
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    return torch.softmax(query @ key.transpose(-2, -1) * scale, dim=-1) @ value


def quiet_attention_shifted_one(query, key, value, scale=None):
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    s = query @ key.transpose(-2, -1) * scale
    e = (s - s.amax(-1, keepdim=True)).exp()
    return e / (1 + e.sum(-1, keepdim=True)) @ value


def quiet_attention_unstable(query, key, value, scale=None):
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    e = (query @ key.transpose(-2, -1) * scale).exp()
    return e / (1 + e.sum(-1, keepdim=True)) @ value


def quiet_attention_each(query, key, value, scale=None):
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    s = query @ key.transpose(-2, -1) * scale
    m = s.amax(-1, keepdim=True).clamp(min=0)
    e = (s - m).exp()
    return e / (e + (-m).exp()).sum(-1, keepdim=True) @ value
