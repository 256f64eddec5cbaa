"""The lookup checks (softmax, soft_lookup, additive_score, luong_score) on catalogues of wrong
and right answers."""

import pytest
import torch.nn.functional as F

import answers_lookup as A
from catalogue import catalogue_tests
from qkv import checks

GROUPS = {
    "softmax": (checks.check_softmax, A.SOFTMAX_WRONG, A.SOFTMAX_RIGHT),
    "soft_lookup": (checks.check_soft_lookup, A.SOFT_WRONG, A.SOFT_RIGHT),
    "additive_score": (checks.check_additive_score, A.ADDITIVE_WRONG, A.ADDITIVE_RIGHT),
    "luong_score": (checks.check_luong_score, A.LUONG_WRONG, A.LUONG_RIGHT),
}
test_wrong_answer_is_named, test_right_answer_passes = catalogue_tests(GROUPS)


def test_soft_lookup_may_use_torch_softmax_but_not_attention():
    checks.check_soft_lookup(A.soft_einsum)

    def via_sdpa(q, k, v, temperature=1.0):
        out = F.scaled_dot_product_attention(q, k, v, scale=1.0 / temperature)
        return out, None

    with pytest.raises(AssertionError, match="scaled_dot_product_attention"):
        checks.check_soft_lookup(via_sdpa)
