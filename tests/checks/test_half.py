"""Half precision in the checks: every exercise on floating inputs runs one float16 or bfloat16
case, against the reference computed in float32 and rounded once."""

import pytest
import torch

import qkv
from qkv.checks import bottleneck, efficient, lookup, multi_head, qkv as qkv_checks, scaling
from qkv.checks.harness._half import HALF, via_float32

EXERCISES = [
    bottleneck.BAHDANAU_WEIGHTS, bottleneck.BAHDANAU_CONTEXT,
    lookup.SOFTMAX, lookup.SOFT_LOOKUP_WEIGHTS, lookup.SOFT_LOOKUP_OUTPUT, lookup.ADDITIVE_SCORE,
    lookup.LUONG_SCORE, qkv_checks.SELF_ATTENTION, qkv_checks.CROSS_ATTENTION,
    scaling.ATTENTION_SCORES, scaling.SCALED_DOT_PRODUCT_ATTENTION,
    multi_head.SPLIT_HEADS, multi_head.MERGE_HEADS, multi_head.MULTI_HEAD_ATTENTION,
    efficient.CHUNKED_ATTENTION, efficient.KV_CACHE_STEP, efficient.SLIDING_KV_CACHE_STEP,
]


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.name)
def test_every_floating_exercise_runs_one_half_case_last(exercise):
    dtypes = [c.dtype for c in exercise.cases]
    assert sum(d in HALF for d in dtypes) == 1
    # Last, so that the mistakes that do not depend on precision are named in full precision.
    assert dtypes[-1] in HALF


def test_the_reference_on_half_inputs_is_computed_in_float32_and_rounded_once():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 8, generator=gen).half() for _ in range(3))
    got = via_float32(qkv.scaled_dot_product_attention)(q, k, v)
    assert got.dtype == torch.float16
    exact = qkv.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert torch.equal(got, exact.half())
    # On full-precision inputs it is the reference itself.
    assert torch.equal(via_float32(qkv.softmax)(q.double()), qkv.softmax(q.double()))


def test_the_module_is_built_in_float32_for_a_half_case():
    seen = []

    def reference(spec, x):
        seen.append((spec["dtype"], spec["weights"].dtype, x.dtype))
        return x

    out = via_float32(reference)({"dtype": torch.bfloat16, "weights": torch.ones(2).bfloat16()},
                                 torch.ones(3).bfloat16())
    assert seen == [(torch.float32, torch.float32, torch.float32)]
    assert out.dtype == torch.bfloat16
