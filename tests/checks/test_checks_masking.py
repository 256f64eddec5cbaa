"""The masking checks (causal_mask, padding_mask, masked_scores, global_window_mask) on catalogues
of wrong and right answers."""

import pytest
import torch

import answers_masking as A
from catalogue import catalogue_tests
from qkv import checks

GROUPS = {
    "causal_mask": (checks.check_causal_mask, A.CAUSAL_WRONG, A.CAUSAL_RIGHT),
    "padding_mask": (checks.check_padding_mask, A.PADDING_WRONG, A.PADDING_RIGHT),
    "masked_scores": (checks.check_masked_scores, A.SCORES_WRONG, A.SCORES_RIGHT),
    "global_window_mask": (checks.check_global_window_mask, A.WINDOW_WRONG, A.WINDOW_RIGHT),
}
test_wrong_answer_is_named, test_right_answer_passes = catalogue_tests(GROUPS)


@pytest.mark.parametrize("check,answer", [(checks.check_causal_mask, A.causal_no_device),
                                          (checks.check_padding_mask, A.padding_no_device)])
def test_a_tensor_made_without_device_is_refused_only_where_it_is_wrong(check, answer):
    """On the CPU it is right; on a GPU the result would stay on the CPU: named there."""
    if not torch.cuda.is_available():
        check(answer)
        return
    with pytest.raises(AssertionError, match="device"):
        check(answer)
