"""The scaling checks (attention_scores, scaled_dot_product_attention, dot_product_variance) on
catalogues of wrong and right answers, and what they refuse."""

import math

import pytest
import torch
import torch.nn.functional as F

import qkv
from answers_scaling import SDPA_RIGHT, SDPA_WRONG, VARIANCE_RIGHT, VARIANCE_WRONG, make_sdpa
from catalogue import catalogue_tests
from qkv.checks import (check_attention_scores, check_dot_product_variance,
                        check_scaled_dot_product_attention)
from qkv.checks._variance import VARIANCE_SAMPLES, variance_tolerance

GROUPS = {
    "scaled_dot_product_attention": (check_scaled_dot_product_attention, SDPA_WRONG, SDPA_RIGHT),
    "dot_product_variance": (check_dot_product_variance, VARIANCE_WRONG, VARIANCE_RIGHT),
}
test_wrong_answer_is_named, test_right_answer_passes = catalogue_tests(GROUPS)


def test_each_wrong_answer_gets_its_own_hint():
    messages = {}
    for name, (answer, _) in SDPA_WRONG.items():
        with pytest.raises(AssertionError) as info:
            check_scaled_dot_product_attention(answer)
        messages[name] = str(info.value).split("\n")[0].split(": ", 2)[-1]
    # Off-by-one in either direction share a family name but not a message.
    assert len(set(messages.values())) == len(messages)


def _scores(query, key, attn_mask=None, is_causal=False, scale=None):
    # -3e4: far below every score, and it fits in float16 (-1e9 does not: see SDPA_WRONG).
    return make_sdpa(give="scores", fill=-3e4)(query, key, None, attn_mask, 0.0, is_causal, scale)


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
        qkv.scaled_dot_product_attention_with_weights(q, k, v, attn_mask, dropout_p,
                                                     is_causal, scale)[0],
])
def test_sdpa_notices_delegation(delegate, capsys):
    check_scaled_dot_product_attention(delegate)  # right: a notice, not a failure
    assert "this exercise asks you to write it yourself" in capsys.readouterr().out


def test_softmax_may_be_used_inside_attention():
    check_scaled_dot_product_attention(make_sdpa(softmax="torch"))


def test_variance_notices_delegation(capsys):
    check_dot_product_variance(lambda d, n, g: qkv.dot_product_variance(d, n, g))
    assert "you called qkv.dot_product_variance" in capsys.readouterr().out


def test_variance_check_states_a_tolerance_a_right_answer_meets():
    # The reference, measured on many seeds, stays inside the stated tolerance.
    for d in (4, 64, 256):
        tol = variance_tolerance(d, VARIANCE_SAMPLES)
        assert tol == pytest.approx(5 * d * math.sqrt((2 + 6 / d) / VARIANCE_SAMPLES))
        for s in range(5):
            est = qkv.dot_product_variance(d, VARIANCE_SAMPLES, torch.Generator().manual_seed(s))
            assert abs(est - d) < tol / 2


def test_variance_check_rejects_a_non_number():
    with pytest.raises(AssertionError, match="expected one finite number"):
        check_dot_product_variance(lambda d, n, g: torch.randn(n, generator=g))


def test_the_formula_plus_noise_of_a_sample_variance_is_told_it_drew_too_little():
    """wrong9: d_k plus noise of a sample variance's size, scaled to n_samples, passed every
    test (the estimates, the seeds, both spread tests). It draws one number where n_samples
    pairs are 160,000: refused, and said so."""
    import math

    def fake(d_k, n_samples, generator):
        se = d_k * math.sqrt((2 + 6 / d_k) / n_samples)
        return d_k + se * torch.randn((), generator=generator).item()

    with pytest.raises(AssertionError, match="drew at most 624 random numbers"):
        check_dot_product_variance(fake)


def test_a_variance_on_numpy_generator_seeded_from_the_one_given_is_told_so():
    """honest10: pairs drawn by NumPy's generator, seeded from one number drawn from the one
    passed in, are no fewer than asked: the verdict names the other generator too."""
    import numpy as np

    def numpy_pairs(d_k, n_samples, generator):
        rng = np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=generator)))
        q, k = rng.standard_normal((n_samples, d_k)), rng.standard_normal((n_samples, d_k))
        return float((q * k).sum(-1).var(ddof=1))

    with pytest.raises(AssertionError, match="(?s)another generator.*generator passed in itself"):
        check_dot_product_variance(numpy_pairs)
