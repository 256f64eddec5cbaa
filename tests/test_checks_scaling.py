"""The scaling checks on catalogues of wrong and right answers, and their guard."""

import warnings

import pytest
import torch
import torch.nn.functional as F

import qkv
from answers_scaling import SDPA_RIGHT, SDPA_WRONG, SOFTMAX_RIGHT, SOFTMAX_WRONG, make_sdpa
from qkv.checks import check_attention_scores, check_scaled_dot_product_attention, check_softmax


@pytest.mark.parametrize("name", sorted(SDPA_WRONG))
def test_sdpa_wrong_answer_is_named(name):
    answer, words = SDPA_WRONG[name]
    with pytest.raises(AssertionError, match="scaled_dot_product_attention: wrong on") as info:
        check_scaled_dot_product_attention(answer)
    assert words in str(info.value)


@pytest.mark.parametrize("name", sorted(SDPA_RIGHT))
def test_sdpa_right_answer_passes(name):
    check_scaled_dot_product_attention(SDPA_RIGHT[name])
    check_scaled_dot_product_attention(SDPA_RIGHT[name], seed=7)


@pytest.mark.parametrize("name", sorted(SOFTMAX_WRONG))
def test_softmax_wrong_answer_is_named(name):
    answer, words = SOFTMAX_WRONG[name]
    with pytest.raises(AssertionError, match="softmax: wrong on") as info:
        check_softmax(answer)
    assert words in str(info.value)


@pytest.mark.parametrize("name", sorted(SOFTMAX_RIGHT))
def test_softmax_right_answer_passes(name):
    check_softmax(SOFTMAX_RIGHT[name])
    check_softmax(SOFTMAX_RIGHT[name], seed=7)


def test_each_wrong_answer_gets_its_own_hint():
    messages = {}
    for name, (answer, _) in SDPA_WRONG.items():
        with pytest.raises(AssertionError) as info:
            check_scaled_dot_product_attention(answer)
        messages[name] = str(info.value).split("\n")[0].split(": ", 2)[-1]
    # Off-by-one in either direction share a family name but not a message.
    assert len(set(messages.values())) == len(messages)


def _scores(query, key, attn_mask=None, is_causal=False, scale=None):
    return make_sdpa(give="scores", fill=-1e9)(query, key, None, attn_mask, 0.0, is_causal, scale)


def test_attention_scores_accepts_large_negative_fill_and_names_mistakes():
    check_attention_scores(_scores)

    def unscaled(query, key, attn_mask=None, is_causal=False, scale=None):
        return make_sdpa(give="scores", scale_rule="none")(query, key, None, attn_mask, 0.0,
                                                          is_causal, scale)

    with pytest.raises(AssertionError, match="no scaling"):
        check_attention_scores(unscaled)


@pytest.mark.parametrize("delegate", [
    lambda q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None:
        F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale=scale),
    lambda q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None:
        qkv.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale),
    lambda q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None:
        qkv.scaling.scaled_dot_product_attention_with_weights(q, k, v, attn_mask)[0],
])
def test_sdpa_refuses_delegation(delegate):
    with pytest.raises(AssertionError, match="this exercise asks you to write it yourself"):
        check_scaled_dot_product_attention(delegate)


def test_alias_taken_before_the_check_is_blocked_and_restored():
    from qkv import scaled_dot_product_attention as my_attention  # alias taken early
    code = qkv.scaling.scaled_dot_product_attention.__code__

    def sdpa(*args, **kwargs):
        return my_attention(*args, **kwargs)

    with pytest.raises(AssertionError, match="calls qkv.scaled_dot_product_attention"):
        check_scaled_dot_product_attention(sdpa)
    assert qkv.scaling.scaled_dot_product_attention.__code__ is code
    q = torch.randn(2, 3, 4)
    torch.testing.assert_close(my_attention(q, q, q), F.scaled_dot_product_attention(q, q, q))


def test_caught_delegation_is_still_reported():
    def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        try:
            return F.scaled_dot_product_attention(q, k, v, attn_mask, is_causal=is_causal, scale=scale)
        except Exception:
            return make_sdpa()(q, k, v, attn_mask, dropout_p, is_causal, scale)

    with pytest.raises(AssertionError, match="torch.nn.functional.scaled_dot_product_attention"):
        check_scaled_dot_product_attention(sdpa)


def test_nn_multihead_attention_is_blocked():
    def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        m = torch.nn.MultiheadAttention(q.shape[-1], 1, batch_first=True).eval()
        return m(q, k, v)[0]

    with pytest.raises(AssertionError, match="nn.MultiheadAttention"):
        check_scaled_dot_product_attention(sdpa)


def test_softmax_may_be_used_inside_attention():
    check_scaled_dot_product_attention(make_sdpa(softmax="torch"))


def test_reassigned_comparisons_do_not_let_a_wrong_answer_pass(monkeypatch):
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    monkeypatch.setattr(torch, "equal", lambda *a, **k: True)
    monkeypatch.setattr(torch.testing, "assert_close", lambda *a, **k: None)
    with pytest.raises(AssertionError, match="no scaling"):
        check_scaled_dot_product_attention(SDPA_WRONG["no scaling"][0])


def test_checks_are_silent_even_when_the_answer_warns(capsys):
    def noisy(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        warnings.warn("a student's warning", UserWarning)
        return make_sdpa()(q, k, v, attn_mask, dropout_p, is_causal, scale)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning escaping the check would raise here
        check_scaled_dot_product_attention(noisy)
        with pytest.raises(AssertionError):
            check_scaled_dot_product_attention(SDPA_WRONG["key.T on batched input"][0])
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


def test_unwritten_exercise_says_so():
    def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        raise NotImplementedError()

    with pytest.raises(AssertionError, match="not written yet"):
        check_scaled_dot_product_attention(sdpa)


def test_not_a_function():
    with pytest.raises(AssertionError, match="expects your softmax itself"):
        check_softmax(3)


def test_thread_count_is_restored():
    n = torch.get_num_threads()
    check_softmax(SOFTMAX_RIGHT["max subtracted"])
    assert torch.get_num_threads() == n


def test_comparisons_reassigned_before_the_checks_are_imported():
    import subprocess
    import sys

    code = (
        "import torch, torch.testing\n"
        "torch.allclose = lambda *a, **k: True\n"
        "torch.equal = lambda *a, **k: True\n"
        "torch.testing.assert_close = lambda *a, **k: None\n"
        "import sys; sys.path.insert(0, 'tests')\n"
        "from answers_scaling import SDPA_WRONG\n"
        "from qkv.checks import check_scaled_dot_product_attention as check\n"
        "try:\n"
        "    check(SDPA_WRONG['no scaling'][0])\n"
        "except AssertionError as e:\n"
        "    print('caught:', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "caught:" in out.stdout and "no scaling" in out.stdout


def test_the_message_quoted_for_instructors_is_the_real_one():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "book" / "instructors.md").read_text()
    quoted = page.split("```text\n", 1)[1].split("```", 1)[0].strip()
    with pytest.raises(AssertionError) as info:
        check_scaled_dot_product_attention(SDPA_WRONG["inverted bool mask"][0])
    assert quoted == f"AssertionError: {info.value}"
