"""Wrong answers a student walk found passing, each now refused (and named where a name fits).

Each is written as the student wrote it; the words are what the message must say.
"""

import math
from functools import partial

import pytest
import torch

from qkv.checks import (CheckFailed, check_bahdanau_attention, check_chunked_attention,
                        check_dropout_block_forward,
                        check_duplicate_token_score, check_grouped_causal_linear_attention,
                        check_grouped_query_attention, check_head_difference,
                        check_masked_scores, check_padding_mask)

import answers_capstone as a
from answers_beyond import head_difference


def padding_mask_last_length(lengths, S=None):
    lengths = torch.as_tensor(lengths)
    S = int(lengths[-1]) if S is None else S  # the last length, not the longest
    return torch.arange(S, device=lengths.device)[None, :] < lengths[:, None]


def _bottom_right_when_longer(L, S, device):
    # top left while L <= S, bottom right once L > S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(S - L if L > S else 0)


def masked_scores_bottom_right(scores, attn_mask=None, is_causal=False):
    if is_causal and attn_mask is not None:
        raise ValueError("attn_mask and is_causal together")
    if is_causal:
        attn_mask = _bottom_right_when_longer(*scores.shape[-2:], scores.device)
    if attn_mask is None:
        return scores
    if attn_mask.dtype == torch.bool:
        return scores.masked_fill(~attn_mask, float("-inf"))
    return scores + attn_mask


def gqa_bottom_right(query, key, value, is_causal=False, scale=None):
    G = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    s = query @ k.transpose(-2, -1) * scale
    if is_causal:
        s = s.masked_fill(~_bottom_right_when_longer(*s.shape[-2:], s.device), float("-inf"))
    return torch.softmax(s, -1) @ v


def chunked(query, key, value, attn_mask=None, is_causal=False, scale=None, chunk_size=256,
            zero_guard=True, bottom_right=False):
    """An online softmax over chunks; ``zero_guard=False``: 0 / 0 for a query with no key."""
    L, S = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    allowed = (_bottom_right_when_longer(L, S, query.device) if bottom_right else
               torch.ones(L, S, dtype=torch.bool, device=query.device).tril())
    m = l = acc = None
    for j0 in range(0, S, chunk_size):
        j1 = min(j0 + chunk_size, S)
        s = query @ key[..., j0:j1, :].transpose(-2, -1) * scale
        if attn_mask is not None:
            b = attn_mask[..., j0:j1]
            s = s.masked_fill(~b, float("-inf")) if b.dtype == torch.bool else s + b
        if is_causal:
            s = s.masked_fill(~allowed[:, j0:j1], float("-inf"))
        if m is None:
            m = torch.full_like(s[..., :1], float("-inf"))
            l = torch.zeros_like(m)
            acc = torch.zeros_like(s[..., :1] * value[..., :1, :])
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(new == float("-inf"), torch.zeros_like(new), new)
        e, c = torch.exp(s - shift), torch.exp(m - shift)
        l, acc, m = c * l + e.sum(-1, keepdim=True), c * acc + e @ value[..., j0:j1, :], new
    return acc / (torch.where(l == 0, torch.ones_like(l), l) if zero_guard else l)


def duplicate_score_pairs_later(weights, tokens):
    T = tokens.shape[1]
    eq = tokens[:, :, None] == tokens[:, None, :]
    on = (weights * (eq & torch.ones(T, T, dtype=torch.bool).tril(-1))[:, None].to(weights.dtype)).sum(-1)
    has = (eq & ~torch.eye(T, dtype=torch.bool)).any(-1)[:, None].to(weights.dtype)  # later too
    return (on * has).sum((0, 2)) / has.sum((0, 2))


def grouped_linear_quadratic(query, key, value):
    """The (L, L) weights written inline: the exercise asks for the running sums."""
    G = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    pq, pk = torch.nn.functional.elu(query) + 1, torch.nn.functional.elu(key) + 1
    sim = (pq @ pk.transpose(-2, -1)).tril()
    return sim / (sim.sum(-1, keepdim=True) + 1e-6) @ value


def bahdanau_squeezed(query, keys, W_q, W_k, v_a):
    """squeeze() drops every size-1 axis: on a batch of one the context comes back (He,)."""
    w = torch.softmax(torch.tanh((query @ W_q.T).unsqueeze(1) + keys @ W_k.T) @ v_a, dim=-1)
    return torch.bmm(w.unsqueeze(1), keys).squeeze(), w


def head_difference_both_as_key(share, generator):
    return head_difference("key" if share == "both" else share, generator)


WRONG = {
    "padding_mask: S from the last length": (check_padding_mask, padding_mask_last_length,
                                             "S=None taken as the last length"),
    "masked_scores: bottom right once L > S": (check_masked_scores, masked_scores_bottom_right,
                                               "aligned to the bottom right"),
    "grouped_query_attention: bottom right once L > S": (
        check_grouped_query_attention, gqa_bottom_right, "aligned to the bottom right"),
    "chunked_attention: bottom right once L > S": (
        check_chunked_attention, partial(chunked, bottom_right=True), "aligned to the bottom right"),
    "chunked_attention: NaN for a query with no key": (
        check_chunked_attention, partial(chunked, zero_guard=False), "no key at all"),
    "dropout_block_forward: each entry kept with probability dropout": (
        check_dropout_block_forward, a.make_dropout_block(keep_with_p=True),
        "kept with probability dropout"),
    "duplicate_token_score: pairs whose token only comes back later": (
        check_duplicate_token_score, duplicate_score_pairs_later, "comes back only later"),
    "head_difference: share='both' taken for 'key'": (
        check_head_difference, head_difference_both_as_key, "share='both' taken for 'key'"),
    "bahdanau_attention: bmm(...).squeeze() on a batch of one": (
        check_bahdanau_attention, bahdanau_squeezed, "expected (1, 3) = (B, He)"),
}


@pytest.mark.parametrize("name", WRONG)
def test_the_wrong_answer_is_refused(name):
    check, answer, words = WRONG[name]
    with pytest.raises(CheckFailed) as info:
        check(answer)
    assert words in str(info.value), str(info.value)


def test_the_grouped_linear_attention_built_as_l_by_l_weights_gets_a_note(capsys):
    """Part 5 asks for the running sums, 'no (L, L) weights': written inline (no call of
    linear_attention, which had the only note) they passed with nothing said; now a note, as
    for the call, in the kernel and in what the grader records."""
    from qkv.checks import grading
    from qkv.checks.harness import check_now
    check_grouped_causal_linear_attention(grouped_linear_quadratic)
    assert "you built the (L, L) weights" in capsys.readouterr().out
    check = grading.CHECKS["check_grouped_causal_linear_attention"]
    assert "you built the (L, L) weights" in check_now(check, grouped_linear_quadratic, 1).notice
    from answers_beyond import grouped_causal_linear_attention as running_sums
    check_grouped_causal_linear_attention(running_sums)
    assert "you built" not in capsys.readouterr().out


def test_the_same_chunked_answer_with_its_guards_passes():
    check_chunked_attention(chunked)
    check_chunked_attention(chunked, seed=None)


def test_ablation_rise_with_how_ignored_is_named():
    from qkv.checks import check_ablation_rise
    from qkv.checks._ablation_experiment import ablation_rise

    def always_zeroed(model, layer, head, how, generator):
        return ablation_rise(model, layer, head, "zero", generator)

    with pytest.raises(CheckFailed) as info:
        check_ablation_rise(always_zeroed)
    assert "how ignored: the head always zeroed" in str(info.value), str(info.value)
    check_ablation_rise(ablation_rise)


def test_kv_cache_step_ignoring_scale_on_an_empty_cache_is_refused():
    from qkv.checks import check_kv_cache_step
    import qkv

    def kv_cache_step(query, key, value, k_cache=None, v_cache=None, scale=None):
        if k_cache is None:  # the first step: the default scale, whatever scale says
            k_cache, v_cache, scale = key, value, None
        else:
            k_cache = torch.cat([k_cache, key], dim=-2)
            v_cache = torch.cat([v_cache, value], dim=-2)
        L, S = query.shape[-2], k_cache.shape[-2]
        mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(S - L)
        out = qkv.scaled_dot_product_attention(query, k_cache, v_cache, attn_mask=mask,
                                               scale=scale)
        return out, k_cache, v_cache

    with pytest.raises(CheckFailed) as info:
        check_kv_cache_step(kv_cache_step)
    assert "empty cache with scale=0.3" in str(info.value), str(info.value)


def _experiment(name, **slip):
    """The experiment's own function with a slip, as a student's answer."""
    from qkv.checks import _beyond_early, _beyond_late, _beyond_masking, _beyond_position

    for module in (_beyond_masking, _beyond_early, _beyond_position, _beyond_late):
        if hasattr(module, name):
            return partial(getattr(module, name), **slip)
    raise LookupError(name)


@pytest.mark.parametrize("name,slip,words", [
    ("padding_leak", {"scale": math.sqrt(8)}, "divided by sqrt(8)"),
    ("padding_leak", {"queries": 16}, "16 queries drawn"),
    ("padding_leak", {"median": True}, "the median over the queries"),
    ("alibi_far_weight", {"first": 31}, "queries 31..63"),
    ("linear_gap", {"scaled_linear": True}, "scaled by 1/sqrt(E) for linear attention too"),
], ids=lambda x: str(x)[:30])
def test_an_experiment_slip_whose_mean_is_right_is_named_seed_for_seed(name, slip, words):
    import qkv.checks

    check = getattr(qkv.checks, f"check_{name}")
    with pytest.raises(CheckFailed) as info:
        check(_experiment(name, **slip))
    assert words in str(info.value), str(info.value)
    check(_experiment(name))


@pytest.mark.parametrize("slip,words", [
    ({"size": "after"}, "divided by the shuffled output's norm"),
    ({"size": "l1"}, "mean absolute values instead of norms"),
    ({"reuse": "once"}, "the first block's weights for every layer"),
    ({"reuse": "first"}, "the first block's weights for every layer"),
], ids=str)
def test_order_sensitivity_slips_are_named_seed_for_seed(slip, words):
    from qkv.checks import check_order_sensitivity

    with pytest.raises(CheckFailed) as info:
        check_order_sensitivity(partial(a.order_sensitivity, **slip))
    assert words in str(info.value), str(info.value)
    check_order_sensitivity(a.order_sensitivity)


def test_mean_ablate_handing_back_its_input_is_refused():
    from qkv.checks import check_mean_ablate
    from answers_beyond import mean_ablate

    def returns_its_input(head_outputs, heads, num_heads):
        if not heads:
            return head_outputs  # the text asks for a new tensor
        return mean_ablate(head_outputs, heads, num_heads)

    with pytest.raises(CheckFailed) as info:
        check_mean_ablate(returns_its_input)
    assert "with heads=[] it returned head_outputs itself" in str(info.value), str(info.value)
    check_mean_ablate(mean_ablate)


def test_a_dropout_that_seeds_torch_itself_is_refused():
    """torch.manual_seed(0) inside the block drops the same features at every training step."""
    def seeds_itself(x, params, num_heads, dropout=0.1, training=False):
        torch.manual_seed(0)
        return a.dropout_block_forward(x, params, num_heads, dropout, training)

    with pytest.raises(CheckFailed) as info:
        check_dropout_block_forward(seeds_itself)
    assert "dropped the same entries whatever torch's random state was" in str(info.value)
    check_dropout_block_forward(a.dropout_block_forward)


def test_padded_causal_with_one_maximum_over_every_key_is_named():
    """exp(s - the row's maximum over all keys) * allowed: right until a hidden key outscores
    every visible one by about 700, when the visible exponentials are all 0 (and 0 / 0)."""
    from qkv.checks import check_padded_causal_attention

    def global_max(query, key, value, lengths):
        L, S = query.shape[-2], key.shape[-2]
        s = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
        past = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        real = torch.arange(S, device=query.device)[None, :] < lengths[:, None]
        e = torch.exp(s - s.amax(-1, keepdim=True)) * (past & real[:, None, None, :])
        return e / e.sum(-1, keepdim=True) @ value

    with pytest.raises(CheckFailed) as info:
        check_padded_causal_attention(global_max)
    assert "the row maximum taken over every key" in str(info.value), str(info.value)
