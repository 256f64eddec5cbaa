"""The attack corpus (:mod:`attacks`): each way of getting points without the work earns none.

In-process attacks run their answer cell in a fresh namespace and then the test cell nbgrader
would run (the visible call and the hidden one with fresh inputs); notebook attacks run
set-up, answer and test cells in a fresh interpreter. A test cell that raises scores zero.
"""

import sys

import pytest
import torch

from attacks import ATTACKS, Attack
from notebook import run_notebook
from qkv.checks import bottleneck, efficient, lookup, masking, multi_head, qkv as qkv_checks
from qkv.checks import position, scaling, variants
from qkv.checks._compare import close

KINDS = {"helpers", "torch entry points", "nested calls", "subclass", "frames", "seeds", "files",
         "rebinding", "internals", "fresh copy", "patching", "measure", "questions", "threads",
         "dispatcher", "after the guard", "kernel"}
EXERCISES = {
    "softmax": lookup.SOFTMAX, "soft_lookup": lookup.SOFT_LOOKUP_WEIGHTS,
    "additive_score": lookup.ADDITIVE_SCORE, "luong_score": lookup.LUONG_SCORE,
    "bahdanau_attention": bottleneck.BAHDANAU_WEIGHTS,
    "self_attention": qkv_checks.SELF_ATTENTION, "cross_attention": qkv_checks.CROSS_ATTENTION,
    "attention_scores": scaling.ATTENTION_SCORES,
    "scaled_dot_product_attention": scaling.SCALED_DOT_PRODUCT_ATTENTION,
    "split_heads": multi_head.SPLIT_HEADS, "merge_heads": multi_head.MERGE_HEADS,
    "MultiHeadAttention": multi_head.MULTI_HEAD_ATTENTION,
    "causal_mask": masking.CAUSAL_MASK, "padding_mask": masking.PADDING_MASK,
    "chunked_attention": efficient.CHUNKED_ATTENTION, "kv_cache_step": efficient.KV_CACHE_STEP,
    "sinusoidal_encoding": position.SINUSOIDAL_ENCODING, "apply_rope": position.APPLY_ROPE,
    "alibi_bias": position.ALIBI_BIAS,
    "repeat_kv": variants.REPEAT_KV, "grouped_query_attention": variants.GROUPED_QUERY_ATTENTION,
    "causal_mask_bottom_right": variants.CAUSAL_MASK_BOTTOM_RIGHT,
}
IN_PROCESS = [a for a in ATTACKS if not a.notebook]
# What the guards' refusals say (a right answer can fail for no other reason).
GUARDS = ("write it yourself", "do not allow it", "spans all S=", "TorchScript", "compiles code",
          "takes torch's modes off")
NOTEBOOK = [a for a in ATTACKS if a.notebook]


def _answer(attack: Attack):
    namespace = {"__name__": "__main__"}
    exec(compile(attack.code, f"<attack: {attack.name}>", "exec"), namespace)  # noqa: S102
    return namespace


def test_the_corpus_covers_every_kind_with_forty_attacks():
    assert len({a.name for a in ATTACKS}) == len(ATTACKS) >= 40
    assert {a.kind for a in ATTACKS} == KINDS


@pytest.mark.parametrize("attack", [a for a in IN_PROCESS if a.works], ids=lambda a: a.name)
def test_delegations_would_be_right_without_the_guard(attack):
    """So that each of them shows a guard refusing a right answer, not a wrong answer failing."""
    if attack.exercise == "dot_product_variance":
        value = _answer(attack)[attack.exercise](64, 20_000, torch.Generator().manual_seed(0))
        assert abs(float(value) - 64) < 3
        return
    exercise = EXERCISES[attack.exercise]
    student = _answer(attack)[attack.exercise]
    for case in exercise.cases[:3]:
        args, kwargs = case.build(torch.Generator().manual_seed(0), torch.device("cpu"), case.dtype)
        got = (exercise.run_student(student, *args, **kwargs) if exercise.run_student
               else student(*args, **kwargs))
        expected = exercise.reference(*args, **kwargs)
        assert (exercise.compare or close)(got, expected, 1e-4, 1e-5), case.label


@pytest.mark.parametrize("attack", IN_PROCESS, ids=lambda a: a.name)
def test_attack_earns_nothing(attack):
    namespace = _answer(attack)
    with pytest.raises(AssertionError, match=f"{attack.exercise}") as info:
        exec(compile(attack.test_cell(), "<test cell>", "exec"), namespace)  # noqa: S102
    if attack.works:  # a right answer: only a guard can have refused it
        assert any(w in str(info.value) for w in GUARDS), str(info.value)
    # Whatever the answer did, the guard is off again and torch as it was.
    assert sys.getprofile() is None
    assert torch._C._len_torch_function_stack() == 0
    assert torch._C._len_torch_dispatch_stack() == 0


@pytest.mark.parametrize("attack", NOTEBOOK, ids=lambda a: a.name)
def test_notebook_attack_earns_nothing(attack):
    setup, _, test = run_notebook(attack.code, attack.test_cell())
    assert setup is None, setup
    assert test is not None, "the test cell passed"
    # It failed because the real check judged the answer (not, say, a crash of the runner).
    assert f"{attack.exercise}: wrong on" in test, test


def test_right_answer_still_passes_in_a_notebook():
    right = "def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n" \
            "    return e / e.sum(dim, keepdim=True)\n"
    setup, answer, test = run_notebook(right, ATTACKS[0].test_cell())
    assert (setup, answer, test) == (None, None, None), test


@pytest.mark.slow
@pytest.mark.parametrize("attack", [a for a in ATTACKS if a.kind == "kernel"], ids=lambda a: a.name)
def test_kernel_attack_leaves_an_error_in_a_jupyter_kernel(attack):
    """nbgrader scores a test cell by its outputs: an ``error`` output is zero points."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from notebook import SETUP

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in
                                         (SETUP, attack.code, attack.test_cell())])
    nbclient.NotebookClient(nb, timeout=120, allow_errors=True).execute()
    errors = [o for o in nb.cells[2].outputs if o.output_type == "error"]
    assert errors and f"{attack.exercise}: wrong on" in errors[0].evalue, nb.cells[2].outputs


@pytest.mark.slow
def test_an_honest_notebook_in_a_jupyter_kernel_hears_of_no_tampering():
    """IPython keeps its own names in builtins (``_``, ``display``); none of that is the
    checks', so an honest notebook's test cells pass without a "changed the checks" note."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from notebook import SETUP

    right = "def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n" \
            "    return e / e.sum(dim, keepdim=True)\n"
    cells = (SETUP, right, "softmax", "from qkv.checks import check_softmax\n\n"
             "check_softmax(softmax)\ncheck_softmax(softmax, seed=None)\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=120).execute()
    printed = "".join(o.get("text", "") for o in nb.cells[3].outputs)
    assert "note:" not in printed and not [o for o in nb.cells[3].outputs
                                           if o.output_type == "error"], nb.cells[3].outputs
