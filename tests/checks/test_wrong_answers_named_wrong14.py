"""Wrong answers of the wrong14 walk whose message blamed another cause or said only "largest
difference": each is now named for what it is.

Each is written as the student wrote it; the words are what the message must say (and
``not_words`` what it must no longer say).
"""

import math

import pytest
import torch
import torch.nn.functional as F

from qkv import checks


def _message(check, answer, **kw) -> str:
    with pytest.raises(AssertionError) as info:
        check(answer, **kw)
    return str(info.value)


def _scores_without_return(Q, K):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])  # noqa: F841 (the return forgotten)


def self_attention_helper_without_return(x, W_q, W_k, W_v):
    Q, K, V = x @ W_q.T, x @ W_k.T, x @ W_v.T
    return torch.softmax(_scores_without_return(Q, K), dim=-1) @ V


def test_none_from_a_helper_without_return_is_not_blamed_on_a_number():
    msg = _message(checks.check_self_attention, self_attention_helper_without_return)
    assert "without `return`" in msg and "is None" in msg
    assert "Python number" not in msg


def masked_scores_float_mask_as_bool(scores, attn_mask=None, is_causal=False):
    if is_causal and attn_mask is not None:
        raise ValueError("either attn_mask or is_causal")
    if is_causal:
        attn_mask = torch.ones(*scores.shape[-2:], dtype=torch.bool,
                               device=scores.device).tril()
    if attn_mask is None:
        return scores
    if attn_mask.dtype == torch.bool:
        return scores.masked_fill(~attn_mask, float("-inf"))
    return scores.masked_fill(attn_mask != 0, float("-inf"))  # a float mask is added


def test_a_float_mask_used_as_a_bool_is_named_not_blamed_on_overflow():
    msg = _message(checks.check_masked_scores, masked_scores_float_mask_as_bool)
    assert "a float mask used as a bool" in msg and "not a bool mask: add it" in msg
    assert "overflow" not in msg


def self_attention_softmax_without_dim(x, W_q, W_k, W_v):
    Q, K, V = x @ W_q.T, x @ W_k.T, x @ W_v.T
    return F.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])) @ V


@pytest.mark.filterwarnings("ignore:Implicit dimension choice")
def test_a_softmax_without_dim_is_named():
    msg = _message(checks.check_self_attention, self_attention_softmax_without_dim)
    assert "softmax with no dim" in msg and "torch picks the axis" in msg


def padding_leak_percent(length, S, generator):
    q = torch.randn(8, 16, generator=generator)
    k = torch.randn(S, 16, generator=generator)
    return 100 * torch.softmax(q @ k.T / 4.0, -1)[:, length:].sum(-1).mean().item()


def test_a_measurement_returned_as_a_percentage_is_named():
    msg = _message(checks.check_padding_leak, padding_leak_percent)
    assert "times 100, a percentage" in msg and "return the fraction" in msg


def _padded_causal(kind):
    def padded_causal_attention(query, key, value, lengths):
        L, S = query.shape[-2], key.shape[-2]
        causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        real = torch.arange(S, device=query.device)[None, :] < lengths[:, None]
        allowed = {"no padding": causal, "no causal": real[:, None, None, :]}.get(
            kind, causal & real[:, None, None, :])
        d = math.sqrt(S) if kind == "sqrt(S)" else math.sqrt(query.shape[-1])
        s = (query @ key.transpose(-2, -1) / d).masked_fill(~allowed, float("-inf"))
        return torch.softmax(s, -1) @ value
    return padded_causal_attention


@pytest.mark.parametrize("kind, words", [
    ("no padding", "the padding not masked"), ("no causal", "the causal mask left out"),
    ("sqrt(S)", "scaling by sqrt(S), the number of keys")])
def test_padded_causal_attention_slips_are_named(kind, words):
    msg = _message(checks.check_padded_causal_attention, _padded_causal(kind))
    assert words in msg and "right for" not in msg


def test_padded_causal_attention_done_right_passes():
    checks.check_padded_causal_attention(_padded_causal("right"))


@pytest.mark.parametrize("question, answer, params, said", [
    ("variants_q1", 2 * 16 * 4 * 128 * 2 / 1024, dict(layers=16, kv_heads=4), "that is in KiB"),
    ("variants_q1", 2 * 20 * 2 * 128 * 2 / 2**20, dict(layers=20, kv_heads=2), "that is in MiB"),
    ("variants_q1", 2 * 16 * 4 * 128 * 2 / 1000, dict(layers=16, kv_heads=4), "that is in kB"),
    ("bottleneck_q1", 16 * 97 + 2 * 16, dict(attn_dim=16), "that counts biases"),
    ("bottleneck_q1", 16 * 97 + 2 * 16 + 1, dict(attn_dim=16), "that counts biases")])
def test_a_unit_slip_or_biases_counted_are_named(question, answer, params, said, monkeypatch,
                                                 tmp_path):
    from qkv.checks.questions import record
    monkeypatch.setenv(record.ENV, str(tmp_path / "answers.json"))
    with pytest.raises(AssertionError, match=said):
        checks.check_question(question, answer, **params)


def padding_mask_count_for_S(lengths, S=None):
    lengths = torch.as_tensor(lengths)
    S = len(lengths) if S is None else S  # the number of sequences, not the longest
    return torch.arange(S, device=lengths.device)[None, :] < lengths[:, None]


def test_padding_mask_with_the_number_of_sequences_for_S_is_named():
    msg = _message(checks.check_padding_mask, padding_mask_count_for_S)
    assert "len(lengths)" in msg and "int(lengths.max())" in msg


def rope_positions_halved(x, offset=0, base=10000.0):
    """Positions counted in half steps (a slip named nowhere): right at position 0 alone."""
    L, E = x.shape[-2:]
    pos = torch.arange(offset, offset + L, dtype=x.dtype, device=x.device)[:, None] / 2
    ang = pos * base ** (-torch.arange(0, E, 2, dtype=x.dtype, device=x.device) / E)
    c, s = ang.cos(), ang.sin()
    out = x.clone()
    out[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s
    out[..., 1::2] = x[..., 0::2] * s + x[..., 1::2] * c
    return out


def test_only_row_0_right_leads_with_the_formula_not_a_fixed_index():
    msg = _message(checks.check_apply_rope, rope_positions_halved)
    assert "right for rows 0 but" in msg
    assert "Look at: the formula is likely right only where it does not matter" in msg


def test_only_an_edge_row_right_leads_with_the_formula_unless_every_row_is_that_row():
    from qkv.checks.harness._describe import describe
    want = torch.randn(2, 5, 3, dtype=torch.float64)
    slip = want.clone()
    slip[:, 1:] *= 2  # row 0 right: a formula right only at position 0
    assert describe(slip, want, 1e-6, 1e-8)[1].startswith("the formula is likely right only")
    last = want.clone()
    last[:, :-1] *= 2  # the last row right: the last query has no key after it
    assert "the last query has no key after it" in describe(last, want, 1e-6, 1e-8)[1]
    fixed = want[:, :1].expand_as(want)  # every row is row 0: a fixed index
    assert describe(fixed, want, 1e-6, 1e-8)[1].startswith("look for what differs")


def _softmax_without_return(s):
    w = torch.softmax(s, dim=-1)  # noqa: F841 (the return forgotten)


def self_attention_weights_none(x, W_q, W_k, W_v):
    Q, K, V = x @ W_q.T, x @ W_k.T, x @ W_v.T
    return _softmax_without_return(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])) @ V


def test_none_used_in_an_operation_names_a_missing_return_too():
    msg = _message(checks.check_self_attention, self_attention_weights_none)
    assert "NoneType" in msg and "without `return`" in msg
