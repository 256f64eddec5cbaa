"""Points follow the mistake (issue 13, item 3): a check grades one function; the student's other
answers it calls are the reference's while it runs, so a wrong helper costs only its own test.

Each answer is a cell's source (the model answers are the assignments' own) run in one
namespace, as in a notebook, the function looking its helpers up there. A wrong helper beside
a right function: the function's check passes; a wrong function beside a right helper: its
check fails naming the function.
"""

import re
import textwrap
from pathlib import Path

import nbformat
import pytest
import torch

import answers_beyond
import qkv
from qkv.checks import (check_attention_with_temperature, check_grouped_causal_linear_attention,
                        check_masked_scores, check_max_weight,
                        check_MultiHeadAttention, check_merge_heads,
                        check_scaled_dot_product_attention, check_soft_lookup)

ROOT = Path(__file__).resolve().parents[2]

WRONG_CAUSAL = """
def causal_mask(L, S=None, device=None):
    S = L if S is None else S
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(-1)  # diagonal hidden
"""
WRONG_SCORES_AND_SOFTMAX = """
def attention_scores(query, key, scale=None):
    return query @ key.transpose(-2, -1)  # no scale

def softmax(x, dim=-1):
    return x.exp() / x.exp().sum(dim=0, keepdim=True)  # the wrong axis, and unstable
"""
WRONG_SPLIT_MERGE = """
def split_heads(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, num_heads, L, D // num_heads)  # no transpose

def merge_heads(x):
    raise NotImplementedError()
"""


def _solution(assignment: str, grade_id: str) -> str:
    """The model answer of an answer cell, as a student would write it (no nbgrader markers)."""
    path = next((ROOT / "solutions" / assignment).glob("*.ipynb"))
    nb = nbformat.read(str(path), as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return re.sub(r"^\s*### (BEGIN|END) SOLUTION\n", "", cell.source, flags=re.MULTILINE)


RIGHT_MASKED_SCORES = _solution("06-masking", "masked_scores")
RIGHT_UNMASKED_SDPA = _solution("04-scaling", "scaled_dot_product_attention")
RIGHT_SOFT_LOOKUP = _solution("02-lookup", "soft_lookup")
RIGHT_MERGE = _solution("05-multi-head", "merge_heads")
RIGHT_MHA = _solution("05-multi-head", "MultiHeadAttention")
RIGHT_MAX_WEIGHT = _solution("04-scaling", "max_weight")


def _notebook(*cells):
    """One namespace, as a notebook's: the set-up cell's names, then each cell run in it."""
    ns = {"__name__": "__main__"}
    exec("import math\nimport torch\nfrom torch import nn\nimport qkv\n"  # noqa: S102
         "from qkv import combine_masks\n", ns)
    for cell in cells:
        exec(compile(textwrap.dedent(cell), "<cell>", "exec"), ns)  # noqa: S102 (test input)
    return ns


def test_masked_scores_scores_with_a_wrong_causal_mask():
    ns = _notebook(WRONG_CAUSAL, RIGHT_MASKED_SCORES)
    wrong = ns["causal_mask"]
    check_masked_scores(ns["masked_scores"])
    check_masked_scores(ns["masked_scores"], seed=None)
    assert ns["causal_mask"] is wrong  # the notebook's own, put back


def test_a_helper_whose_cell_failed_costs_only_its_own_test():
    """instr13: a syntax error in the causal_mask cell left no causal_mask at all, and the
    right masked_scores failed too (NameError: 10/15, where a wrong or unwritten causal_mask
    gave 13/15). The reference is bound where the answer looks the helper up, and removed
    again afterwards."""
    ns = _notebook(RIGHT_MASKED_SCORES)
    assert "causal_mask" not in ns
    check_masked_scores(ns["masked_scores"])
    check_masked_scores(ns["masked_scores"], seed=None)
    assert "causal_mask" not in ns
    # A wrong answer built on the missing helper still shows its own error, not a NameError.
    broken = RIGHT_MASKED_SCORES.replace("def masked_scores(", "def masked_scores(_x, ")
    ns = _notebook(broken)
    with pytest.raises(AssertionError) as raised:
        check_masked_scores(ns["masked_scores"])
    assert "causal_mask" not in str(raised.value) and "causal_mask" not in ns


def test_a_wrong_masking_step_with_a_right_causal_mask_is_named():
    wrong = RIGHT_MASKED_SCORES.replace('float("-inf")', "0.0")
    assert wrong != RIGHT_MASKED_SCORES
    ns = _notebook("causal_mask = qkv.causal_mask\n", wrong)
    with pytest.raises(AssertionError, match="^masked_scores: wrong on .*"
                                             "hidden scores set to 0 instead of -inf"):
        check_masked_scores(ns["masked_scores"])


def test_unmasked_attention_scores_with_wrong_scores_and_softmax():
    ns = _notebook(WRONG_SCORES_AND_SOFTMAX, RIGHT_UNMASKED_SDPA)
    check_scaled_dot_product_attention(ns["scaled_dot_product_attention"], masks=False)
    assert ns["softmax"].__module__ == "__main__"


def test_soft_lookup_scores_with_a_wrong_softmax():
    ns = _notebook(WRONG_SCORES_AND_SOFTMAX, RIGHT_SOFT_LOOKUP)
    check_soft_lookup(ns["soft_lookup"])


def test_multi_head_attention_scores_with_wrong_split_and_merge():
    ns = _notebook(WRONG_SPLIT_MERGE, RIGHT_MHA)
    check_MultiHeadAttention(ns["MultiHeadAttention"])
    assert ns["split_heads"].__module__ == "__main__"


def test_merge_heads_test_cell_passes_with_a_wrong_split_heads():
    ns = _notebook(WRONG_SPLIT_MERGE, RIGHT_MERGE)
    check_merge_heads(ns["merge_heads"])
    # The test cell's own lines take split_heads from the reference.
    x = torch.randn(2, 5, 12)
    assert torch.equal(ns["merge_heads"](qkv.split_heads(x, 3)), x)


def test_a_call_of_the_reference_gets_a_notice(capsys):
    delegates = _notebook("""
    def scaled_dot_product_attention(query, key, value, scale=None):
        return qkv.scaled_dot_product_attention(query, key, value, scale=scale)
    """)
    check_scaled_dot_product_attention(delegates["scaled_dot_product_attention"], masks=False)
    assert "you called qkv.scaled_dot_product_attention" in capsys.readouterr().out


def test_a_call_of_the_checks_own_reference_gets_a_notice(capsys):
    """The checks hold each exercise's reference: reaching it through qkv.checks (a table of
    the checks, or a variant function of theirs) is delegation too."""
    delegates = _notebook("""
    from functools import partial
    from qkv.checks.grading import CHECKS as _C
    from qkv.checks.mistakes.attention import attend
    from qkv.checks.scaling import qkv as _q
    _sdpa = partial(_q.scaled_dot_product_attention)
    def scaled_dot_product_attention_3(query, key, value, scale=None):
        return _sdpa(query, key, value, scale=scale)
    def scaled_dot_product_attention(query, key, value, scale=None):
        check = _C["check_scaled_dot_product_attention"]
        return check.exercises(masks=False)[0].reference(query, key, value, scale=scale)
    def scaled_dot_product_attention_2(query, key, value, scale=None):
        return attend(query, key, value, scale=scale)
    """)
    for name in ("scaled_dot_product_attention", "scaled_dot_product_attention_2",
                 "scaled_dot_product_attention_3"):
        check_scaled_dot_product_attention(delegates[name], masks=False)
        out = capsys.readouterr().out
        assert "you called qkv." in out or "the checks' own exercises" in out, out


def test_assignment_4s_given_softmax_is_no_delegation(capsys):
    """Assignment 4's set-up gives the course's softmax: its answers may call it, unnoticed."""
    ns = _notebook("from qkv import softmax\n", WRONG_SCORES_AND_SOFTMAX.split("def softmax")[0],
                   RIGHT_UNMASKED_SDPA, RIGHT_MAX_WEIGHT, """
    def attention_with_temperature(query, key, value, temperature=1.0):
        E = query.shape[-1]
        return softmax(query @ key.transpose(-2, -1) / (math.sqrt(E) * temperature)) @ value
    """)
    assert ns["softmax"] is qkv.softmax
    check_scaled_dot_product_attention(ns["scaled_dot_product_attention"], masks=False)
    check_max_weight(ns["max_weight"])
    check_attention_with_temperature(ns["attention_with_temperature"])
    assert "you called" not in capsys.readouterr().out


def test_building_on_an_earlier_answer_the_exercise_rules_out_gets_a_notice(capsys):
    """Assignment 9 asks for running sums, 'no call to your linear_attention': a call of the
    student's own quadratic version is noted (a note, not a failure); the running sums are not."""
    ns = _notebook("import torch.nn.functional as F\n", """
    def linear_attention(query, key, value, is_causal=False):
        sim = (F.elu(query) + 1) @ (F.elu(key) + 1).transpose(-2, -1)
        sim = sim.tril() if is_causal else sim
        return sim / (sim.sum(-1, keepdim=True) + 1e-6) @ value

    def grouped_causal_linear_attention(query, key, value):
        G = query.shape[1] // key.shape[1]
        k, v = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
        return linear_attention(query, k, v, is_causal=True)
    """)
    check_grouped_causal_linear_attention(ns["grouped_causal_linear_attention"])
    said = capsys.readouterr().out
    assert "you called your linear_attention" in said and "not your earlier answer" in said
    assert "write it yourself" not in said  # they did write it
    check_grouped_causal_linear_attention(answers_beyond.grouped_causal_linear_attention)
    assert "you called" not in capsys.readouterr().out
