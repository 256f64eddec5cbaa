"""The variations of assignments 1 to 4 (functions the reference does not contain): each
catalogued mistake is named, each honest form of a right answer passes, in the kernel and
through the grader's API, and the mistakes are really wrong (no mistake equals the reference)."""

import pytest
import torch

import answers_variations as a
from catalogue import catalogue_tests
from qkv.checks import (_variations_early as v, check_coverage_attention, check_quiet_attention,
                        check_self_attention_with_null, check_sparsemax_lookup, grading)
from qkv.checks.harness import check_now

GROUPS = {
    "coverage_attention": (check_coverage_attention, {
        "after the tanh": (a.coverage_attention_after, "w_c c_j added after the tanh"),
        "no coverage": (a.coverage_attention_none, "the coverage left out"),
        "pair swapped": (a.coverage_attention_swapped, "returning (weights, context)"),
        "batch softmax": (a.coverage_attention_batch, "softmax over the batch"),
    }, {"broadcast": a.coverage_attention, "einsum and bmm": a.coverage_attention_einsum,
        "a loop over the positions": a.coverage_attention_loop}),
    "sparsemax_lookup": (check_sparsemax_lookup, {
        "softmax": (a.sparsemax_lookup_softmax, "a softmax (no weight is exactly 0)"),
        "no - 1": (a.sparsemax_lookup_no_minus_one, "the threshold without its - 1"),
        "every score": (a.sparsemax_lookup_all, "the threshold from every score"),
        "temperature ignored": (a.sparsemax_lookup_untempered, "the temperature ignored"),
        "support one too large": (a.sparsemax_lookup_one_more, "one score too large"),
    }, {"sorted": a.sparsemax_lookup, "bisection": a.sparsemax_lookup_bisection,
        "keys dropped until none is below": a.sparsemax_lookup_drop}),
    "self_attention_with_null": (check_self_attention_with_null, {
        "value left out": (a.self_attention_with_null_no_value, "its value v_null left out"),
        "null score unscaled": (a.self_attention_with_null_unscaled, "null score not divided"),
    }, {"joined": a.self_attention_with_null, "apart": a.self_attention_with_null_apart}),
    "quiet_attention": (check_quiet_attention, {
        "softmax": (a.quiet_attention_softmax, "no 1 in the denominator"),
        "1 after the shift": (a.quiet_attention_shifted_one, "the 1 added after subtracting"),
        "unstable": (a.quiet_attention_unstable, "no maximum subtracted"),
        "1 in each term": (a.quiet_attention_each, "1 added to every term"),
    }, {"clamped maximum": a.quiet_attention, "a zero logit appended": a.quiet_attention_zero_logit,
        "softplus of logsumexp": a.quiet_attention_softplus,
        "the row maximum, not clamped": a.quiet_attention_row_max}),
}
test_wrong_answer_is_named, test_right_answer_passes = catalogue_tests(GROUPS)

RIGHT = [(f"check_{g}", n) for g, (_, _, r) in GROUPS.items() for n in r]


@pytest.mark.parametrize("check,name", RIGHT)
def test_an_honest_answer_passes_the_grader_without_a_notice(check, name):
    answer = GROUPS[check[len("check_"):]][2][name]
    outcomes = []
    for args, kwargs in grading.calls(check, 5):
        outcomes.append(grading.run_student(check, answer, args, kwargs))
    result = grading.judge(check, 5, outcomes)
    assert result.passed and not result.notice, result.message()
    assert check_now(grading.CHECKS[check], answer, 11).passed


# Each check's exercises (a pair's: one per item, with the same catalogue).
EXERCISES = [(v.COVERAGE_WEIGHTS, v.COVERAGE_CONTEXT), (v.SPARSE_WEIGHTS, v.SPARSE_OUTPUT),
             (v.SELF_ATTENTION_WITH_NULL,), (v.QUIET_ATTENTION,)]


def _differs(exercise, fn):
    for case in exercise.cases:
        args, kwargs = case.build(torch.Generator().manual_seed(0), torch.device("cpu"), case.dtype)
        try:
            got = fn(*args, **kwargs)
        except Exception:  # noqa: BLE001 (an error is a difference)
            return True
        want = exercise.reference(*args, **kwargs)
        if got.shape != want.shape or not torch.allclose(got, want, rtol=1e-3, atol=1e-5):
            return True
    return False


@pytest.mark.parametrize("exercises", EXERCISES, ids=lambda e: e[0].name)
def test_every_catalogued_mistake_differs_from_the_reference_on_some_case(exercises):
    for i, mistake in enumerate(exercises[0].mistakes):
        assert any(_differs(e, e.mistakes[i].fn) for e in exercises), mistake.name


def test_sparsemax_weights_are_exactly_zero_and_sum_to_one():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(50, 9, generator=g, dtype=torch.float64) * 3
    p = v.sparsemax(z)
    assert (p >= 0).all() and torch.allclose(p.sum(-1), torch.ones(50, dtype=torch.float64))
    assert (p == 0).any(-1).all(), "scores of spread 3 over 9 keys leave some weights at 0"
    # The projection: no point of the simplex is closer (a few random ones tried).
    for _ in range(20):
        r = torch.distributions.Dirichlet(torch.ones(9, dtype=torch.float64)).sample((50,))
        assert ((z - p) ** 2).sum(-1).le(((z - r) ** 2).sum(-1) + 1e-12).all()


def test_quiet_attention_weights_sum_to_less_than_one_and_vanish_on_negative_scores():
    q, k = torch.randn(3, 4, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64)
    w = v.quiet(q, k, torch.eye(5, dtype=torch.float64))
    assert (w.sum(-1) < 1).all() and (w > 0).all()
    far = v.quiet(q, -1000 * torch.ones(5, 4, dtype=torch.float64) + k, torch.eye(5, dtype=torch.float64),
                  scale=1.0)
    assert torch.isfinite(far).all()
