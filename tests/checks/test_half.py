"""Half precision in the checks: every exercise on floating inputs runs one float16 or bfloat16
case, against the reference computed in float32 and rounded once."""

import importlib
import pkgutil

import pytest
import torch

import qkv
import qkv.checks
from qkv.checks.harness import Exercise
from qkv.checks.harness._half import HALF, via_float32


def _exercises():
    """Every Exercise in qkv.checks, once."""
    found = {}
    for info in pkgutil.walk_packages(qkv.checks.__path__, "qkv.checks."):
        for value in vars(importlib.import_module(info.name)).values():
            if isinstance(value, Exercise):
                found[id(value)] = value
    return sorted(found.values(), key=lambda e: e.name)


EXERCISES = [e for e in _exercises() if any(c.dtype is not None for c in e.cases)]

# Floating exercises without a half case, and why.
WITHOUT_HALF = {
    # The training case compares the factor dropout scales the kept outputs by: it is
    # 1/(1 - p) exactly in full precision, not a rounding of it.
    "dropout_block_forward",
    # Assignment 10 analyses a model's weights and activations, which it runs in float32.
    "duplicate_token_score", "mean_ablate", "repeat_loss",
}


def test_the_exemptions_name_exercises_that_exist():
    assert WITHOUT_HALF <= {e.name for e in EXERCISES}


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.name)
def test_every_floating_exercise_runs_one_half_case_last(exercise):
    dtypes = [c.dtype for c in exercise.cases]
    if exercise.name in WITHOUT_HALF:
        assert not any(d in HALF for d in dtypes)
        return
    assert sum(d in HALF for d in dtypes) == 1
    # Last, so that the mistakes that do not depend on precision are named in full precision
    # (masked_scores: just before its last case, a mask with is_causal that must raise).
    position = -2 if exercise.name == "masked_scores" else -1
    assert dtypes[position] in HALF


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
