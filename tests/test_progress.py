"""``qkv progress``: a student's report, from the command (notebooks run in a fresh kernel) and
from inside a notebook (:func:`qkv_course.progress.in_notebook`)."""

from __future__ import annotations

import re

import nbformat
import pytest
import torch

from masking_submissions import (EXERCISE, INVERTED_CAUSAL, INVERTED_PADDING, LOOPS_WITHOUT_S,
                                 MISTAKE_NAMES, SOLUTION, ZERO_FILL, submission)
from qkv.checks.masking import PADDING_MASK
from qkv_course.cli import main
from qkv_course.progress import in_notebook


def _progress(capsys, *args):
    code = main(["progress", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def _line(out, grade_id):
    return next(line for line in out.splitlines() if re.match(rf"\s+\S.*\s{grade_id}\s", line))


def test_solution_passes_every_test(capsys):
    code, out, _ = _progress(capsys, SOLUTION, "--timeout", 60)
    assert code == 0, out
    for test in ("test_causal_mask", "test_padding_mask", "test_masked_scores",
                 "test_global_window_mask"):
        assert _line(out, test).split()[0] == "pass"
    assert "total: 15/15 points from the tests (8 of 8 pass); 3 more graded by hand" in out


def test_a_folder_s_copies_of_a_notebook_are_left_out_unless_named(tmp_path):
    """Run first, scaling-Copy1.ipynb recorded its answers as the student's first ones."""
    from qkv_course.progress.command import find_notebooks

    folder = tmp_path / "06-masking"
    folder.mkdir()
    nb = submission({})
    for name in ("masking.ipynb", "masking-Copy1.ipynb", "masking (1).ipynb", "mine.ipynb"):
        nbformat.write(nb, str(folder / name))
    assert [p.name for p, _ in find_notebooks([folder])] == ["masking.ipynb", "mine.ipynb"]
    named = folder / "masking-Copy1.ipynb"
    assert [p for p, _ in find_notebooks([named])] == [named]


def test_a_folder_s_notebook_that_cannot_be_read_is_said_with_how_to_fix_it(tmp_path, capsys):
    """instr8: a notebook with a byte that is not UTF-8 was skipped without a word (and a folder
    of only that one said "no assignment notebooks"): the student never learnt that their own
    notebook cannot be read."""
    from qkv_course.progress.command import find_notebooks

    folder = tmp_path / "06-masking"
    folder.mkdir()
    text = nbformat.writes(submission({})).replace("def ", "# caf\u00e9\ndef ", 1)
    (folder / "masking.ipynb").write_bytes(text.encode().replace(b"caf\xc3\xa9", b"caf\xe9"))
    code, out, err = _progress(capsys, folder)
    assert code == 2 and "no assignment notebooks (with graded cells) in this folder that can " \
        "be read (1 cannot: above)" in err
    assert f"{folder / 'masking.ipynb'}: not a notebook ('utf-8' codec can't decode" in out
    assert "NOT RUN" in out and "save it as UTF-8" in out and "iconv" in out, out
    assert "replaced, and flag it" in out and "cannot read it" not in out  # as qkv grade does
    nbformat.write(submission({}), str(folder / "mine.ipynb"))
    unread = []
    assert [p.name for p, _ in find_notebooks([folder], unread)] == ["mine.ipynb"]
    assert unread == [folder / "masking.ipynb"] and "NOT RUN" in capsys.readouterr().out


def test_blank_exercise_fails_and_says_what_is_not_written(capsys):
    code, out, _ = _progress(capsys, EXERCISE.parent, "--timeout", 60)
    assert code == 1
    assert _line(out, "test_causal_mask").split()[:1] == ["FAIL"]
    assert "causal_mask is not written yet" in out
    assert "total: 0/15 points from the tests (0 of 8 pass); 3 more graded by hand" in out


def test_a_written_answer_left_blank_is_said_to_be_unwritten():
    from pathlib import Path as P

    from qkv_course.nbgrader.graded import questions
    from qkv_course.progress.report import format_notebook

    root = P(__file__).resolve().parents[1]
    for folder, blank in (("exercises", True), ("solutions", False)):
        path = root / folder / "04-scaling" / "scaling.ipynb"
        report = format_notebook(path, questions(nbformat.read(str(path), as_version=4)), [], 60)
        line = _line(report, "written_no_scale")
        assert ("not written yet (0 until you write it)" in line) is blank, line
        assert ("graded by hand" in line) is not blank, line


def test_known_mistake_in_full_and_a_timeout_and_the_notebook_untouched(capsys, tmp_path):
    path = tmp_path / "06-masking" / "masking.ipynb"
    path.parent.mkdir()
    nbformat.write(submission({"causal_mask": INVERTED_CAUSAL, "padding_mask": LOOPS_WITHOUT_S}),
                   str(path))
    before = path.read_bytes()
    code, out, err = _progress(capsys, path, "--timeout", 15)
    assert code == 1
    assert path.read_bytes() == before  # run in memory, never saved
    # The mistake's name ends a long line, and its hint follows: both whole.
    name = MISTAKE_NAMES[INVERTED_CAUSAL]
    assert re.search(r"causal_mask: wrong on .*: the result matches a known mistake: "
                     + re.escape(name) + "$", out, re.MULTILINE), out
    assert "Look at: a bool mask is True where attention is allowed" in out
    assert "use torch.tril, not triu" in out
    # The check interrupts the endless loop at its own limit, before the cell's (15 s).
    timeout_line = _line(out, "test_padding_mask")
    assert timeout_line.split()[0] == "TIMEOUT" and timeout_line.endswith("0/2")
    assert "your padding_mask took more than 10 s and was interrupted" in out, out
    assert "Traceback" not in out + err


def test_a_cell_past_its_limit_is_interrupted_and_said(capsys, tmp_path):
    """An endless loop outside any check (here, in the answer cell itself) stops at the cell's
    limit."""
    path = tmp_path / "06-masking" / "masking.ipynb"
    path.parent.mkdir()
    nbformat.write(submission({"causal_mask": "while True:\n    pass\n"}), str(path))
    code, out, err = _progress(capsys, path, "--timeout", 3)
    assert code == 1
    assert "TIMEOUT  cell 4 (causal_mask)" in out, out
    # A cell with no grade id is told by its first line: Jupyter and Colab number no cells.
    assert re.search(r'ERROR    cell \d+, starting "\S', out), out
    assert "the cell ran past its time limit and was interrupted" in out, out


@pytest.mark.parametrize("make, message", [
    (lambda tmp: tmp / "missing.ipynb", "no such file or folder"),
    (lambda tmp: _write(tmp / "notes.ipynb", "these are my notes"), "not a notebook"),
    (lambda tmp: _write(tmp / "plain.ipynb", nbformat.writes(nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("1 + 1")]))), "no graded cells"),
    (lambda tmp: tmp, "no assignment notebooks"),
])
def test_bad_paths_exit_2_with_one_line(capsys, tmp_path, make, message):
    path = make(tmp_path)
    code, out, err = _progress(capsys, path)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err and str(path) in err, err


def _write(path, text):
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- in a notebook


def _namespace(*sources):
    ns = {"torch": torch}
    for source in sources:
        exec(source, ns)  # noqa: S102 (the students' answers of masking_submissions)
    return ns


def test_in_notebook_reports_each_defined_answer_in_full(capsys):
    from qkv import causal_mask as reference  # imported, not the student's: not checked
    from qkv import scaled_dot_product_attention  # what assignment 6's set-up gives

    ns = _namespace(INVERTED_PADDING, "def causal_mask(L, S=None, device=None):\n"
                    "    return torch.ones(L, L if S is None else S, dtype=torch.bool, "
                    "device=device).tril()\n", ZERO_FILL)
    ns["softmax"] = reference
    ns["scaled_dot_product_attention"] = scaled_dot_product_attention
    summary = in_notebook(ns)
    out = capsys.readouterr().out
    assert summary.passed == ["causal_mask"]
    assert summary.failed == ["padding_mask", "masked_scores"]
    assert not summary.all_passed
    hint = next(m.hint for m in PADDING_MASK.mistakes if m.name == MISTAKE_NAMES[INVERTED_PADDING])
    assert f"known mistake: {MISTAKE_NAMES[INVERTED_PADDING]}\n" in out
    assert f"Look at: {hint}" in out
    assert f"known mistake: {MISTAKE_NAMES[ZERO_FILL]}\n" in out
    assert "softmax" not in out and "scaled_dot_product_attention" not in out
    assert "1 of 3 checks pass" in out


def test_in_notebook_never_raises(capsys):
    def padding_mask(lengths, S=None):
        raise KeyboardInterrupt  # the stop button, pressed during an endless loop

    summary = in_notebook({"padding_mask": padding_mask, "causal_mask": 3})
    out = capsys.readouterr().out
    assert [name for name, _ in summary.results] == ["padding_mask"]  # stopped there
    assert summary.results[0][1].status == "timeout" and "interrupted" in out
    assert in_notebook({}).results == [] and "no answers found" in capsys.readouterr().out


def test_in_notebook_uses_the_arguments_of_the_notebooks_own_test_cells(capsys):
    from qkv.checks.questions import QUESTIONS
    from qkv_course.calls import Call
    from qkv_course.progress.notebook import checks_called

    question = "masking_q1"
    assert question in QUESTIONS
    cells = ["from qkv.checks import check_scaled_dot_product_attention\n"
             "check_scaled_dot_product_attention(scaled_dot_product_attention, masks=False)\n"
             "check_scaled_dot_product_attention(scaled_dot_product_attention, seed=None, "
             "masks=False)",
             f"check_question({question!r}, my_answer)", "%timeit 1 + 1"]
    assert checks_called(cells) == [
        Call("check_scaled_dot_product_attention", "scaled_dot_product_attention",
             options={"masks": False}),
        Call("check_question", "my_answer", question=question)]
    ns = _namespace(
        "def scaled_dot_product_attention(query, key, value, scale=None):\n"
        "    s = query @ key.transpose(-2, -1) * (query.shape[-1] ** -0.5 if scale is None "
        "else scale)\n"
        "    w = (s - s.amax(-1, keepdim=True)).exp()\n"
        "    return (w / w.sum(-1, keepdim=True)) @ value\n")
    ns.update(In=cells, my_answer="not an answer")
    summary = in_notebook(ns)
    out = capsys.readouterr().out
    assert summary.passed == ["scaled_dot_product_attention(masks=False)"], out
    assert summary.failed == [f"check_question({question!r})"], out


def test_in_notebook_judges_the_first_answer_recorded_and_gives_none_away(capsys, tmp_path,
                                                                           monkeypatch):
    """A question is graded on its first answer, which its test cell records: the report judges
    that answer (not a later one in the variable) and, before there is one, neither judges nor
    shows the right answer."""
    import qkv
    from qkv.checks import check_question
    from qkv_course.calls import Call
    from qkv_course.progress.notebook import checks_called

    monkeypatch.setenv("QKV_ANSWERS", str(tmp_path / "answers.json"))
    cells = ["check_question('multi_head_q1', multi_head_q1, embed_dim=embed_dim)"]
    assert checks_called(cells) == [
        Call("check_question", "multi_head_q1", question="multi_head_q1",
             options={"embed_dim": "embed_dim"})]
    right = sum(p.numel() for p in qkv.MultiHeadAttention(192, 8).parameters())
    ns = {"In": cells, "multi_head_q1": right + 1, "embed_dim": 192}
    summary = in_notebook(ns)
    out = capsys.readouterr().out
    assert summary.failed == ["check_question('multi_head_q1')"], out
    assert "not recorded yet: run the test cell" in out and str(right) not in out, out
    check_question("multi_head_q1", right, embed_dim=192)  # the test cell, run: recorded
    capsys.readouterr()
    summary = in_notebook(ns)  # the variable now holds another answer: the first is graded
    assert summary.passed == ["check_question('multi_head_q1')"], capsys.readouterr().out
    assert in_notebook({"In": ["check_question('masking_q1', masking_q1)"]}).failed == [
        "check_question('masking_q1')"]
    assert "not answered yet: set masking_q1" in capsys.readouterr().out


def test_a_cells_outcome_is_read_from_the_results_it_holds_not_from_its_text():
    import json

    from nbformat.v4 import new_code_cell, new_output

    from qkv.checks.result import MIME, CheckResult
    from qkv_course.nbgrader.graded import FAIL, PASS, TIMEOUT, cell_outcome

    def cell(result, *more):
        data = {MIME: json.loads(result.to_json()), "text/plain": ""}
        return new_code_cell("check(f)", execution_count=1,
                             outputs=[new_output("display_data", data=data), *more])

    error = new_output("error", ename="CheckFailed", evalue="any text at all", traceback=[])
    wrong = CheckResult("softmax", False, 0, "1-D input", "no-scaling", "no scaling", "scale it",
                        "the result matches a known mistake: no scaling")
    outcome = cell_outcome(cell(wrong, error))
    assert (outcome.status, outcome.mistake) == (FAIL, "no scaling")
    assert outcome.message == wrong.message()
    slow = CheckResult("softmax", False, 0, "1-D input", what="took more than 10 s",
                       kind="timeout")
    assert cell_outcome(cell(slow, error)).status == TIMEOUT
    noticed = CheckResult("softmax", True, 0, notice="you called torch.softmax; ...")
    outcome = cell_outcome(cell(noticed))
    assert outcome.status == PASS and "you called torch.softmax" in outcome.message
