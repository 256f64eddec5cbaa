"""``qkv gradescope``: the Otter-Grader autograder scores as nbgrader does.

The slow test makes the autograders of two assignments, then grades the same notebooks (each
made from the Gradescope notebook: the solution, a blank one, a known mistake, tampered ones)
with ``otter run`` and with a real ``nbgrader autograde``, all at once, and compares the scores
test by test. The fast tests check the pieces: the assignment lookup, the students' notebook
against nbgrader's release, and the test files run in this process on hand-made answers.
"""

from __future__ import annotations

import concurrent.futures
import copy
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
from otter.test_files import ExceptionTestFile

from masking_submissions import (INVERTED_CAUSAL, LOOPS_WITHOUT_S, MISTAKE_NAMES,
                                 sdpa_with_its_own_causal_mask, solution_answer)
from notebook import SETUP
from qkv_course import assignments, gradescope
from qkv_course.cli import main
from qkv_course.config import ROOT
from qkv_course.exercises import nbgrader_api, nbgrader_environment
from test_nbgrader import _cell, _scaling_variants, _scores, _submit

MASKING, SCALING = "06-masking", "04-scaling"
BIN = Path(sys.executable).parent  # otter and nbgrader (which runs alembic) from this venv


def _solution(assignment):
    source = assignments.source(assignment)
    nb = assignments.notebook(source)
    assignments.stamp(nb, source.relative_to(ROOT).as_posix())
    return nb


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


# --------------------------------------------------------------------------- the command


def test_unknown_assignment_is_one_line_and_exit_2(capsys, tmp_path):
    assert main(["gradescope", "07-nothing", "--out", str(tmp_path / "out")]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "Traceback" not in err and "07-nothing" in err
    assert "06-masking" in err  # the message lists the assignments there are
    assert not (tmp_path / "out").exists()


def test_an_assignment_is_named_by_name_folder_or_source(tmp_path):
    expected = ROOT / "solutions" / MASKING / "masking.md"
    assert assignments.source(MASKING) == expected
    assert assignments.source(str(expected.parent)) == expected
    assert assignments.source(str(expected)) == expected
    with pytest.raises(FileNotFoundError, match="not one"):
        assignments.source(str(ROOT / "book"))  # a folder of many .md files


# --------------------------------------------------------------------------- the pieces


def test_students_notebook_is_nbgraders_release_plus_otters_cell_metadata():
    released = gradescope.release(_solution(MASKING))
    committed = (ROOT / "exercises" / MASKING / "masking.ipynb").read_text()
    assert assignments.text(released) == committed

    student = gradescope.student_notebook(released)
    assert [c.source for c in student.cells] == [c.source for c in released.cells]
    hosts = {}
    for before, cell in zip(student.cells, student.cells[1:]):
        if gradescope._is_test(cell):
            assert cell.metadata["otter"] == {"ignore": True}  # Otter runs the test file instead
            hosts[_grade_id(cell)] = before.metadata["otter"]["tests"]
    assert hosts == {t: [t] for t in ("test_causal_mask", "test_padding_mask",
                                      "test_scaled_dot_product_attention",
                                      "test_padded_causal_attention", "test_padding_leak",
                                      "test_masking_q1", "test_masking_q2")}


def _test_files(assignment, time_limit):
    """grade id -> the text of its Otter test file."""
    solution = _solution(assignment)
    released = gradescope.release(solution)
    return {g: gradescope.otter_test(solution, released, g, "here", time_limit)
            for g in gradescope._grade_ids(solution, written=False)}


def _parsed(text, name):
    return ExceptionTestFile.from_string(text, path=f"{name}.py")


def _namespace(**answers):
    """A notebook's namespace after its set-up cell and the answer cells of 06-masking."""
    env = {"__name__": "__main__"}
    exec(SETUP, env)  # noqa: S102 (test input)
    for grade_id in ("causal_mask", "padding_mask", "scaled_dot_product_attention",
                     "padded_causal_attention", "padding_leak", "masking_q1", "masking_q2"):
        exec(answers.get(grade_id, solution_answer(grade_id)), env)  # noqa: S102
    return env


def test_test_files_score_a_cell_as_nbgrader_does(monkeypatch, tmp_path):
    monkeypatch.setenv("QKV_ANSWERS", str(tmp_path / "qkv_answers.json"))  # not in the repository
    files = _test_files(MASKING, time_limit=3)
    points = {"test_causal_mask": 2, "test_padding_mask": 2,
              "test_scaled_dot_product_attention": 4, "test_padded_causal_attention": 3,
              "test_padding_leak": 2, "test_masking_q1": 0.5, "test_masking_q2": 0.5}
    for name, text in files.items():
        f = _parsed(text, name)
        assert f.name == name and f.possible == points[name]
        assert [(c.name, c.hidden, c.points) for c in f.test_cases] == [
            ("visible", False, 0), ("hidden", True, points[name])]
    assert set(files) == set(points)

    def run(name, env):
        f = _parsed(files[name], name)
        f.run(env)
        return f

    for name in points:
        assert run(name, _namespace()).score == points[name]
    wrong = run("test_causal_mask", _namespace(causal_mask=INVERTED_CAUSAL))
    assert wrong.score == 0 and MISTAKE_NAMES[INVERTED_CAUSAL] in wrong.summary()

    noisy = solution_answer("causal_mask").replace(
        "    S = L if S is None else S", "    import sys; print('debug', file=sys.stderr)\n"
        "    S = L if S is None else S")
    assert "debug" in noisy
    f = run("test_causal_mask", _namespace(causal_mask=noisy))
    assert f.score == 0 and "wrote to stderr" in f.summary()

    start = time.perf_counter()
    f = run("test_padding_mask", _namespace(padding_mask=LOOPS_WITHOUT_S))
    # Stopped by Otter's time limit, or first by the check's own time budget (10 s floor),
    # which takes over SIGALRM while it runs and names the input instead.
    assert f.score == 0
    assert "time limit of 3" in f.summary() or "took more than" in f.summary(), f.summary()
    assert time.perf_counter() - start < 40  # stopped once, not once per case


# --------------------------------------------------------------------------- graded for real


def _filled(base, solution, answers=None):
    """The students' notebook with every answer cell filled in: the model answer, or
    ``answers[grade_id]``."""
    nb = copy.deepcopy(base)
    model = {_grade_id(c): c.source for c in solution.cells}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            cell.source = (answers or {}).get(_grade_id(cell), model[_grade_id(cell)])
    return nb


def _masking_submissions(base, solution):
    mistake = {"causal_mask": INVERTED_CAUSAL,
               "scaled_dot_product_attention": sdpa_with_its_own_causal_mask()}
    # A wrong answer whose visible test is edited away (the autograder puts the test back).
    # Code that rebinds the checks in its own kernel is qkv grade's business, not this test's.
    tampered = _filled(base, solution, {
        "causal_mask": INVERTED_CAUSAL,
        "scaled_dot_product_attention": sdpa_with_its_own_causal_mask()})
    _cell(tampered, "test_causal_mask").source = "pass"  # an edited visible test
    return {"solution": _filled(base, solution), "blank": base,
            "mistake": _filled(base, solution, mistake), "tampered": tampered}


def _scaling_submissions(base, solution):
    filled = _filled(base, solution)
    variants = _scaling_variants(filled)  # test_nbgrader's: "edited"
    mistake = copy.deepcopy(filled)
    cell = _cell(mistake, "attention_scores")
    cell.source = cell.source.replace("scores = scores * scale", "scores = scores * 1.0")
    return {"solution": filled, "blank": base, "mistake": mistake,
            "tampered": variants["edited"]}


SUBMISSIONS = {MASKING: _masking_submissions, SCALING: _scaling_submissions}


def _job(args, cwd):
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Every submission graded by ``otter run`` and by ``nbgrader autograde``.

    Returns:
        {(assignment, student): (nbgrader's scores, Otter's results.json)}, the made files.
    """
    tmp = tmp_path_factory.mktemp("gradescope")
    course = tmp / "course"
    (course / "solutions").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    made, jobs = {}, []
    for assignment, make in SUBMISSIONS.items():
        shutil.copytree(ROOT / "solutions" / assignment, course / "solutions" / assignment)
        out = tmp / "out" / assignment
        assert main(["gradescope", assignment, "--out", str(out)]) == 0
        made[assignment] = out
        student_notebook = next(out.glob("*.ipynb"))
        base = nbformat.read(str(student_notebook), as_version=4)
        for student, nb in make(base, _solution(assignment)).items():
            _submit(course, student, assignment, {student_notebook.name: nb})
            results = tmp / "otter" / assignment / student
            results.mkdir(parents=True)
            submitted = course / "submitted" / student / assignment / student_notebook.name
            jobs.append([str(BIN / "otter"), "run", "-a", str(out / "autograder.zip"),
                         "-o", str(results), "--no-logo", str(submitted)])
    with nbgrader_environment():
        for assignment in SUBMISSIONS:
            r = nbgrader_api(course).generate_assignment(assignment, force=True, create=True)
            assert r["success"], r.get("error") or r.get("log")
    jobs += [[str(BIN / "nbgrader"), "autograde", a, "--force"] for a in SUBMISSIONS]
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        for future in [pool.submit(_job, job, course) for job in jobs]:
            future.result()
    api = nbgrader_api(course)
    scores = {}
    for assignment in SUBMISSIONS:
        for student in _students(course, assignment):
            otter = json.loads((tmp / "otter" / assignment / student / "results.json").read_text())
            scores[assignment, student] = (_scores(api, assignment, student)[0], otter)
    return scores, made


def _students(course, assignment):
    return sorted(p.parent.name for p in (course / "submitted").glob(f"*/{assignment}"))


def _otter_scores(results):
    return {t["name"]: t["score"] for t in results["tests"] if "score" in t}


def _otter_output(results, test):
    return next(t["output"] for t in results["tests"] if t["name"] == test)


@pytest.mark.slow
def test_otter_scores_equal_nbgraders_test_by_test(graded):
    scores, _ = graded
    assert len(scores) == 9
    for (assignment, student), (nbgrader, otter) in scores.items():
        assert _otter_scores(otter) == nbgrader, (assignment, student)


@pytest.mark.slow
def test_scores_are_the_ones_each_submission_deserves(graded):
    scores, _ = graded
    for assignment in SUBMISSIONS:
        solution, _ = scores[assignment, "solution"]
        assert all(s > 0 for s in solution.values())  # full marks (nbgrader's max, compared above)
        assert sum(scores[assignment, "blank"][0].values()) == 0
    masking, otter = scores[MASKING, "mistake"]
    assert masking["test_causal_mask"] == 0 and masking["test_padding_mask"] == 2
    assert MISTAKE_NAMES[INVERTED_CAUSAL] in _otter_output(otter, "test_causal_mask")
    assert scores[MASKING, "tampered"][0]["test_causal_mask"] == 0
    scaling, otter = scores[SCALING, "mistake"]
    assert scaling["test_attention_scores"] == 0 and scaling["test_softmax"] == 1
    assert "no scaling" in _otter_output(otter, "test_attention_scores")
    assert scores[SCALING, "tampered"][0]["test_attention_scores"] == 0


@pytest.mark.slow
def test_the_zip_installs_cpu_torch_and_the_bundled_package_and_leaves_written_answers(graded):
    _, made = graded
    with zipfile.ZipFile(made[SCALING] / "autograder.zip") as z:
        names = set(z.namelist())
        environment = z.read("environment.yml").decode()
        config = json.loads(z.read("otter_config.json"))
        built_from = z.read("files/qkv-built-from.txt").decode()
        setup = z.read("setup.sh").decode()
    wheels = [n for n in names if n.startswith("files/qkv-") and n.endswith(".whl")]
    assert len(wheels) == 1 and f"/autograder/source/{wheels[0]}" in environment
    assert "download.pytorch.org/whl/cpu" in environment and "torch==2.13.0+cpu" in environment
    assert f"python={sys.version_info.major}.{sys.version_info.minor}" in environment
    assert "git+" not in environment  # nothing fetched from the repository
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True).stdout.strip()
    assert f"built from commit {head}" in built_from
    assert config["show_hidden"] is True
    assert setup.startswith("#!/usr/bin/env bash")  # Otter's, with one step added at the end
    assert setup.rstrip().endswith("pip uninstall --yes rfc3987-syntax")
    assert {n for n in names if n.startswith("tests/")} == {
        f"tests/{t}.py" for t in ("test_attention_scores", "test_softmax",
                                  "test_scaled_dot_product_attention", "test_dot_product_variance",
                                  "test_scaling_q1", "test_scaling_q2")}
    assert (made[SCALING] / "scaling.ipynb").is_file()  # the written answer: graded by hand
