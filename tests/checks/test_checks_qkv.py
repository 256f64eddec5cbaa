"""The qkv checks (self_attention, cross_attention) on catalogues of wrong and right answers."""

import pytest
import torch.nn.functional as F

import answers_qkv as A
from catalogue import catalogue_tests
import qkv
from qkv.checks import check_cross_attention, check_self_attention

GROUPS = {
    "self_attention": (check_self_attention, A.SELF_WRONG, A.SELF_RIGHT),
    "cross_attention": (check_cross_attention, A.CROSS_WRONG, A.CROSS_RIGHT),
}
test_wrong_answer_is_named, test_right_answer_passes = catalogue_tests(GROUPS)


@pytest.mark.parametrize("check,delegate", [
    (check_self_attention, lambda x, W_q, W_k, W_v: qkv.self_attention(x, W_q, W_k, W_v)),
    (check_self_attention, lambda x, W_q, W_k, W_v: F.scaled_dot_product_attention(
        x @ W_q.T, x @ W_k.T, x @ W_v.T)),
    (check_cross_attention, lambda x, c, W_q, W_k, W_v: qkv.scaled_dot_product_attention(
        x @ W_q.T, c @ W_k.T, c @ W_v.T)),
])
def test_delegation_is_noticed(check, delegate, capsys):
    check(delegate)  # right: a notice, not a failure
    assert "this exercise asks you to write it yourself" in capsys.readouterr().out
