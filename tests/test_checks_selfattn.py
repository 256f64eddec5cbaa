"""The self/cross-attention and variance checks on catalogues of wrong and right answers."""

import math

import pytest
import torch
import torch.nn.functional as F

import answers_selfattn as A
from catalogue import catalogue_tests
import qkv
from qkv.checks import check_cross_attention, check_dot_product_variance, check_self_attention
from qkv.checks.qkv import VARIANCE_SAMPLES, variance_tolerance

GROUPS = {
    "self_attention": (check_self_attention, A.SELF_WRONG, A.SELF_RIGHT),
    "cross_attention": (check_cross_attention, A.CROSS_WRONG, A.CROSS_RIGHT),
    "dot_product_variance": (check_dot_product_variance, A.VARIANCE_WRONG, A.VARIANCE_RIGHT),
}
test_wrong_answer_is_named, test_right_answer_passes = catalogue_tests(GROUPS)


@pytest.mark.parametrize("check,delegate", [
    (check_self_attention, lambda x, W_q, W_k, W_v: qkv.self_attention(x, W_q, W_k, W_v)),
    (check_self_attention, lambda x, W_q, W_k, W_v: F.scaled_dot_product_attention(
        x @ W_q, x @ W_k, x @ W_v)),
    (check_cross_attention, lambda x, c, W_q, W_k, W_v: qkv.scaled_dot_product_attention(
        x @ W_q, c @ W_k, c @ W_v)),
    (check_dot_product_variance, lambda d, n, g: qkv.dot_product_variance(d, n, g)),
])
def test_delegation_is_refused(check, delegate):
    with pytest.raises(AssertionError, match="this exercise asks you to write it yourself"):
        check(delegate)


def test_unwritten_answer_says_so():
    def not_yet(*args):
        raise NotImplementedError

    for check in (check_self_attention, check_cross_attention, check_dot_product_variance):
        with pytest.raises(AssertionError, match="not written yet"):
            check(not_yet)


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
