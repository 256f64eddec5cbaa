"""``qkv.checks.grading``, the API the trusted grader uses: every check's inputs, call and
verdict, with the values crossing as raw bytes (as they cross the sandbox's boundary)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

import answers_beyond
import answers_capstone
import answers_efficient
import answers_masking
import answers_variations
import qkv
from qkv.checks import grading
from qkv.checks.harness import ExerciseCheck
from qkv.checks.result import CheckFailed, CheckResult

# The reference as a student's answer, per check (options: those of a test cell).
REFERENCES = {
    "check_softmax": qkv.softmax,
    "check_soft_lookup": qkv.soft_lookup,
    "check_additive_score": qkv.additive_score,
    "check_luong_score": qkv.luong_score,
    "check_bahdanau_attention": qkv.bahdanau_attention,
    "check_self_attention": qkv.self_attention,
    "check_cross_attention": qkv.cross_attention,
    "check_attention_scores": lambda q, k, scale=None: qkv.attention_scores(q, k, scale=scale).to(
        q.dtype),
    "check_scaled_dot_product_attention": qkv.scaled_dot_product_attention,
    "check_dot_product_variance": qkv.dot_product_variance,
    "check_split_heads": qkv.split_heads,
    "check_merge_heads": qkv.merge_heads,
    "check_MultiHeadAttention": qkv.MultiHeadAttention,
    "check_causal_mask": qkv.causal_mask,
    "check_padding_mask": qkv.padding_mask,
    "check_masked_scores": answers_masking.scores_ok,
    "check_global_window_mask": answers_masking.window_ok,
    "check_sinusoidal_encoding": qkv.sinusoidal_encoding,
    "check_apply_rope": qkv.apply_rope,
    "check_alibi_bias": qkv.alibi_bias,
    "check_chunked_attention": qkv.chunked_attention,
    "check_kv_cache_step": qkv.kv_cache_step,
    # No reference in qkv for these two: a student's right answer.
    "check_attention_backward": answers_efficient.BACKWARD_RIGHT["matmul"],
    "check_sliding_kv_cache_step": answers_efficient.RING_RIGHT["clone and write the slot"],
    "check_repeat_kv": qkv.repeat_kv,
    "check_grouped_query_attention": qkv.grouped_query_attention,
    "check_causal_mask_bottom_right": qkv.causal_mask_bottom_right,
    "check_attention_forward": qkv.attention_forward,
    "check_block_forward": qkv.block_forward,
    "check_dropout_block_forward": answers_capstone.dropout_block_forward,
    "check_swiglu_mlp": answers_capstone.swiglu_mlp,
    "check_order_sensitivity": answers_capstone.order_sensitivity,
    "check_ablation": lambda seed, steps=200: (
        {"window": 4}, qkv.ablation_loss({"window": 4}, seed, steps, progress=False)),
    # The exercises beyond the page (debugging, variations, experiments): a student's answers.
    **{f"check_{name}": getattr(answers_beyond, name) for name in (
        "attention_with_temperature", "max_weight", "padded_causal_attention", "padding_leak",
        "streaming_attention", "fp16_overflow_rate", "linear_attention", "linear_gap",
        "dilated_window_mask_mod", "padded_bahdanau_weights", "top_k_lookup", "lookup_entropy",
        "self_attention_no_self", "self_weight", "multi_head_self_attention", "apply_rope_scaled",
        "mean_ablate", "repeat_loss", "talking_heads_attention", "head_difference",
        "apply_partial_rope", "grouped_causal_linear_attention", "duplicate_token_score",
        "ablation_rise")},
    "check_alibi_far_weight": answers_beyond.alibi_far_weight,
    # The variations of assignments 1 to 4 (functions the reference does not contain).
    **{f"check_{name}": getattr(answers_variations, name) for name in (
        "coverage_attention", "sparsemax_lookup", "self_attention_with_null", "quiet_attention")},
}
OPTIONS = [(name, {}) for name in REFERENCES] + [
    ("check_scaled_dot_product_attention", {"masks": False})]


def _wire(x):
    """``x`` sent as data and received: each tensor as raw bytes, dtype and shape."""
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu().contiguous()
        raw = bytes(t.reshape(-1).view(torch.uint8).numpy()) if t.numel() else b""
        back = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(
            0, dtype=torch.uint8)
        return back.view(t.dtype).reshape(t.shape)
    if isinstance(x, (tuple, list)):
        return type(x)(_wire(v) for v in x)
    if isinstance(x, dict):
        return {k: _wire(v) for k, v in x.items()}
    assert x is None or isinstance(x, (bool, int, float, str)), f"not data: {type(x)}"
    return x


def _grade(check, student, seed=0, **options):
    """The grader's round trip: inputs out, outcomes back, verdict in the parent."""
    outcomes = []
    for args, kwargs in _wire(grading.calls(check, seed, **options)):
        try:
            outcomes.append(_wire(grading.run_student(check, student, args, kwargs, **options)))
        except Exception as e:  # noqa: BLE001
            outcomes.append(grading.Raised.of(e))
            break
    return grading.judge(check, seed, outcomes, **options)


def test_every_check_has_a_reference_here():
    assert set(REFERENCES) == set(grading.CHECKS)


@pytest.mark.parametrize("check,options", OPTIONS, ids=lambda x: str(x))
def test_the_reference_passes_through_the_wire(check, options):
    result = _grade(check, REFERENCES[check], seed=7, **options)
    assert result.passed, result.message()
    assert result.exercise == check[len("check_"):] and result.seed == 7


@pytest.mark.parametrize("check,options", OPTIONS, ids=lambda x: str(x))
def test_calls_are_data_and_deterministic(check, options):
    first, again = grading.calls(check, 3, **options), grading.calls(check, 3, **options)
    assert _wire(first) is not None  # only data (asserted inside)
    assert len(first) == len(again) > 0
    for (a1, k1), (a2, k2) in zip(first, again):
        for x, y in zip(torch.utils._pytree.tree_leaves((a1, k1)),
                        torch.utils._pytree.tree_leaves((a2, k2))):
            if isinstance(x, torch.Tensor):
                assert x.device.type == "cpu" and torch.equal(x, y)
            else:
                assert x == y


def _single_exercise_checks():
    for name, check in grading.CHECKS.items():
        if isinstance(check, ExerciseCheck) and not check.items and name not in (
                "check_MultiHeadAttention", "check_dilated_window_mask_mod"):  # built, then called
            for options in ({}, {"masks": False}) if check.options else ({},):
                yield name, options


@pytest.mark.parametrize("check,options", list(_single_exercise_checks()), ids=lambda x: str(x))
def test_a_known_mistake_is_named(check, options):
    exercise = grading.CHECKS[check].exercises(**options)[0]
    mistake = exercise.mistakes[0]
    result = _grade(check, mistake.fn, **options)
    assert not result.passed
    assert result.mistake_id and result.mistake, result.message()
    assert result.mistake_id == grading.CHECKS[check].exercises(**options)[0].mistakes[
        [m.name for m in exercise.mistakes].index(result.mistake)].id


def test_a_mistake_in_a_pair_and_in_a_module_is_named():
    def soft_lookup(query, keys, values, temperature=1.0):
        w = (query @ keys.transpose(-2, -1)).softmax(-1)  # no temperature
        return w @ values, w
    result = _grade("check_soft_lookup", soft_lookup)
    assert not result.passed and "temperature" in result.message().lower(), result.message()

    def not_a_pair(query, keys, values, temperature=1.0):
        return qkv.soft_lookup(query, keys, values, temperature)[0]
    result = _grade("check_soft_lookup", not_a_pair)
    assert "expected a pair (output, weights)" in result.what


def test_a_raised_error_is_reported_with_its_message_and_line():
    outcomes = [grading.Raised("RuntimeError", "mat1 and mat2 shapes cannot be multiplied",
                               "line 3 of softmax: return x @ y")]
    result = grading.judge("check_softmax", 0, outcomes)
    assert not result.passed and result.kind == "raised"
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied" in result.what
    assert "line 3 of softmax" in result.what and result.hint  # the generic hint
    result = grading.judge("check_softmax", 0, [grading.Raised("NotImplementedError", "")])
    assert result.kind == "not written" and "not written yet" in result.message()


def test_a_short_list_is_judged_as_never_finished():
    first = grading.run_student("check_softmax", qkv.softmax, *grading.calls("check_softmax", 0)[0])
    result = grading.judge("check_softmax", 0, [first])
    assert not result.passed and result.kind == "timeout" and "did not finish" in result.what
    assert grading.judge("check_softmax", 0, []).kind == "timeout"


def test_a_forbidden_call_is_a_notice_not_a_failure():
    result = _grade("check_softmax", lambda x, dim=-1: torch.softmax(x, dim))
    assert result.passed and "torch.softmax" in result.notice
    result = _grade("check_scaled_dot_product_attention",
                    lambda q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None:
                    torch.nn.functional.scaled_dot_product_attention(
                        q, k, v, attn_mask, dropout_p, is_causal, scale=scale))
    assert result.passed and "scaled_dot_product_attention" in result.notice


def test_unknown_checks_and_options_are_refused_clearly():
    with pytest.raises(KeyError, match="no check named 'check_nothing'"):
        grading.calls("check_nothing", 0)
    with pytest.raises(TypeError, match="has no option 'mask'.*masks=True"):
        grading.calls("check_scaled_dot_product_attention", 0, mask=False)


def test_the_kernel_and_the_grader_agree():
    def softmax(x, dim=-1):
        return x.exp() / x.exp().sum(dim, keepdim=True)  # unstable
    with pytest.raises(CheckFailed) as info:
        from qkv.checks import check_softmax
        check_softmax(softmax)
    graded = _grade("check_softmax", softmax)
    assert dataclasses.replace(info.value.result, note="") == graded
    assert str(info.value) == info.value.result.message()


def test_a_result_round_trips_through_json():
    result = CheckResult("softmax", False, 3, "float32 1-D input", "no-scaling", "no scaling",
                         "scale it", "the result matches a known mistake: no scaling")
    text = result.to_json()
    assert json.loads(text)["mistake_id"] == "no-scaling"
    assert CheckResult.from_json(text) == result
    with pytest.raises(ValueError, match="exercise"):
        CheckResult.from_json("[1, 2]")


def test_a_question_is_judged_as_data():
    from qkv.checks.questions import QUESTIONS
    name, q = next(iter(QUESTIONS.items()))
    assert grading.question(name, "not an answer at all").passed is False
    with pytest.raises(KeyError):
        grading.question("no_such_question", "a")


def test_a_wrong_choice_is_named_by_the_answer_chosen():
    """A class report counts which wrong answer students chose; the question's name is said
    once; an answer left None is 'not answered yet', not an answer raising an error."""
    wrong = grading.question("qkv_q2", "b")
    assert not wrong.passed and wrong.mistake == "answered 'b'"
    assert wrong.mistake_id == "answered-b" and wrong.message().startswith("qkv_q2: Not (b)")
    assert grading.question("qkv_q2", "a").mistake == ""  # right: nothing to count
    blank = grading.question("qkv_q2", None)
    assert blank.kind == "not written" and "not answered yet" in blank.message()
    assert "NotImplementedError" not in blank.message()
    # A per-student question: its right answer differs by student, so no answer is counted.
    computed = grading.question("bottleneck_q1", {"answer": 1, "attn_dim": 3})
    assert not computed.passed and computed.mistake == ""
    assert grading.question("scaling_q1", "a").message().count("scaling_q1") == 2  # name, e.g.
    assert computed.message().startswith("bottleneck_q1: (attn_dim = 3): Not 1")


@pytest.mark.parametrize("check", sorted(grading.CHECKS))
def test_a_number_too_large_for_a_float_is_a_wrong_answer(check):
    """What comes back is the student's to choose: an int no float holds (10**400), alone, in
    a pair or as every seed's number, fails the check; it never stops the judge."""
    n = len(grading.calls(check, 0))
    huge = 10 ** 400
    for outcome in (huge, (huge, ()), ((huge,) * 49, ())):
        result = grading.judge(check, 0, [outcome] * n)
        assert not result.passed and len(result.message()) < 2000, result.message()


@pytest.mark.parametrize("name", ["scaling_q1", "bottleneck_q1", "qkv_q2"])
def test_a_record_too_large_for_a_float_is_no_answer(name):
    """A qkv_answers.json entry of 401 digits stopped the grader on every run: it is no answer
    (the notebook's is judged, and the entry flagged), and judging it is a wrong answer."""
    for entry in (10 ** 400, {"answer": 10 ** 400, "attn_dim": 3}):
        assert grading.is_answer(name, entry) is False
        assert not grading.question(name, entry).passed
    # An answer with parameters no seed gives is an answer, and wrong.
    assert not grading.question(name, {"answer": 1, "attn_dim": 10 ** 400}).passed


@pytest.mark.parametrize("check", ["check_fp16_overflow_rate", "check_dot_product_variance"])
def test_a_draw_count_the_student_chose_never_stops_the_judge(check):
    """The draw count crosses back beside the numbers (qkv.checks.harness.twists): a count
    of 4,299 digits (valid JSON under the header's cap) stopped the judge while its verdict
    was formatted (int-to-str limit); a negative count or a bool is no count either."""
    import json

    import torch

    huge = json.loads("-" + "9" * 4299)
    if check == "check_dot_product_variance":
        outcomes = []
        for d, n, s, count in grading.CHECKS[check].plan(0):
            g = torch.Generator().manual_seed(s + 7777)  # right, on seeds not asked: judged
            q, k = torch.randn(n, d, generator=g), torch.randn(n, d, generator=g)
            value = (q * k).sum(-1).var().item()
            outcomes.append(((value, "COUNT") if count else value, ()))
        outcomes[3] = outcomes[0][0][0], ()  # the same seed again: the same number
    else:
        exp, outcomes = grading.CHECKS[check].exp, []
        for (*setting, seeds), _ in grading.calls(check, 0):
            values = [exp.reference(*setting, torch.Generator().manual_seed(s + 7777))
                      for s in seeds]
            outcomes.append(((values, "COUNT"), ()))

    def sent(count):
        return [((o[0][0], count), ()) if isinstance(o[0], tuple) else o for o in outcomes]

    for count in (huge, -1, True, 10 ** 30):
        result = grading.judge(check, 0, sent(count))
        assert "-" not in result.what.split("drew")[-1][:20], result.message()
    assert not grading.judge(check, 0, sent(0)).passed  # an honest count still counts


def test_the_grading_api_runs_torch_on_one_thread_and_gives_the_count_back(monkeypatch):
    """A check's tensors are tiny: on a pool of threads the capstone's judging took 64 s a
    submission in qkv grade on a busy 2-core machine (order_sensitivity alone 12 s, 0.3 s on
    one thread). calls, prepare and judge run on one thread and restore the count after,
    even when a check fails."""
    check = grading.CHECKS["check_softmax"]
    seen = []

    def recording(real):
        def call(*args, **kwargs):
            seen.append(torch.get_num_threads())
            return real(*args, **kwargs)
        return call

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in a check")

    monkeypatch.setattr(check, "calls", recording(check.calls))
    monkeypatch.setattr(check, "judge", recording(check.judge))
    monkeypatch.setattr(check, "prepare", recording(check.prepare))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        grading.calls("check_softmax", 0)
        grading.prepare("check_softmax")
        assert not grading.judge("check_softmax", 0, []).passed  # nothing ran: a time-out
        monkeypatch.setattr(check, "judge", broken)
        with pytest.raises(RuntimeError):
            grading.judge("check_softmax", 0, [])
        assert seen == [1, 1, 1]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
