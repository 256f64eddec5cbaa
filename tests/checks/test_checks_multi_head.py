"""The multi-head checks (split_heads, merge_heads, MultiHeadAttention) on catalogues of wrong
and right answers."""

import answers_multi_head as A
from catalogue import catalogue_tests
from qkv import checks

GROUPS = {
    "split_heads": (checks.check_split_heads, A.SPLIT_WRONG, A.SPLIT_RIGHT),
    "merge_heads": (checks.check_merge_heads, A.MERGE_WRONG, A.MERGE_RIGHT),
    "MultiHeadAttention": (checks.check_MultiHeadAttention, A.MHA_WRONG, A.MHA_RIGHT),
}
test_wrong_answer_is_named, test_right_answer_passes = catalogue_tests(GROUPS)
