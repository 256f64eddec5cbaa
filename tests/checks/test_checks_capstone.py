"""The capstone's exercises beyond the page: the block with dropout to debug (each bug of the
printed version still present is named, every combination of them), SwiGLU's MLP (the usual
slips named, honest forms accepted) and the order experiment (judged as a measurement)."""

import itertools

import pytest
import torch

import answers_capstone as a
from qkv.checks import (CheckFailed, check_dropout_block_forward, check_order_sensitivity,
                        check_swiglu_mlp)
from qkv.checks._beyond_capstone import DROPOUT_BLOCK_FORWARD, SWIGLU_MLP, _BUGS
from qkv.checks.grading import calls, judge, run_student

_SWITCHES = [sw for _, _, sw in _BUGS]


def test_the_right_block_and_an_honest_dropout_pass():
    for answer in (a.dropout_block_forward, a.make_dropout_block(own_dropout=True)):
        check_dropout_block_forward(answer)
        check_dropout_block_forward(answer, seed=None)


@pytest.mark.parametrize("present", [c for n in (1, 2, 3) for c in itertools.combinations(
    range(3), n)], ids=str)
def test_each_bug_still_present_is_named(present):
    switches = {k: v for i in present for k, v in _SWITCHES[i].items()}
    with pytest.raises(CheckFailed) as info:
        check_dropout_block_forward(a.make_dropout_block(**switches))
    message = str(info.value)
    for i, (name, _, _) in enumerate(_BUGS):
        assert (name in message) == (i in present), message


def test_the_printed_block_has_its_three_bugs_named():
    with pytest.raises(CheckFailed, match="3 bugs of the printed block left"):
        check_dropout_block_forward(a.buggy_dropout_block)


@pytest.mark.parametrize("mistake", DROPOUT_BLOCK_FORWARD.mistakes[7:], ids=lambda m: m.name[:40])
def test_a_wrong_fix_is_named(mistake):
    with pytest.raises(CheckFailed) as info:
        check_dropout_block_forward(a.make_dropout_block(**mistake.fn.keywords))
    assert mistake.name in str(info.value)


def test_the_check_leaves_the_kernel_s_random_state_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    check_dropout_block_forward(a.dropout_block_forward)
    with pytest.raises(CheckFailed):
        check_dropout_block_forward(a.buggy_dropout_block)
    assert torch.equal(torch.rand(3), expected)


def test_swiglu_honest_forms_pass():
    for answer in (a.swiglu_mlp, a.swiglu_mlp_linear):
        check_swiglu_mlp(answer)
        check_swiglu_mlp(answer, seed=None)


@pytest.mark.parametrize("mistake", SWIGLU_MLP.mistakes, ids=lambda m: m.name[:40])
def test_swiglu_slips_are_named(mistake):
    with pytest.raises(CheckFailed) as info:
        check_swiglu_mlp(mistake.fn)
    assert mistake.name in str(info.value)


def test_the_order_experiment_is_judged_as_a_measurement(capsys):
    check_order_sensitivity(a.order_sensitivity)
    assert "note:" not in capsys.readouterr().out  # the pieces it is given are no note
    with pytest.raises(CheckFailed, match="not a measurement"):
        check_order_sensitivity(lambda n, rope, g: 0.25)
    with pytest.raises(CheckFailed, match="averages"):  # RoPE and no positions swapped
        check_order_sensitivity(lambda n, rope, g: a.order_sensitivity(n, not rope, g))
    with pytest.raises(CheckFailed, match="identically seeded"):
        check_order_sensitivity(lambda n, rope, g: a.order_sensitivity(
            n, rope, torch.Generator().manual_seed(int(torch.randint(10**6, ())))))


def test_one_layer_without_positions_is_blind_to_the_order_before_the_last_position():
    """What the experiment's written part rests on: one layer without positions gives a change at
    rounding level, two layers (the causal mask leaking order) and RoPE give large ones."""
    from qkv.checks._beyond_capstone import order_sensitivity

    def mean(*setting):
        return sum(order_sensitivity(*setting, torch.Generator().manual_seed(s))
                   for s in range(4)) / 4
    assert mean(1, False) < 1e-5
    assert mean(2, False) > 0.05 and mean(1, True) > 0.05


def test_the_grader_path_names_the_same_bugs():
    """Through calls / run_student / judge (the trusted grader's steps), data only."""
    check = "check_dropout_block_forward"
    outcomes = [run_student(check, a.buggy_dropout_block, args, kwargs)
                for args, kwargs in calls(check, 3)]
    result = judge(check, 3, outcomes)
    assert not result.passed and result.mistake.startswith("3 bugs"), result.message()
