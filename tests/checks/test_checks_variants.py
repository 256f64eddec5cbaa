"""Chapter 9's checks (repeat_kv, grouped_query_attention, causal_mask_bottom_right) on catalogues
of wrong and right answers."""

import answers_variants as A
from catalogue import catalogue_tests
from qkv import checks

GROUPS = {
    "repeat_kv": (checks.check_repeat_kv, A.REPEAT_WRONG, A.REPEAT_RIGHT),
    "grouped_query_attention": (checks.check_grouped_query_attention, A.GQA_WRONG, A.GQA_RIGHT),
    "causal_mask_bottom_right": (checks.check_causal_mask_bottom_right, A.MASK_WRONG, A.MASK_RIGHT),
}
test_wrong_answer_is_named, test_right_answer_passes = catalogue_tests(GROUPS)
