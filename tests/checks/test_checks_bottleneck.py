"""The bottleneck check (bahdanau_attention) on its catalogue of wrong and right answers."""

import answers_bottleneck as A
from catalogue import catalogue_tests
from qkv import checks

GROUPS = {
    "bahdanau_attention": (checks.check_bahdanau_attention, A.BAHDANAU_WRONG, A.BAHDANAU_RIGHT),
}
test_wrong_answer_is_named, test_right_answer_passes = catalogue_tests(GROUPS)
