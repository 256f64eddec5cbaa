"""Right and wrong answers to the exercises beyond the page (qkv.checks._beyond, _beyond_early,
heads): each exercise's right answer, written as a student would, and the printed buggy
version with the mistake the check must name first (None: it fails, naming no one mistake)."""

import math

import torch
import torch.nn.functional as F


def attention_with_temperature(query, key, value, temperature=1.0):
    s = query @ key.transpose(-2, -1) / (math.sqrt(query.shape[-1]) * temperature)
    s = s - s.amax(-1, keepdim=True)
    return s.exp() / s.exp().sum(-1, keepdim=True) @ value


def attention_with_temperature_unstable(query, key, value, temperature=1.0):
    s = query @ key.transpose(-2, -1) / (math.sqrt(query.shape[-1]) * temperature)
    return s.exp() / s.exp().sum(-1, keepdim=True) @ value


def attention_with_temperature_two_bugs_left(query, key, value, temperature=1.0):
    """The printed function with its 1/E scale fixed, its other two bugs left."""
    s = query @ key.transpose(-2, -1) / (math.sqrt(query.shape[-1]) * temperature)
    return s.exp() / s.exp().sum(-2, keepdim=True) @ value


def padded_causal_attention_two_bugs_left(query, key, value, lengths):
    """The printed function with its triu fixed, '<= lengths' and the zeroing after left."""
    L, S = query.shape[-2], key.shape[-2]
    causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    real = torch.arange(S, device=query.device)[None, :] <= lengths[:, None]
    s = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    return torch.softmax(s, -1).masked_fill(~(causal & real[:, None, None, :]), 0.0) @ value


def max_weight(d_k, scaled, generator):
    q, k = torch.randn(32, d_k, generator=generator), torch.randn(32, d_k, generator=generator)
    s = q @ k.T / (math.sqrt(d_k) if scaled else 1.0)
    return torch.softmax(s, -1).max(-1).values.mean().item()


def padded_causal_attention(query, key, value, lengths):
    L, S = query.shape[-2], key.shape[-2]
    causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    real = torch.arange(S, device=query.device)[None, :] < lengths[:, None]
    s = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    s = s.masked_fill(~(causal & real[:, None, None, :]), float("-inf"))
    return torch.softmax(s, -1) @ value


def padded_causal_attention_after(query, key, value, lengths):
    L, S = query.shape[-2], key.shape[-2]
    causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    real = torch.arange(S, device=query.device)[None, :] < lengths[:, None]
    s = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    return torch.softmax(s, -1).masked_fill(~(causal & real[:, None, None, :]), 0.0) @ value


def padding_leak(length, S, generator):
    q, k = torch.randn(8, 16, generator=generator), torch.randn(S, 16, generator=generator)
    return torch.softmax(q @ k.T / 4, -1)[:, length:].sum(-1).mean().item()


def _streaming(query, key, value, block, start_max):
    scale = 1 / math.sqrt(query.shape[-1])
    m = torch.full(query.shape[:-1] + (1,), start_max, dtype=query.dtype, device=query.device)
    l = torch.zeros_like(m)
    acc = torch.zeros(query.shape[:-1] + value.shape[-1:], dtype=query.dtype, device=query.device)
    for st in range(0, key.shape[-2], block):
        s = query @ key[..., st:st + block, :].transpose(-2, -1) * scale
        mn = torch.maximum(m, s.amax(-1, keepdim=True))
        p, c = (s - mn).exp(), (m - mn).exp()
        l, acc, m = l * c + p.sum(-1, keepdim=True), acc * c + p @ value[..., st:st + block, :], mn
    return acc / l


def streaming_attention(query, key, value, block):
    return _streaming(query, key, value, block, float("-inf"))


def streaming_attention_zero_start(query, key, value, block):
    return _streaming(query, key, value, block, 0.0)


def streaming_attention_whole(query, key, value, block):
    """Right numbers with block ignored: every score at once, through einsum."""
    scores = torch.einsum("...le,...se->...ls", query, key) / math.sqrt(query.shape[-1])
    return torch.softmax(scores, dim=-1) @ value


def fp16_overflow_rate(spread, generator):
    x = (torch.randn(256, 64, generator=generator) * spread).half()
    w = x.exp() / x.exp().sum(-1, keepdim=True)
    return (~torch.isfinite(w)).any(-1).float().mean().item()


def linear_attention(query, key, value, is_causal=False):
    sim = (F.elu(query) + 1) @ (F.elu(key) + 1).transpose(-2, -1)
    if is_causal:
        sim = sim.tril()
    return sim / (sim.sum(-1, keepdim=True) + 1e-6) @ value


def linear_attention_no_one(query, key, value, is_causal=False):
    sim = F.elu(query) @ F.elu(key).transpose(-2, -1)
    if is_causal:
        sim = sim.tril()
    return sim / (sim.sum(-1, keepdim=True) + 1e-6) @ value


def linear_gap(E, generator):
    q, k, v = (torch.randn(64, E, generator=generator) for _ in range(3))
    exact = torch.softmax(q @ k.T / math.sqrt(E), -1) @ v
    return (exact - linear_attention(q, k, v)).abs().mean().item()


def dilated_window_mask_mod(window, dilation):
    def mask_mod(b, h, q_idx, kv_idx):
        gap = q_idx - kv_idx
        return (gap >= 0) & (gap < window * dilation) & (gap % dilation == 0)
    return mask_mod


def dilated_window_mask_mod_short(window, dilation):
    def mask_mod(b, h, q_idx, kv_idx):
        gap = q_idx - kv_idx
        return (gap >= 0) & (gap < window) & (gap % dilation == 0)
    return mask_mod


def padded_bahdanau_weights(s, keys, W_q, W_k, v_a, lengths):
    scores = torch.tanh((s @ W_q.T)[:, None, :] + keys @ W_k.T) @ v_a
    real = torch.arange(keys.shape[1], device=keys.device)[None, :] < lengths[:, None]
    return torch.softmax(scores.masked_fill(~real, float("-inf")), -1)


def padded_bahdanau_weights_dim0(s, keys, W_q, W_k, v_a, lengths):
    scores = torch.tanh((s @ W_q.T)[:, None, :] + keys @ W_k.T) @ v_a
    real = torch.arange(keys.shape[1], device=keys.device)[None, :] < lengths[:, None]
    return torch.softmax(scores.masked_fill(~real, float("-inf")), 0)


def top_k_lookup(query, keys, values, k):
    s = query @ keys.transpose(-2, -1)
    kth = s.topk(k, dim=-1).values[..., -1:]
    return torch.softmax(s.masked_fill(s < kth, float("-inf")), -1) @ values


def top_k_lookup_cut(query, keys, values, k):
    s = query @ keys.transpose(-2, -1)
    return (torch.softmax(s, -1) * (s >= s.topk(k, dim=-1).values[..., -1:])) @ values


def top_k_lookup_one_less(query, keys, values, k):
    s = query @ keys.transpose(-2, -1)
    top = s.topk(k - 1, dim=-1).values[..., -1:] if k > 1 else s.amax(-1, keepdim=True)
    return torch.softmax(s.masked_fill(s < top, float("-inf")), -1) @ values


def lookup_entropy(temperature, generator):
    q, k = torch.randn(16, 8, generator=generator), torch.randn(32, 8, generator=generator)
    w = torch.softmax(q @ k.T / temperature, -1)
    return -(w * w.clamp_min(1e-30).log()).sum(-1).mean().item()


def self_attention_no_self(x, W_q, W_k, W_v, fill=float("-inf")):
    q, k, v = x @ W_q.T, x @ W_k.T, x @ W_v.T
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    eye = torch.eye(x.shape[-2], dtype=torch.bool, device=x.device)
    return torch.softmax(s.masked_fill(eye, fill), -1) @ v


def self_attention_no_self_zero(x, W_q, W_k, W_v):
    return self_attention_no_self(x, W_q, W_k, W_v, fill=0.0)


def self_weight(shared, generator):
    x = torch.randn(16, 16, generator=generator)
    W_q = torch.randn(8, 16, generator=generator) / 4
    W_k = W_q if shared else torch.randn(8, 16, generator=generator) / 4
    return torch.softmax((x @ W_q.T) @ (x @ W_k.T).T / math.sqrt(8), -1).diagonal().mean().item()


def multi_head_self_attention(x, W_q, W_k, W_v, W_o, num_heads, scale_by_model=False):
    B, L, D = x.shape
    d = D // num_heads

    def split(t):
        return t.view(B, L, num_heads, d).transpose(1, 2)
    q, k, v = split(x @ W_q.T), split(x @ W_k.T), split(x @ W_v.T)
    o = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D if scale_by_model else d), -1) @ v
    return o.transpose(1, 2).reshape(B, L, D) @ W_o.T


def multi_head_self_attention_model_scale(x, W_q, W_k, W_v, W_o, num_heads):
    return multi_head_self_attention(x, W_q, W_k, W_v, W_o, num_heads, scale_by_model=True)


def apply_rope_scaled(x, factor, multiply=False):
    L, E = x.shape[-2], x.shape[-1]
    pos = torch.arange(L, dtype=torch.float64, device=x.device)
    pos = pos * factor if multiply else pos / factor
    freq = 10000.0 ** (-torch.arange(0, E, 2, dtype=torch.float64, device=x.device) / E)
    ang = pos[:, None] * freq
    c, s = ang.cos(), ang.sin()
    a, b = x[..., 0::2].double(), x[..., 1::2].double()
    return torch.stack((a * c - b * s, a * s + b * c), -1).flatten(-2).to(x.dtype)


def apply_rope_scaled_multiplied(x, factor):
    return apply_rope_scaled(x, factor, multiply=True)


def mean_ablate(head_outputs, heads, num_heads, dims=(0, 1)):
    d = head_outputs.shape[-1] // num_heads
    out = head_outputs.clone()
    for h in heads:
        part = out[..., h * d:(h + 1) * d]
        out[..., h * d:(h + 1) * d] = part.mean(dim=dims, keepdim=True).expand_as(part)
    return out


def mean_ablate_features(head_outputs, heads, num_heads):
    return mean_ablate(head_outputs, heads, num_heads, dims=(-1,))


def mean_ablate_batch_only(head_outputs, heads, num_heads):
    return mean_ablate(head_outputs, heads, num_heads, dims=(0,))


def mean_ablate_one_scalar(head_outputs, heads, num_heads):
    return mean_ablate(head_outputs, heads, num_heads, dims=(0, 1, 2))


def repeat_loss(logits, tokens, repeat):
    loss = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
    return loss[repeat[:, :-1]].mean()


def repeat_loss_unshifted(logits, tokens, repeat):
    return F.cross_entropy(logits.transpose(1, 2), tokens, reduction="none")[repeat].mean()


def repeat_loss_zeros_counted(logits, tokens, repeat):
    """The unmarked positions' losses zeroed, then the mean over every position."""
    loss = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
    return (loss * repeat[:, :-1].float()).mean()


def repeat_loss_probabilities(logits, tokens, repeat):
    """A softmax before cross_entropy, in a flattened layout."""
    p = torch.softmax(logits[:, :-1], dim=-1)
    loss = F.cross_entropy(p.reshape(-1, p.shape[-1]), tokens[:, 1:].reshape(-1), reduction="none")
    return loss[repeat[:, :-1].reshape(-1)].mean()


def repeat_loss_shifted_backwards(logits, tokens, repeat):
    """Position t + 1 scored on token t (the shift the wrong way), the marks of the position."""
    loss = F.cross_entropy(logits[:, 1:].transpose(1, 2), tokens[:, :-1], reduction="none")
    return loss[repeat[:, 1:]].mean()


def repeat_loss_gathered(logits, tokens, repeat):
    """Right, written with log_softmax and gather (a style the shift's mistake must not take)."""
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    nll = -logp.gather(-1, tokens[:, 1:, None]).squeeze(-1)
    return nll[repeat[:, :-1]].mean()


def repeat_loss_masked_sum(logits, tokens, repeat):
    """Right, written as a masked sum over the count (a style the new mistakes must not take)."""
    loss = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
    m = repeat[:, :-1].to(loss.dtype)
    return (loss * m).sum() / m.sum()


def repeat_loss_per_sequence(logits, tokens, repeat):
    """The mean of each sequence's mean, in a loop."""
    loss = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
    return torch.stack([row[m].mean() for row, m in zip(loss, repeat[:, :-1])]).mean()


def alibi_far_weight(head, generator):
    """The ALiBi experiment, with the course's bias in place of a student's alibi_bias."""
    import qkv

    q, k = torch.randn(64, 16, generator=generator), torch.randn(64, 16, generator=generator)
    scores = (q @ k.T / 4 + qkv.alibi_bias(8, 64)[head]).masked_fill(
        ~torch.ones(64, 64, dtype=torch.bool).tril(), float("-inf"))
    far = (torch.arange(64)[:, None] - torch.arange(64)[None, :] > 16)[32:]
    return (torch.softmax(scores, -1)[32:] * far).sum(-1).mean().item()


def talking_heads_attention(query, key, value, pre_mix, post_mix, transposed=False):
    s = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    pre, post = (pre_mix.T, post_mix.T) if transposed else (pre_mix, post_mix)
    w = torch.softmax(torch.einsum("jh,bhls->bjls", pre, s), -1)
    return torch.einsum("jh,bhls->bjls", post, w) @ value


def talking_heads_attention_transposed(query, key, value, pre_mix, post_mix):
    return talking_heads_attention(query, key, value, pre_mix, post_mix, transposed=True)


def talking_heads_attention_loop(query, key, value, pre_mix, post_mix):
    """Written otherwise: a loop over the new heads, the scale after the mix."""
    s = query @ key.transpose(-2, -1)
    H = query.shape[1]
    mixed = torch.stack([sum(pre_mix[j, h] * s[:, h] for h in range(H)) for j in range(H)], 1)
    w = torch.softmax(mixed / query.shape[-1] ** 0.5, dim=-1)
    return torch.stack([sum(post_mix[j, h] * w[:, h] for h in range(H)) for j in range(H)],
                       1) @ value


def talking_heads_attention_matmul(query, key, value, pre_mix, post_mix):
    """Written otherwise: the heads moved last and mixed by a matrix product."""
    s = (query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])).permute(0, 2, 3, 1)
    w = torch.softmax((s @ pre_mix.T).permute(0, 3, 1, 2), dim=-1).permute(0, 2, 3, 1)
    return (w @ post_mix.T).permute(0, 3, 1, 2) @ value


def head_difference(share, generator, half=0.5, pairs="distinct"):
    x = torch.randn(16, 32, generator=generator)
    W_q = torch.randn(32, 32, generator=generator) / math.sqrt(32)
    W_k = torch.randn(32, 32, generator=generator) / math.sqrt(32)
    q = (x @ W_q.T).view(16, 4, 8).transpose(0, 1)
    k = (x @ W_k.T).view(16, 4, 8).transpose(0, 1)
    if share in ("key", "both"):
        k = k[:1].expand(4, 16, 8)
    if share == "both":
        q = q[:1].expand(4, 16, 8)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), -1)
    tv = [(half * (w[a] - w[b]).abs().sum(-1).mean()).item()
          for a in range(4) for b in range(4) if pairs == "all" or a < b]
    return sum(tv) / len(tv)


def apply_partial_rope(x, rotary_dim, offset=0, base=10000.0, width=None):
    r, L = rotary_dim, x.shape[-2]
    pos = torch.arange(offset, offset + L, dtype=torch.float64, device=x.device)
    theta = base ** (-torch.arange(0, r, 2, dtype=torch.float64, device=x.device) / (width or r))
    ang = pos[:, None] * theta
    a, b = x[..., 0:r:2].double(), x[..., 1:r:2].double()
    out = x.clone()
    out[..., 0:r:2] = (a * ang.cos() - b * ang.sin()).to(x.dtype)
    out[..., 1:r:2] = (a * ang.sin() + b * ang.cos()).to(x.dtype)
    return out


def apply_partial_rope_full_width(x, rotary_dim, offset=0, base=10000.0):
    return apply_partial_rope(x, rotary_dim, offset, base, width=x.shape[-1])


def apply_rope(x, offset=0, base=10000.0):
    """A student's apply_rope of step 2 (its answer; the check swaps in the course's)."""
    return apply_partial_rope(x, x.shape[-1], offset, base)


def apply_partial_rope_with_mine(x, rotary_dim, offset=0, base=10000.0):
    """Written otherwise: the student's own apply_rope on the slice, then the rest."""
    return torch.cat((apply_rope(x[..., :rotary_dim], offset, base), x[..., rotary_dim:]), -1)
def grouped_causal_linear_attention(query, key, value, tile=False):
    """A loop over the positions, as a student may write the linear-time form."""
    G = query.shape[1] // key.shape[1]
    if tile:
        key, value = key.repeat(1, G, 1, 1), value.repeat(1, G, 1, 1)
    else:
        key, value = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    phi_q, phi_k = F.elu(query) + 1, F.elu(key) + 1
    S = torch.zeros(*key.shape[:2], key.shape[-1], value.shape[-1], dtype=query.dtype,
                    device=query.device)
    z = torch.zeros(*key.shape[:2], key.shape[-1], dtype=query.dtype, device=query.device)
    out = []
    for i in range(query.shape[2]):
        S = S + phi_k[:, :, i, :, None] * value[:, :, i, None, :]
        z = z + phi_k[:, :, i]
        num = (phi_q[:, :, i, None, :] @ S)[:, :, 0]
        out.append(num / ((phi_q[:, :, i] * z).sum(-1, keepdim=True) + 1e-6))
    return torch.stack(out, dim=2)


def grouped_causal_linear_attention_tiled(query, key, value):
    return grouped_causal_linear_attention(query, key, value, tile=True)


def duplicate_token_score(weights, tokens):
    same = (tokens[:, :, None] == tokens[:, None, :]).tril(-1)  # earlier keys with the same token
    on = (weights * same[:, None]).sum(-1)  # (B, H, T)
    return on.permute(1, 0, 2)[:, same.any(-1)].mean(-1)


def duplicate_token_score_induction(weights, tokens):
    same = (tokens[:, :, None] == tokens[:, None, :]).tril(-1)
    after = F.pad(same[..., :-1], (1, 0))  # the key after each earlier occurrence
    on = (weights * after[:, None]).sum(-1)
    return on.permute(1, 0, 2)[:, same.any(-1)].mean(-1)


@torch.no_grad()
def ablation_rise(model, layer, head, how, generator, absolute=False):
    """The experiment as a student writes it, with its own hook for mean ablation."""
    import qkv

    batch = qkv.InductionTask().sample(64, generator)
    base = repeat_loss(model(batch.tokens)[0], batch.tokens, batch.repeat)
    if how == "zero":
        with qkv.ablate_heads(model, [(layer, head)]):
            logits = model(batch.tokens)[0]
    else:
        attention = model.layers[layer]
        hook = attention.out_proj.register_forward_pre_hook(
            lambda module, inputs: (mean_ablate(inputs[0], [head], attention.num_heads),))
        try:
            logits = model(batch.tokens)[0]
        finally:
            hook.remove()
    loss = repeat_loss(logits, batch.tokens, batch.repeat)
    return (loss if absolute else loss - base).item()
