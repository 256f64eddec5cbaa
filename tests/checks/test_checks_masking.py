"""The masking checks (causal_mask, padding_mask) on catalogues of wrong and right answers."""

import answers_masking as A
from catalogue import catalogue_tests
from qkv import checks

GROUPS = {
    "causal_mask": (checks.check_causal_mask, A.CAUSAL_WRONG, A.CAUSAL_RIGHT),
    "padding_mask": (checks.check_padding_mask, A.PADDING_WRONG, A.PADDING_RIGHT),
}
test_wrong_answer_is_named, test_right_answer_passes = catalogue_tests(GROUPS)
