"""The assignments' conceptual questions (``qkv.checks.check_question``): every wrong answer is
told why it is wrong, every right answer is a fact of :mod:`qkv`, and every assignment asks them."""

import math
import re
from pathlib import Path

import jupytext
import pytest
import torch
import torch.nn as nn

import qkv
from qkv import checks
from qkv.checks import check_question
from qkv.checks.questions import record as _answers
from qkv.checks.questions.kinds import Choice, Computed, Number
from qkv.checks.questions import QUESTIONS

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "solutions").glob("*/*.md"))
CHOICES = [q for q in QUESTIONS.values() if isinstance(q, Choice)]
NUMBERS = [q for q in QUESTIONS.values() if isinstance(q, Number)]
COMPUTED = [q for q in QUESTIONS.values() if isinstance(q, Computed)]


def _ids(q):
    return q.id


@pytest.fixture(autouse=True)
def _record(tmp_path, monkeypatch):
    """Each test records first answers in a file of its own."""
    monkeypatch.setenv(_answers.ENV, str(tmp_path / "answers.json"))
    return tmp_path


def _fresh(monkeypatch, tmp_path, name):
    """A new, empty record: the next answer is a first answer."""
    monkeypatch.setenv(_answers.ENV, str(tmp_path / f"{name}.json"))


def _letter(q):
    (right,) = [k for k in q.choices if q.right(k)]
    return right


def test_check_question_is_exported():
    assert "check_question" in checks.__all__ and checks.check_question is check_question


@pytest.mark.parametrize("q", CHOICES, ids=_ids)
def test_every_choice_is_explained_and_exactly_one_is_right(q):
    assert len(q.choices) >= 3 and set(q.explain) == set(q.choices)
    assert len([k for k in q.choices if q.right(k)]) == 1
    for text in q.explain.values():
        assert text.strip() and not text.endswith("."), text  # the message adds the full stop


@pytest.mark.parametrize("q", NUMBERS, ids=_ids)
def test_every_typical_wrong_number_is_explained_and_is_wrong(q):
    wrong = q.wrong()
    assert len(wrong) >= 3 and q.hint and not q.hint.endswith(".")
    for value, why in wrong.items():
        assert not q.right(value), (value, why)
        assert why.strip() and not why.endswith("."), why


def test_the_package_holds_no_answer_key_in_plain_text():
    for q in CHOICES + NUMBERS:
        assert not hasattr(q, "answer")
        assert len(q.key) == 24 and all(c in "0123456789abcdef" for c in q.key)


@pytest.mark.parametrize("q", CHOICES, ids=_ids)
def test_choices_right_passes_and_each_wrong_fails_explaining_both(q, capsys, monkeypatch,
                                                                    tmp_path):
    right = _letter(q)
    for i, spelled in enumerate((right, right.upper(), f"({right})")):
        _fresh(monkeypatch, tmp_path, f"right{i}")
        check_question(q.id, spelled)
        out = capsys.readouterr().out
        assert f"{q.id}: right, ({right})" in out and q.explain[right] in out
        assert f"your first answer, recorded and graded: {right!r}" in out
    for letter in set(q.choices) - {right}:
        _fresh(monkeypatch, tmp_path, f"wrong{letter}")
        with pytest.raises(AssertionError) as info:
            check_question(q.id, letter)
        message = str(info.value)
        assert f"{q.id}: Not ({letter}): {q.explain[letter]}." in message
        assert f"The answer is ({right}) {q.choices[right]}: {q.explain[right]}." in message


@pytest.mark.parametrize("q", NUMBERS, ids=_ids)
def test_numbers_right_passes_and_each_wrong_fails_with_its_explanation(q, capsys, monkeypatch,
                                                                        tmp_path):
    right = RIGHT_NUMBERS[q.id]()
    for i, spelled in enumerate((right, float(right), torch.tensor(float(right)))):
        _fresh(monkeypatch, tmp_path, f"right{i}")
        check_question(q.id, spelled)
        assert f"{q.id}: right" in capsys.readouterr().out
    for i, (value, why) in enumerate(q.wrong().items()):
        _fresh(monkeypatch, tmp_path, f"wrong{i}")
        with pytest.raises(AssertionError, match=re.escape(f"{why}. The reasoning: {q.why}.")):
            check_question(q.id, value)
    _fresh(monkeypatch, tmp_path, "other")
    with pytest.raises(AssertionError, match=re.escape(f"Not 12345.678: {q.hint}.")):
        check_question(q.id, 12345.678)


def test_the_first_answer_is_graded_and_a_later_one_is_not(capsys):
    with pytest.raises(AssertionError, match=r"Not \(a\).*The answer is \(b\)"):
        check_question("scaling_q2", "a")
    with pytest.raises(AssertionError) as info:
        check_question("scaling_q2", "b")
    assert "you now answer 'b'; a question is graded on its first answer" in str(info.value)
    assert "your first answer, recorded and graded: 'a'" in str(info.value)
    check_question("scaling_q1", 64)
    check_question("scaling_q1", 8)  # the first answer, 64, stands
    out = capsys.readouterr().out
    assert "scaling_q1: right, 64" in out and "you now answer 8.0" in out


def test_a_record_that_cannot_be_read_is_said_and_left_as_it_is(_record, capsys):
    """A record broken by hand holds the student's other first answers: it is never
    overwritten; the answer is judged, and the student told what to do."""
    broken = '{"scaling_q1": 64,\n "scaling_q2": "a" '
    (_record / "answers.json").write_text(broken)
    check_question("scaling_q2", "b")
    out = capsys.readouterr().out
    assert "answers.json cannot be read (Expecting" in out and "judged but not recorded" in out
    assert "mend it" in out and "scaling_q2: right" in out
    assert (_record / "answers.json").read_text() == broken


def test_a_record_edited_by_hand_is_read_as_an_answer_or_said_to_be_none(_record, capsys):
    """"B" recorded for "b" is the same first answer; "64", a string where a number belongs, is
    no answer: the record is named, the answer given is judged, and the file left alone."""
    import json

    (_record / "answers.json").write_text(json.dumps({"scaling_q2": "B", "scaling_q1": "64"}))
    check_question("scaling_q2", "b")
    out = capsys.readouterr().out
    assert "your first answer, recorded and graded: 'b'" in out and "you now answer" not in out
    check_question("scaling_q1", 64)
    out = capsys.readouterr().out
    assert "holds '64' for scaling_q1, which is not an answer" in out and "scaling_q1: right" in out
    assert json.loads((_record / "answers.json").read_text())["scaling_q1"] == "64"


@pytest.mark.parametrize("q", COMPUTED, ids=_ids)
def test_a_per_student_question_computes_its_answer_from_the_student_s_parameters(
        q, capsys, monkeypatch, tmp_path):
    assert len(q.examples) >= 3 and all(set(e) == set(q.params) for e in q.examples)
    for n, params in enumerate(q.examples):
        right = q.answer(**params)
        assert math.isclose(right, RIGHT_COMPUTED[q.id](**params)), (q.id, params)
        where = ", ".join(f"{k} = {v}" for k, v in sorted(params.items()))
        _fresh(monkeypatch, tmp_path, f"right{n}")
        check_question(q.id, right, **params)
        assert f"{q.id} ({where}): right" in capsys.readouterr().out
        for i, (value, why) in enumerate(q.wrong(**params).items()):
            assert not q.right(value, **params), (params, value, why)
            _fresh(monkeypatch, tmp_path, f"wrong{n}-{i}")
            with pytest.raises(AssertionError, match=re.escape(why)):
                check_question(q.id, value, **params)
    first, other = q.examples[0], next(e for e in q.examples if q.answer(**e) != q.answer(
        **q.examples[0]))
    _fresh(monkeypatch, tmp_path, "classmate")
    with pytest.raises(AssertionError, match="Not"):  # a classmate's number is no answer
        check_question(q.id, q.answer(**other), **first)
    with pytest.raises(ValueError, match=f"takes the parameters {', '.join(q.params)}"):
        check_question(q.id, 1)
    name = q.params[0]
    with pytest.raises(AssertionError, match=f"{name} must be a positive int"):
        check_question(q.id, 1, **{**first, name: str(first[name])})


@pytest.mark.parametrize("answer, said", [
    (37.75, "that is in MB"), (37.7, "that is in MB"), (37748736, "that is in bytes"),
    (36864, "that is in KiB")])
def test_a_unit_slip_is_named_as_a_student_writes_it(answer, said, monkeypatch, tmp_path):
    """wrong13: the MB slip was named only to the sixth digit (37.748736, not 37.75), and an
    answer in bytes or KiB got the general hint: the first answer is graded, so its message is
    the one the student learns from."""
    with pytest.raises(AssertionError, match=re.escape(said)):
        check_question("efficient_q1", answer, length=3072)


def test_a_fixed_question_takes_no_parameters():
    with pytest.raises(ValueError, match="takes no parameters"):
        check_question("scaling_q1", 64, d_k=64)


def test_an_unanswered_question_says_so_and_records_nothing(_record):
    for answer in (None, "?", "", ...):
        with pytest.raises(AssertionError, match="masking_q1: not answered yet"):
            check_question("masking_q1", answer)
    with pytest.raises(AssertionError, match="scaling_q1: not answered yet"):
        check_question("scaling_q1", None)
    assert not (_record / "answers.json").exists()


def test_the_record_stays_out_of_an_instructor_s_source_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(_answers.ENV)
    (tmp_path / "scaling.md").write_text("def f():\n    ### BEGIN SOLUTION\n    return 1\n")
    (tmp_path / "scaling.ipynb").write_text("{}")
    monkeypatch.chdir(tmp_path)
    check_question("scaling_q1", 64)
    assert not (tmp_path / _answers.FILE).exists()
    other = tmp_path / "student"
    other.mkdir()
    monkeypatch.chdir(other)
    check_question("scaling_q1", 64)
    assert (other / _answers.FILE).exists()
    # A student's own markdown copy of the notebook (nbconvert --to markdown) holds no model
    # answers: their folder keeps its record.
    copied = tmp_path / "copied"
    copied.mkdir()
    (copied / "scaling.md").write_text("# Assignment 4\n\n```python\nscaling_q1 = 64\n```\n")
    (copied / "scaling.ipynb").write_text("{}")
    monkeypatch.chdir(copied)
    check_question("scaling_q1", 64)
    assert (copied / _answers.FILE).exists()


def test_a_letter_written_as_in_a_list_is_that_letter():
    from qkv.checks.questions import QUESTIONS

    for written in ("b", "B", " b ", "(b)", "b)", "b.", "(B).", "b:"):
        assert QUESTIONS["qkv_q2"].normalise(written) == "b", written


def test_an_answer_of_the_wrong_kind_says_what_was_expected():
    with pytest.raises(AssertionError, match='masking_q1: expected one of "a", "b", "c", "d" '
                                             r"\(a str\), got int 1"):
        check_question("masking_q1", 1)
    with pytest.raises(AssertionError, match='expected one of .*got str \'e\''):
        check_question("masking_q1", "e")
    with pytest.raises(AssertionError, match=r"multi_head_q1: expected a number \(an int or a "
                                             r"float\), got str '1050624'"):
        check_question("multi_head_q1", "1050624", embed_dim=512)
    with pytest.raises(AssertionError, match="expected a number .* got bool True"):
        check_question("scaling_q1", True)
    with pytest.raises(AssertionError, match="expected a single number"):
        check_question("scaling_q1", torch.ones(2))
    with pytest.raises(ValueError, match="no question 'masking_q9'; the ids are bottleneck_q1, "):
        check_question("masking_q9", "a")


def test_check_question_leaves_the_random_state_alone(monkeypatch, tmp_path):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    for q in NUMBERS:
        _fresh(monkeypatch, tmp_path, q.id)
        check_question(q.id, RIGHT_NUMBERS[q.id]())
    assert torch.equal(torch.rand(3), expected)


# --- the right answers are facts of the reference (so the bank cannot drift from it) ---

def _params(make):
    with torch.device("meta"):
        return sum(p.numel() for p in make().parameters())


# Each numeric question's right answer, computed from the reference (the key must match).
RIGHT_NUMBERS = {
    "scaling_q1": lambda: 64,
    "position_q2": lambda: float(qkv.alibi_slopes(8)[0]),
}

# Each per-student question's right answer, from its parameters, computed here on its own.
RIGHT_COMPUTED = {
    "bottleneck_q1": lambda attn_dim: _params(lambda: qkv.AdditiveAttention(64, 32, attn_dim)),
    "multi_head_q1": lambda embed_dim: _params(lambda: qkv.MultiHeadAttention(embed_dim, 8)),
    "efficient_q1": lambda length: length * length * torch.finfo(torch.float32).bits / 8 / 2**20,
    "variants_q1": lambda layers, kv_heads: (2 * layers * kv_heads * 128
                                             * torch.finfo(torch.bfloat16).bits // 8),
}


def test_every_numeric_key_is_the_reference_s_number():
    assert set(RIGHT_NUMBERS) == {q.id for q in NUMBERS}
    assert set(RIGHT_COMPUTED) == {q.id for q in COMPUTED}
    for q in NUMBERS:
        assert q.right(RIGHT_NUMBERS[q.id]()), q.id


def _right(question_id):
    q = QUESTIONS[question_id]
    return q.choices[_letter(q)]


def test_the_shapes_are_the_reference_s():
    g = torch.Generator().manual_seed(0)
    shapes = [(4, 64), (4, 10, 32), (16, 64), (16, 32), (16,)]  # s, keys, W_q, W_k, v_a
    _, w = qkv.bahdanau_attention(*[torch.randn(*s, generator=g) for s in shapes])
    assert _right("bottleneck_q2") == str(tuple(w.shape))
    x = torch.randn(2, 5, 16, generator=g)
    out = qkv.self_attention(x, torch.randn(8, 16), torch.randn(8, 16), torch.randn(12, 16))
    assert _right("qkv_q1") == str(tuple(out.shape))
    heads = qkv.split_heads(torch.zeros(2, 10, 512), 8)
    assert _right("multi_head_q2") == str(tuple(heads.shape))


def test_the_lookup_facts():
    g = torch.Generator().manual_seed(0)
    q, keys = torch.randn(1, 3, generator=g), torch.randn(6, 3, generator=g)
    values = torch.randn(6, 2, generator=g)
    cold, _ = qkv.soft_lookup(q, keys, values, temperature=1e-4)
    hard, _ = qkv.hard_lookup(q, keys, values)
    assert _right("lookup_q1") == "the value of the best-matching key"
    torch.testing.assert_close(cold, hard)
    s = torch.randn(5, generator=g)
    assert _right("lookup_q2") == "they do not change"
    torch.testing.assert_close(qkv.softmax(s + 7.0), qkv.softmax(s))


def test_self_attention_is_permutation_equivariant():
    g = torch.Generator().manual_seed(0)
    x, W = torch.randn(5, 16, generator=g), [torch.randn(8, 16, generator=g) for _ in range(3)]
    perm = torch.randperm(5, generator=g)
    assert _right("qkv_q2") == "the same outputs, in the new order of the tokens"
    torch.testing.assert_close(qkv.self_attention(x[perm], *W), qkv.self_attention(x, *W)[perm])


def test_the_parameter_counts_match_pytorch_and_the_variance_is_measured():
    for embed_dim in (64, 512):
        assert QUESTIONS["multi_head_q1"].right(sum(
            p.numel() for p in nn.MultiheadAttention(embed_dim, 8).parameters()),
            embed_dim=embed_dim)
    measured = qkv.dot_product_variance(64, 200_000, torch.Generator().manual_seed(0))
    assert abs(measured - RIGHT_NUMBERS["scaling_q1"]()) < 2


def test_the_masks():
    ones = lambda *s: torch.ones(*s, dtype=torch.bool)  # noqa: E731  (the choices' `ones`)
    choices = QUESTIONS["masking_q1"].choices
    masks = {k: eval(v, {"ones": ones}) for k, v in choices.items()}  # noqa: S307
    right = [k for k, m in masks.items() if torch.equal(m, qkv.causal_mask(4))]
    assert right == [_letter(QUESTIONS["masking_q1"])]
    # key_padding_mask=~keep gives the attention of the real tokens only.
    torch.manual_seed(0)
    mha, x = nn.MultiheadAttention(8, 2, batch_first=True).eval(), torch.randn(1, 5, 8)
    keep = qkv.padding_mask([3], 5)
    assert _right("masking_q2") == "~keep"
    padded, _ = mha(x, x, x, key_padding_mask=~keep)
    real, _ = mha(x, x[:, :3], x[:, :3])
    torch.testing.assert_close(padded, real)
    row = qkv.causal_mask_bottom_right(2, 5)[0].nonzero().flatten().tolist()
    assert _right("variants_q2") == "keys 0 to 3" and row == [0, 1, 2, 3]


def test_rope_scores_depend_on_the_offset_only_and_alibi_slopes():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 1, 1, 8, generator=g), torch.randn(1, 1, 1, 8, generator=g)

    def score(m, n):
        return (qkv.apply_rope(q, offset=m) * qkv.apply_rope(k, offset=n)).sum()

    assert _right("position_q1") == "m - n"
    torch.testing.assert_close(score(7, 3), score(4, 0))
    assert not torch.allclose(score(7, 3), score(3, 7))
    assert QUESTIONS["position_q2"].right(2 ** (-8 / 8))


def test_the_online_softmax_rescale():
    s, m, m_new = torch.tensor([0.5, 1.0]), 1.0, 3.0
    l_old = torch.exp(s - m).sum()
    assert _right("efficient_q2") == "multiplied by exp(m - m')"
    rescaled = l_old * torch.exp(torch.tensor(m - m_new))
    torch.testing.assert_close(rescaled, torch.exp(s - m_new).sum())


def test_the_pre_norm_identity_path_and_the_gqa_cache():
    from qkv.transformer import Block, CausalSelfAttention

    # Pre-norm: with the sublayers writing nothing, the block is the identity (no norm on the
    # stream), whatever the stream's scale.
    torch.manual_seed(0)
    block = Block(16, 4, 2).eval()
    with torch.no_grad():
        block.attn.out_proj.weight.zero_()
        block.mlp.down.weight.zero_()
        x = 5 * torch.randn(2, 3, 16)
        torch.testing.assert_close(block(x)[0], x)
    assert _letter(QUESTIONS["capstone_q1"]) == "a"
    # GQA: 2 key/value heads for 8 query heads cache a quarter of what 8 would.
    x = torch.randn(1, 3, 64)
    sizes = {kv: sum(t.numel() for t in CausalSelfAttention(64, 8, kv)(x)[1]) for kv in (2, 8)}
    assert sizes[8] == 4 * sizes[2] and _right("capstone_q2") == "a quarter"


# --- every assignment asks its questions ---

def _question_cells(path):
    """(answer ids, test cells' ids and points, the markdown) of an assignment source."""
    nb = jupytext.read(path, fmt="md:myst")
    answers = [c.metadata["answer"] for c in nb.cells if c.metadata.get("answer") in QUESTIONS]
    tests = {c.metadata["tests"]: (c.metadata.get("points"), c.source) for c in nb.cells
             if "check_question" in c.source and "tests" in c.metadata}
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return answers, tests, markdown


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.parent.name)
def test_every_assignment_asks_two_questions_worth_half_a_point_each(path):
    answers, tests, markdown = _question_cells(path)
    assert len(answers) >= 2, f"{path.name} asks {answers}"
    for qid in answers:
        points, source = tests[f"test_{qid}"]
        assert points == 0.5 and f'check_question("{qid}", {qid}' in source
        q = QUESTIONS[qid]
        assert f"(`{qid}`)" in markdown
        for letter, text in getattr(q, "choices", {}).items():
            shown = rf"\({letter}\) `?{re.escape(text)}`?\n"
            assert re.search(shown, markdown + "\n"), (qid, letter)


@pytest.mark.parametrize("q", COMPUTED, ids=_ids)
def test_a_per_student_question_s_parameters_come_from_the_seed_as_its_examples(q, capsys):
    """The assignment's cell that draws the parameters from ``my_seed`` gives, for any seed,
    parameters among the question's examples (so the tests above judge every case a student
    can meet), and its test cell passes them to the check."""
    (path,) = [p for p in SOURCES if q.id in _question_cells(p)[0]]
    nb = jupytext.read(path, fmt="md:myst")
    (draw,) = [c.source for c in nb.cells if c.cell_type == "code" and "my_seed" in c.source
               and all(re.search(rf"\b{name}\b", c.source) for name in q.params)
               and "answer" not in c.metadata and "tests" not in c.metadata]
    seen = set()
    for my_seed in range(200):
        space = {"my_seed": my_seed}
        exec(draw, space)  # noqa: S102 (the course's own source)
        seen.add(tuple(sorted((name, space[name]) for name in q.params)))
    capsys.readouterr()
    assert seen == {tuple(sorted(e.items())) for e in q.examples}
    (test,) = [c.source for c in nb.cells if c.metadata.get("tests") == f"test_{q.id}"]
    for name in q.params:
        assert f"{name}={name}" in test, test


def test_every_question_is_asked_once():
    asked = [qid for path in SOURCES for qid in _question_cells(path)[0]]
    assert sorted(asked) == sorted(QUESTIONS)


@pytest.mark.parametrize("qid,answer,words", [
    ("bottleneck_q1", "1552", "without quotes: bottleneck_q1 = 1552"),
    ("bottleneck_q1", "1,552 params", "bottleneck_q1 = 1552 if '1,552 params' is already in that unit"),
    ("variants_q1", "32 KiB", "in the unit the question asks for (variants_q1 = 32 if"),
    ("bottleneck_q1", "3072 + 1536 + 48", "Python works it out: bottleneck_q1 = 3072 + 1536 + 48"),
    ("bottleneck_q1", "48 * (64 + 32 + 1)", "bottleneck_q1 = 48 * (64 + 32 + 1)"),
    ("bottleneck_q1", [1552], "not a list"),
    ("bottleneck_q2", ["a"], 'e.g. bottleneck_q2 = "<your letter>", not a list'),
    ("bottleneck_q2", 1, "not a number"),
    ("bottleneck_q2", "(4, 32)", 'write the letter of that choice, bottleneck_q2 = "b"'),
])
def test_an_answer_of_the_wrong_kind_says_how_to_write_it(qid, answer, words):
    with pytest.raises(AssertionError) as info:
        check_question(qid, answer)
    assert words in str(info.value), str(info.value)


def test_the_kernel_and_the_grader_read_a_record_entry_alike():
    """One judgement of a recorded entry (questions.as_recorded) serves check_question and the
    trusted grader (grading.is_answer): a per-student answer without its parameters is none."""
    from qkv.checks import grading

    for qid, entry, answer in [("scaling_q2", "B", "b"), ("scaling_q1", "64", None),
                               ("multi_head_q1", 1234, None)]:
        assert (grading.is_answer(qid, entry)) is (answer is not None), (qid, entry)
