"""What a check says when a wrong answer matches no known mistake (``qkv.checks.harness._describe``).

Each test runs a wrong answer through a check, real or (where no real check can reach the
finding past its named mistakes) a small exercise of its own with no mistakes, and asserts
the description it gets.
"""

import math

import pytest
import torch

from qkv.checks import check_luong_score, check_scaled_dot_product_attention, check_soft_lookup
from qkv.checks.harness._describe import describe
from qkv.checks.harness._exercise import Case, Exercise
from qkv.checks.harness import run_check
from qkv.checks.harness._inputs import bool_mask, randn


def _message(check, answer) -> str:
    with pytest.raises(AssertionError) as info:
        check(answer)
    return str(info.value)


def _exercise(reference, build, dtype=torch.float64) -> Exercise:
    """An exercise with one case and no known mistakes: every failure is described."""
    return Exercise(name="f", reference=reference, cases=[Case("the case", build, dtype)])


def _scores(L=4, S=4, batch=(2,)):
    def build(gen, device, dtype):
        return (randn(gen, *batch, L, 3, device=device, dtype=dtype),
                randn(gen, *batch, S, 3, device=device, dtype=dtype)), {}
    return build


def test_a_result_with_its_axes_swapped_says_so():
    def luong_score(query, key, W=None):  # scores laid out (S, L)
        q = query if W is None else query @ W
        return key @ q.transpose(-2, -1)

    msg = _message(check_luong_score, luong_score)
    assert "the right values with the axes in another order" in msg
    assert "got shape (5, 3), expected (3, 5)" in msg
    assert "axis 0 holds the reference's axis 1" in msg


def test_a_square_result_transposed_is_a_permutation_not_a_difference():
    exercise = _exercise(lambda q, k: q @ k.transpose(-2, -1), _scores())
    msg = _message(lambda a: run_check(exercise, a), lambda q, k: k @ q.transpose(-2, -1))
    assert "the right values with the axes in another order" in msg
    assert "axis 1 holds the reference's axis 2; axis 2 holds the reference's axis 1" in msg
    assert "largest difference" in msg  # the numbers are still given


def test_a_constant_factor_is_named_with_its_value():
    def luong_score(query, key, W=None):
        s = query @ (key if W is None else key @ W.transpose(-2, -1)).transpose(-2, -1)
        return s / math.sqrt(8)  # a hard-coded scale the exercise does not ask for

    msg = _message(check_luong_score, luong_score)
    assert "the reference times 0.3536 (= 1/sqrt(8))" in msg


def test_weight_on_masked_keys_is_pointed_at():
    def build(gen, device, dtype):
        return (randn(gen, 2, 4, 5, device=device, dtype=dtype),
                bool_mask(gen, 2, 4, 5, device=device)), {}

    exercise = _exercise(lambda s, m: s.masked_fill(~m, float("-inf")).softmax(-1), build)
    msg = _message(lambda a: run_check(exercise, a), lambda s, m: (s * m).softmax(-1))
    assert "weight(s) are not 0 where the reference's weight is exactly 0 (a masked key" in msg
    assert "fill its score with -inf before the softmax" in msg


def test_weights_whose_rows_do_not_sum_to_one_are_named():
    def soft_lookup(query, keys, values, temperature=1.0):
        e = (query @ keys.transpose(-2, -1) / temperature).exp()
        w = e / e.sum()  # normalised over everything, not over each row
        return w @ values, w

    msg = _message(check_soft_lookup, soft_lookup)
    assert "the rows of the weights do not sum to one" in msg


def test_nan_where_the_reference_is_finite_is_counted():
    def build(gen, device, dtype):
        return ((randn(gen, 3, 6) + 1000).to(device=device, dtype=dtype),), {}

    exercise = _exercise(lambda x: x.softmax(-1), build)
    msg = _message(lambda a: run_check(exercise, a), lambda x: x.exp() / x.exp().sum(-1, keepdim=True))
    assert "18 value(s) are NaN where the reference is finite" in msg


def test_a_result_right_only_to_float32_precision_says_which():
    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        q, k, v = query.float(), key.float(), value.float()  # float32 inside, whatever came in
        s = q @ k.transpose(-2, -1) * (scale or 1 / math.sqrt(q.shape[-1]))
        L, S = s.shape[-2:]
        if is_causal:
            attn_mask = torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
        if attn_mask is not None:
            s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
                else s + attn_mask.float()
        return (s.softmax(-1) @ v).to(query.dtype)

    msg = _message(check_scaled_dot_product_attention, sdpa)
    assert "wrong on float64" in msg
    assert "float32's precision" in msg and "part of the computation ran in float32" in msg


def test_one_number_a_few_percent_off_is_not_told_it_ran_in_half_precision():
    """bfloat16's window is 5% wide at 3: one number landing in it says little (repeat_loss
    shifted the wrong way was told it ran in bfloat16); one computed in bfloat16 is still told."""
    want = torch.tensor(2.94263, dtype=torch.float64)
    what, hint = describe(torch.tensor(3.08792, dtype=torch.float64), want, 1e-7, 1e-10)
    assert "precision" not in what and "bfloat16" not in hint, what
    gen = torch.Generator().manual_seed(0)
    logits = 2 * torch.randn(4, 9, 32, generator=gen, dtype=torch.float64)
    tokens = torch.randint(0, 32, (4, 9), generator=gen)
    loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tokens)
    in_bf16 = torch.nn.functional.cross_entropy(logits.bfloat16().transpose(1, 2), tokens)
    what, hint = describe(in_bf16.double(), loss, 1e-7, 1e-10)
    assert "'s precision" in what and "part of the computation ran in" in hint, what


def test_a_formula_a_little_off_is_not_told_it_ran_in_a_lower_dtype():
    """All in float64: an epsilon in a denominator scales each row by its own factor, and a
    temperature under a square root misses by 60 epsilons of bfloat16, not by its rounding
    (both were told "part of the computation ran in float32 / bfloat16")."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 4, generator=gen, dtype=torch.float64)
    e = (x - x.amax(-1, keepdim=True)).exp()
    what, hint = describe(e / (e.sum(-1, keepdim=True) + 1e-6), x.softmax(-1), 1e-7, 1e-10)
    assert "float32" not in what + hint and "a factor of its own" in what, what
    assert "an epsilon added" in hint, hint
    s = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    what, hint = describe((s / math.sqrt(0.7)).softmax(-1), (s / 0.7).softmax(-1), 1e-7, 1e-10)
    assert "bfloat16" not in what + hint, what
    # The same softmax computed in bfloat16 and float32 is still told so.
    for dtype in (torch.bfloat16, torch.float32):
        what, hint = describe((s / 0.7).to(dtype).softmax(-1).double(), (s / 0.7).softmax(-1),
                              1e-7, 1e-10)
        assert "'s precision" in what and "part of the computation ran in" in hint, what


def test_a_result_right_on_some_batch_elements_names_them():
    def build(gen, device, dtype):
        pad = torch.tensor([[True] * 5, [True] * 3 + [False] * 2, [True] * 4 + [False]])
        return (randn(gen, 3, 4, 5, device=device, dtype=dtype), pad[:, None, :].to(device),
                randn(gen, 3, 5, 2, device=device, dtype=dtype)), {}

    def attend(s, m, v):
        return s.masked_fill(~m, float("-inf")).softmax(-1) @ v

    exercise = _exercise(attend, build)
    msg = _message(lambda a: run_check(exercise, a),
                   lambda s, m, v: attend(s, m[0], v))  # the mask of sequence 0 for every one
    assert "right for batch elements 0 but not for batch elements 1, 2 (along axis 0" in msg


def test_a_result_right_on_some_rows_names_them():
    def causal(s, diag=0):
        L, S = s.shape[-2:]
        allowed = torch.ones(L, S, dtype=torch.bool, device=s.device).tril(diag)
        return s.masked_fill(~allowed, float("-inf"))

    def build(gen, device, dtype):
        return (randn(gen, 2, 4, 4, device=device, dtype=dtype),
                randn(gen, 2, 4, 3, device=device, dtype=dtype)), {}

    exercise = _exercise(lambda s, v: causal(s).softmax(-1) @ v, build)
    msg = _message(lambda a: run_check(exercise, a),
                   lambda s, v: causal(s, 1).softmax(-1) @ v)  # one future key allowed
    assert "right for rows 3 but not for rows 0, 1, 2" in msg


def test_a_plain_difference_still_reports_the_largest_one():
    what, hint = describe(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.5, 2.0]), 1e-4, 1e-5)
    assert what.startswith("largest difference 1 at index (2,)")
    assert hint == ""


def test_a_shape_mismatch_that_is_no_permutation_gives_the_legend():
    what, _ = describe(torch.zeros(2, 3), torch.zeros(2, 4), 1e-4, 1e-5, legend="(L, S)")
    assert what == "the result has shape (2, 3), expected (2, 4) = (L, S): axis 1 is 3 (expected 4)"


def test_a_bool_mask_names_its_fault():
    from qkv.checks.harness._findings import describe_bool

    tril = torch.ones(3, 5, dtype=torch.bool).tril(2)
    assert "inverted" in describe_bool(~tril, tril)[0]
    assert "tril(1), expected tril(2)" in describe_bool(tril.tril(1), tril)[0]
    square = torch.ones(4, 4, dtype=torch.bool).tril()
    assert "transposed" in describe_bool(square.T, square)[0]


def test_an_error_quotes_the_line_of_the_answer_that_raised():
    def softmax(x, dim=-1):
        e = (x - x.max(dim=dim, keepdim=True)).exp()  # max(dim=) is a (values, indices) pair
        return e / e.sum(dim=dim, keepdim=True)

    from qkv.checks import check_softmax

    msg = _message(check_softmax, softmax)
    assert "at line" in msg and "of softmax: e = (x - x.max(dim=dim, keepdim=True)).exp()" in msg
