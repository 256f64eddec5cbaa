"""nbgrader round trips in a temporary course directory, through ``NbGraderAPI``.

One module-scoped course: the assignments are generated from the committed solutions (which
fills the gradebook), and every kind of submission below is autograded in a single run; the tests
read the gradebook and the autograded notebooks. That the committed exercises are what nbgrader
makes from the solutions is checked by ``tests/test_generated.py``.
"""

import copy
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from qkv_course.nbgrader.api import nbgrader_api, nbgrader_environment

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())
SCALING = "04-scaling"


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _cell(nb, grade_id):
    return next(c for c in nb.cells if _grade_id(c) == grade_id)


def _submit(course, student, assignment, notebooks):
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True)
    for name, nb in notebooks.items():
        nbformat.write(nb, str(folder / name))


def _scaling_variants(sol):
    """Submissions of the scaling assignment that each exercise one round trip."""
    out = {}

    # A wrong answer, its test cell emptied and the check's name rebound (nbgrader restores
    # the test cell, which imports the check again). What code in the kernel can do beyond
    # that is the trusted grader's business (qkv grade), not the checks'.
    nb = copy.deepcopy(sol)
    cell = _cell(nb, "attention_scores")
    cell.source = (cell.source.replace("scores = scores * scale", "scores = scores * 1.0")
                   + "\n\ncheck_attention_scores = lambda f, seed=0: None\n")
    _cell(nb, "test_attention_scores").source = "pass"
    out["edited"] = nb

    # The unanswered exercise with a test cell deleted.
    out["deleted"] = None  # built from the exercise below

    # Delegation to PyTorch in one answer; a warning from another.
    nb = copy.deepcopy(sol)
    _cell(nb, "scaled_dot_product_attention").source = '''
import torch.nn.functional as F

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    return F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                          scale=scale)
'''
    cell = _cell(nb, "dot_product_variance")
    cell.source = "import warnings\n\n" + cell.source.replace(
        "    ### BEGIN SOLUTION", '    warnings.warn("a student warning", UserWarning)\n'
        "    ### BEGIN SOLUTION", 1)
    out["delegates"] = nb

    # Right answers that write to stderr in every way a student's code does.
    nb = copy.deepcopy(sol)
    cell = _cell(nb, "dot_product_variance")
    cell.source = _NOISY_IMPORTS + cell.source.replace(
        "    ### BEGIN SOLUTION", _NOISY_LINES + "    ### BEGIN SOLUTION", 1)
    out["noisy"] = nb
    return out


_NOISY_IMPORTS = """import logging
import os
import sys
import warnings

from tqdm import tqdm

logging.basicConfig()

"""
_NOISY_LINES = """    print("noisy: print", file=sys.stderr)
    os.write(2, b"noisy: fd 2\\n")
    warnings.warn("noisy: warning")
    logging.getLogger("student").warning("noisy: log")
    for _ in tqdm(range(2), desc="noisy: bar"):
        pass
"""


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """Generate the assignments, submit every kind of answer, autograde all of it once."""
    with nbgrader_environment():
        yield _graded_course(tmp_path_factory.mktemp("course"))


def _graded_course(course):
    """The course directory and its API, every submission autograded."""
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "solutions", course / "solutions")
    api = nbgrader_api(course)
    results = {}
    for a in ASSIGNMENTS:
        r = api.generate_assignment(a, force=True, create=True)
        assert r["success"], r.get("error") or r.get("log")
        names = [p.name for p in (course / "solutions" / a).glob("*.ipynb")]
        read = lambda d, n: nbformat.read(str(course / d / a / n), as_version=4)  # noqa: E731
        _submit(course, "solution", a, {n: read("solutions", n) for n in names})
        _submit(course, "untouched", a, {n: read("exercises", n) for n in names})

    sol = nbformat.read(str(course / "solutions" / SCALING / "scaling.ipynb"), as_version=4)
    ex = nbformat.read(str(course / "exercises" / SCALING / "scaling.ipynb"), as_version=4)
    variants = _scaling_variants(sol)
    deleted = copy.deepcopy(ex)
    deleted.cells = [c for c in deleted.cells if _grade_id(c) != "test_dot_product_variance"]
    variants["deleted"] = deleted
    for student, nb in variants.items():
        _submit(course, student, SCALING, {"scaling.ipynb": nb})
    # An endless loop, graded with a short cell time limit.
    loop = copy.deepcopy(sol)
    _cell(loop, "attention_scores").source += "\n\nwhile True:\n    pass\n"
    _submit(course, "loops", SCALING, {"scaling.ipynb": loop})

    for a in ASSIGNMENTS:
        for student in ("solution", "untouched") + (tuple(variants) if a == SCALING else ()):
            results[a, student] = api.autograde(a, student, force=True, create=True)
    short = nbgrader_api(course, timeout=15)
    results[SCALING, "loops"] = short.autograde(SCALING, "loops", force=True, create=True)
    for key, r in results.items():
        assert r["success"], (key, r.get("error"), r.get("log"))
    return course, api


def _scores(api, assignment, student):
    """Scores and their maximum, of the autograded cells only (written answers are graded by
    hand: see :func:`_written`)."""
    with api.gradebook as gb:
        sub = gb.find_submission(assignment, student)
        grades = [g for nb in sub.notebooks for g in nb.grades if g.cell.cell_type == "code"]
        return {g.name: g.score for g in grades}, sum(g.max_score for g in grades)


def _written(api, assignment, student):
    """Written (markdown) answers: name -> (automatic score, needs a manual grade)."""
    with api.gradebook as gb:
        sub = gb.find_submission(assignment, student)
        return {g.name: (g.auto_score, g.needs_manual_grade) for nb in sub.notebooks
                for g in nb.grades if g.cell.cell_type == "markdown"}


def _autograded(course, student, assignment=SCALING, name="scaling.ipynb"):
    return nbformat.read(str(course / "autograded" / student / assignment / name), as_version=4)


def _output_text(cell):
    parts = []
    for o in cell.get("outputs", []):
        parts.append(o.get("text", "") + "\n".join(o.get("traceback", [])) + o.get("evalue", ""))
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(parts))


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solutions_score_full_marks_and_exercises_zero(course, assignment):
    _, api = course
    scores, max_score = _scores(api, assignment, "solution")
    assert max_score > 0 and sum(scores.values()) == max_score, scores
    scores, _ = _scores(api, assignment, "untouched")
    assert sum(scores.values()) == 0, scores


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_written_answers_wait_for_a_grader_and_blank_ones_score_zero(course, assignment):
    _, api = course
    for auto, manual in _written(api, assignment, "solution").values():
        assert auto is None and manual  # a model answer is read by a person
    for name, (auto, manual) in _written(api, assignment, "untouched").items():
        if name.startswith("task_"):  # a task's answer is a plain cell: a person always reads it
            assert auto is None and manual
        else:
            assert auto == 0 and not manual  # "YOUR ANSWER HERE" unchanged: zero, no grader


def test_scaling_has_a_written_question():
    nb = nbformat.read(str(ROOT / "exercises" / SCALING / "scaling.ipynb"), as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "markdown"
             and c.metadata.get("nbgrader", {}).get("grade")]
    tasks = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("task")]
    assert [_grade_id(c) for c in tasks] == ["task_bugs_found", "task_interpret_max_weight"]
    assert all("MARK SCHEME" not in c.source and "Rubric" not in c.source for c in tasks)
    assert [_grade_id(c) for c in cells] == ["written_no_scale"]
    assert cells[0].source.strip() == "YOUR ANSWER HERE"  # the model answer stays in solutions/


def test_edited_test_cell_is_restored_and_the_check_imported_again(course):
    course_dir, api = course
    scores, _ = _scores(api, SCALING, "edited")
    assert scores["test_attention_scores"] == 0
    assert scores["test_dot_product_variance"] == 3
    cell = _cell(_autograded(course_dir, "edited"), "test_attention_scores")
    assert "check_attention_scores(attention_scores)" in cell.source
    assert "no scaling" in _output_text(cell)


def test_deleted_test_cell_is_readded_and_scores_zero(course):
    course_dir, api = course
    scores, _ = _scores(api, SCALING, "deleted")
    assert scores["test_dot_product_variance"] == 0 and sum(scores.values()) == 0
    cell = _cell(_autograded(course_dir, "deleted"), "test_dot_product_variance")
    assert "was missing from the submission" in cell.source
    assert "not written yet" in _output_text(cell)


def test_endless_loop_times_out_and_the_rest_is_graded(course):
    course_dir, api = course
    scores, max_score = _scores(api, SCALING, "loops")
    assert sum(scores.values()) == max_score, scores  # defined before the loop
    text = _output_text(_cell(_autograded(course_dir, "loops"), "attention_scores"))
    assert "Timeout" in text or "KeyboardInterrupt" in text or "Interrupt" in text, text[-500:]


def test_delegating_answer_gets_a_notice_not_a_deduction_and_warnings_cost_nothing(course):
    """Delegation is a flag for a person (the notice in the output), never a silent deduction."""
    course_dir, api = course
    scores, max_score = _scores(api, SCALING, "delegates")
    assert sum(scores.values()) == max_score, scores
    nb = _autograded(course_dir, "delegates")
    text = _output_text(_cell(nb, "test_scaled_dot_product_attention"))
    assert "you called torch.nn.functional.scaled_dot_product_attention" in text
    assert "a student warning" in _output_text(_cell(nb, "test_dot_product_variance"))


def test_gradebook_holds_every_submission(course):
    course_dir, api = course
    with api.gradebook as gb:
        for a in ASSIGNMENTS:
            submitted = {p.name for p in (course_dir / "submitted").iterdir()
                         if (p / a).is_dir()}
            assert {s.student.id for s in gb.assignment_submissions(a)} == submitted


def test_stderr_from_right_answers_costs_nothing_and_is_shown(course):
    course_dir, api = course
    scores, max_score = _scores(api, SCALING, "noisy")
    assert sum(scores.values()) == max_score, scores
    nb = _autograded(course_dir, "noisy")
    cell = _cell(nb, "test_dot_product_variance")
    assert not [o for o in cell.outputs if o.get("name") == "stderr"], cell.outputs
    text = _output_text(cell)
    for words in ("noisy: print", "noisy: warning", "noisy: log", "noisy: bar"):
        assert words in text, (words, text[-2000:])
    # What reaches file descriptor 2 goes wherever the kernel's fd 1 goes (under nbgrader, not
    # into the notebook: measured), and never into a stderr output that would cost points.
    assert not [o for c in nb.cells for o in c.get("outputs", []) if o.get("name") == "stderr"]


def test_a_task_s_rubric_comes_back_for_the_grader(course):
    """The rubric is cleared from the students' copy and put back when a submission is
    autograded, so formgrader shows it beside the student's answer."""
    course_dir, _ = course
    released = nbformat.read(str(ROOT / "exercises" / SCALING / "scaling.ipynb"), as_version=4)
    assert "Rubric" not in _cell(released, "task_interpret_max_weight").source
    for student in ("solution", "untouched"):
        cell = _cell(_autograded(course_dir, student), "task_interpret_max_weight")
        assert "<!-- BEGIN MARK SCHEME -->" in cell.source and "Rubric (3 points" in cell.source
