"""The soft-lookup and bottleneck checks on catalogues of wrong and right answers."""

import pytest

import answers_lookup as A
from qkv import checks

GROUPS = {
    "soft_lookup": (checks.check_soft_lookup, A.SOFT_WRONG, A.SOFT_RIGHT),
    "additive_score": (checks.check_additive_score, A.ADDITIVE_WRONG, A.ADDITIVE_RIGHT),
    "luong_score": (checks.check_luong_score, A.LUONG_WRONG, A.LUONG_RIGHT),
    "bahdanau_attention": (checks.check_bahdanau_attention, A.BAHDANAU_WRONG, A.BAHDANAU_RIGHT),
}
WRONG = [(g, n) for g, (_, wrong, _) in GROUPS.items() for n in wrong]
RIGHT = [(g, n) for g, (_, _, right) in GROUPS.items() for n in right]


@pytest.mark.parametrize("group,name", WRONG)
def test_wrong_answer_is_named(group, name):
    check, wrong, _ = GROUPS[group]
    answer, words = wrong[name]
    with pytest.raises(AssertionError, match=f"{group}: wrong on") as info:
        check(answer)
    assert words in str(info.value), str(info.value)


@pytest.mark.parametrize("group,name", RIGHT)
def test_right_answer_passes(group, name):
    check, _, right = GROUPS[group]
    check(right[name])
    check(right[name], seed=3)


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
