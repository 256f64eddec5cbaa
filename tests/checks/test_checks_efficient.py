"""The efficient checks (chunked_attention, kv_cache_step, attention_backward,
sliding_kv_cache_step) on catalogues of wrong and right answers."""

import answers_efficient as A
from catalogue import catalogue_tests
from qkv import checks

GROUPS = {
    "chunked_attention": (checks.check_chunked_attention, A.CHUNKED_WRONG, A.CHUNKED_RIGHT),
    "kv_cache_step": (checks.check_kv_cache_step, A.KV_WRONG, A.KV_RIGHT),
    "attention_backward": (checks.check_attention_backward, A.BACKWARD_WRONG, A.BACKWARD_RIGHT),
    "sliding_kv_cache_step": (checks.check_sliding_kv_cache_step, A.RING_WRONG, A.RING_RIGHT),
}
test_wrong_answer_is_named, test_right_answer_passes = catalogue_tests(GROUPS)


def test_kv_cache_step_notices_torch_attention():
    # Assignment 8 asks not to: a right answer through torch's SDPA gets a notice (a flag).

    from qkv.checks import grading
    from qkv.checks.harness import check_now

    result = check_now(grading.CHECKS["check_kv_cache_step"], A.kv_with_sdpa, 0)
    assert "torch.nn.functional.scaled_dot_product_attention" in result.notice
