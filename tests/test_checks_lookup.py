"""The soft-lookup and bottleneck checks on catalogues of wrong and right answers."""

import pytest

import answers_lookup as A
from catalogue import catalogue_tests
from qkv import checks

GROUPS = {
    "soft_lookup": (checks.check_soft_lookup, A.SOFT_WRONG, A.SOFT_RIGHT),
    "additive_score": (checks.check_additive_score, A.ADDITIVE_WRONG, A.ADDITIVE_RIGHT),
    "luong_score": (checks.check_luong_score, A.LUONG_WRONG, A.LUONG_RIGHT),
    "bahdanau_attention": (checks.check_bahdanau_attention, A.BAHDANAU_WRONG, A.BAHDANAU_RIGHT),
}
test_wrong_answer_is_named, test_right_answer_passes = catalogue_tests(GROUPS)


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_unwritten_answer_says_so(group):
    check = GROUPS[group][0]

    def answer(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(AssertionError, match="not written yet"):
        check(answer)


def test_soft_lookup_may_use_torch_softmax_but_not_attention():
    checks.check_soft_lookup(A.soft_einsum)
    import torch.nn.functional as F

    def via_sdpa(q, k, v, temperature=1.0):
        out = F.scaled_dot_product_attention(q, k, v, scale=1.0 / temperature)
        return out, None

    with pytest.raises(AssertionError, match="scaled_dot_product_attention"):
        checks.check_soft_lookup(via_sdpa)
