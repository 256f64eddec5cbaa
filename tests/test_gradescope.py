"""``qkv gradescope``: the autograder zip grades with ``qkv grade``'s engine, as nbgrader scores.

The slow tests make the autograders of two assignments, then grade the same notebooks (each
made from the Gradescope notebook: the solution, a blank one, a known mistake, tampered ones)
with the zip's own ``run_autograder`` (Gradescope's layout emulated in a temporary folder) and
with a real ``nbgrader autograde``, all at once, and compare the scores test by test; one more
runs it where bubblewrap cannot make a sandbox. The fast tests check the pieces: the
assignment lookup and the students' notebook against nbgrader's release.
"""

from __future__ import annotations

import concurrent.futures
import copy
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from masking_submissions import (INVERTED_CAUSAL, MISTAKE_NAMES,
                                 masked_scores_with_its_own_causal_mask)
from qkv_course.cli import main
from qkv_course.config import ROOT
from qkv_course.generate import assignments
from qkv_course.gradescope import command as gradescope
from qkv_course.nbgrader.api import nbgrader_api, nbgrader_environment
from test_nbgrader import _cell, _scaling_variants, _scores, _submit

MASKING, SCALING = "06-masking", "04-scaling"
BIN = Path(sys.executable).parent  # nbgrader (which runs alembic) from this venv


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


def test_students_notebook_is_nbgraders_release(tmp_path):
    released = gradescope.release(_solution(MASKING))
    committed = (ROOT / "exercises" / MASKING / "masking.ipynb").read_text()
    assert assignments.text(released) == committed
    assert not any("otter" in c.metadata for c in released.cells)


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
               "masked_scores": masked_scores_with_its_own_causal_mask()}
    # A wrong answer whose visible test is edited away (the autograder puts the test back).
    # Code that rebinds the checks in its own kernel is qkv grade's business, not this test's.
    tampered = _filled(base, solution, {
        "causal_mask": INVERTED_CAUSAL,
        "masked_scores": masked_scores_with_its_own_causal_mask()})
    _cell(tampered, "test_causal_mask").source = "pass"  # an edited visible test
    model = {_grade_id(c): c.source for c in solution.cells}
    # IPython lines in answer cells, as students leave them: the engine reads them as IPython.
    magics = _filled(base, solution, {
        "causal_mask": ("%matplotlib inline\n" + model["causal_mask"]
                        + "\n%time _ = causal_mask(4)\n")})
    return {"solution": _filled(base, solution), "blank": base,
            "mistake": _filled(base, solution, mistake), "tampered": tampered, "magics": magics}


def _scaling_submissions(base, solution):
    filled = _filled(base, solution)
    variants = _scaling_variants(filled)  # test_nbgrader's: "edited" (an emptied test cell)
    mistake = copy.deepcopy(filled)
    cell = _cell(mistake, "attention_scores")
    cell.source = cell.source.replace("scores = scores * scale", "scores = scores * 1.0")
    return {"solution": filled, "blank": base, "mistake": mistake,
            "tampered": variants["edited"]}


SUBMISSIONS = {MASKING: _masking_submissions, SCALING: _scaling_submissions}


def _job(args, cwd, env=None):
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {}))
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])


def _autograder(zip_path, folder, notebook, nb, student):
    """Gradescope's layout in ``folder`` (the zip in ``source/``, the upload in
    ``submission/``, its metadata beside), and the job that runs the zip's ``run_autograder``
    there with this Python (the one ``setup.sh`` would install)."""
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(folder / "source")
    (folder / "source" / "run_autograder").chmod(0o755)  # extractall drops the mode bits
    (folder / "submission").mkdir()
    nbformat.write(nb, str(folder / "submission" / notebook))
    (folder / "submission_metadata.json").write_text(json.dumps(
        {"id": 1, "users": [{"sid": student, "email": f"{student}@example.org"}]}))
    env = {"QKV_AUTOGRADER": str(folder), "QKV_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join(sys.path)}
    return [str(folder / "source" / "run_autograder")], env


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Every submission graded by the zip's ``run_autograder`` and by ``nbgrader autograde``.

    Returns:
        {(assignment, student): (nbgrader's scores, the engine's results.json)}, the made files.
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
            args, env = _autograder(out / "autograder.zip", tmp / "gs" / assignment / student,
                                    student_notebook.name, nb, student)
            jobs.append((args, tmp, env))
    with nbgrader_environment():
        for assignment in SUBMISSIONS:
            r = nbgrader_api(course).generate_assignment(assignment, force=True, create=True)
            assert r["success"], r.get("error") or r.get("log")
    jobs += [([str(BIN / "nbgrader"), "autograde", a, "--force"], course, None)
             for a in SUBMISSIONS]
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        for future in [pool.submit(_job, *job) for job in jobs]:
            future.result()
    api = nbgrader_api(course)
    scores = {}
    for assignment in SUBMISSIONS:
        for student in _students(course, assignment):
            results = tmp / "gs" / assignment / student / "results" / "results.json"
            scores[assignment, student] = (_scores(api, assignment, student)[0],
                                           json.loads(results.read_text()))
    return scores, made


def _students(course, assignment):
    return sorted(p.parent.name for p in (course / "submitted").glob(f"*/{assignment}"))


def _engine_scores(results):
    return {t["name"]: t["score"] for t in results["tests"]}


def _output(results, test):
    return next(t["output"] for t in results["tests"] if t["name"] == test)


@pytest.mark.slow
def test_engine_scores_equal_nbgraders_test_by_test(graded):
    scores, _ = graded
    assert len(scores) == 9
    for (assignment, student), (nbgrader, engine) in scores.items():
        assert _engine_scores(engine) == nbgrader, (assignment, student, engine["output"])
        assert {t["name"]: t["max_score"] for t in engine["tests"]} == {
            t: p for t, p in _points(assignment).items()}
        record = engine["extra_data"]["qkv"]
        assert record["student"] == student and record["assignment"] == assignment
        assert record["sandboxed"] is True and "bubblewrap" not in engine["output"]


def _pin(name):
    """requirements.txt's line that pins ``name``."""
    return next(line for line in (ROOT / "requirements.txt").read_text().splitlines()
                if line.lower().startswith(f"{name}=="))


def test_the_zip_installs_ipython_at_the_course_pin():
    """Without IPython in the grading image the engine ran cells as plain Python: an answer
    cell with ``%time`` did not compile and scored 0 on Gradescope alone."""
    from qkv_course.gradescope.autograder_zip import requirements

    lines = requirements(ROOT, "qkv-0.1.0-py3-none-any.whl").splitlines()
    assert _pin("ipython") in lines
    assert lines.index(_pin("ipython")) < len(lines) - 1  # before the wheel, with the others


def test_without_ipython_a_cell_that_does_not_compile_is_not_said_to_be_read_by_it(
        monkeypatch):
    from qkv_course.grade import names

    cell = "def f():\n    return 1\n\n%time f()\n"
    names.parse(cell)  # IPython is here: it compiles
    monkeypatch.setitem(sys.modules, "IPython.core.inputtransformer2", None)  # not installed
    with pytest.raises(names.NotRead) as e:
        names.parse(cell)
    assert "read as plain Python (IPython is not installed" in str(e.value)
    assert "even as IPython" not in str(e.value)


def _points(assignment):
    return gradescope._grade_ids(_solution(assignment), written=False)


@pytest.mark.slow
def test_scores_are_the_ones_each_submission_deserves(graded):
    scores, _ = graded
    for assignment in SUBMISSIONS:
        solution, _ = scores[assignment, "solution"]
        assert all(s > 0 for s in solution.values())  # full marks (nbgrader's max, compared above)
        assert sum(scores[assignment, "blank"][0].values()) == 0
    assert scores[MASKING, "magics"][0] == scores[MASKING, "solution"][0]  # full marks there too
    masking, engine = scores[MASKING, "mistake"]
    assert masking["test_causal_mask"] == 0 and masking["test_padding_mask"] == 2
    assert masking["test_masked_scores"] == _points(MASKING)["test_masked_scores"]  # not again
    assert MISTAKE_NAMES[INVERTED_CAUSAL] in _output(engine, "test_causal_mask")
    assert scores[MASKING, "tampered"][0]["test_causal_mask"] == 0
    scaling, engine = scores[SCALING, "mistake"]
    assert scaling["test_attention_scores"] == 0 and sum(scaling.values()) > 0  # one test lost
    assert "no scaling" in _output(engine, "test_attention_scores")
    assert scores[SCALING, "tampered"][0]["test_attention_scores"] == 0
    assert "graded by hand" in scores[SCALING, "solution"][1]["output"]  # the written answer
    # What a student reads at once names no test, mistake or flag: those wait for publishing.
    assert "test_attention_scores" not in engine["output"] and "no scaling" not in engine["output"]


def test_a_student_reads_no_flag_and_no_failing_test_before_the_grades_are_published(
        tmp_path, capsys, monkeypatch):
    from qkv_course.gradescope import autograder

    record = {"student": "ann", "assignment": SCALING, "notebook": "scaling", "score": 3.0,
              "max_score": 5.0, "written": {},
              "tests": [{"grade_id": "test_hidden_case", "earned": 0.0, "points": 2.0,
                         "status": "fail", "message": "no scaling", "mistake": "no scaling"},
                        {"grade_id": "test_shown", "earned": 3.0, "points": 3.0,
                         "status": "pass", "message": ""}],
              "flags": [{"test": "", "source": "static", "detail": "uses qkv.attention_scores"}]}
    results = autograder.results_json(record, sandboxed=True)
    assert results["output"] == autograder.GRADED_NOTE
    assert results["stdout_visibility"] == "hidden"
    assert {t["visibility"] for t in results["tests"]} == {"after_published"}
    # The course staff read the whole line in the run's stdout.
    monkeypatch.setattr(autograder, "grade_submission", lambda *a, **k: results)
    out = tmp_path / "results.json"
    assert autograder.main([str(tmp_path), SCALING, str(tmp_path), str(out)]) == 0
    said = capsys.readouterr().out
    assert "test_hidden_case (no scaling)" in said and "FLAGGED for review" in said
    assert "FLAGGED" not in out.read_text().split('"extra_data"')[0]


@pytest.mark.slow
def test_the_zip_installs_cpu_torch_and_the_bundled_package_and_runs_the_engine(graded):
    _, made = graded
    with zipfile.ZipFile(made[SCALING] / "autograder.zip") as z:
        names = set(z.namelist())
        requirements = z.read("requirements.txt").decode()
        built_from = z.read("files/qkv-built-from.txt").decode()
        setup = z.read("setup.sh").decode()
        run = z.read("run_autograder").decode()
        key = z.read("course/.qkv-grade-key").decode().strip()
        mode = z.getinfo("run_autograder").external_attr >> 16
    wheels = [n for n in names if n.startswith("files/qkv-") and n.endswith(".whl")]
    assert len(wheels) == 1 and f"/autograder/source/{wheels[0]}" in requirements
    assert "download.pytorch.org/whl/cpu" in requirements and "torch==2.13.0+cpu" in requirements
    # The engine reads answer cells as IPython does (%time, %matplotlib inline): installed.
    assert _pin("ipython") in requirements.splitlines()
    assert f"python={sys.version_info.major}.{sys.version_info.minor}" in setup
    assert "bubblewrap" in setup and "git+" not in requirements  # nothing from the repository
    assert "otter" not in (setup + run + requirements).lower()
    assert "-m qkv_course.gradescope.autograder" in run and SCALING in run and mode & 0o111
    assert len(key) == 64
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True).stdout.strip()
    assert f"built from commit {head}" in built_from
    assert {n for n in names if n.startswith("course/")} == {
        "course/.qkv-grade-key", f"course/solutions/{SCALING}/scaling.ipynb",
        f"course/exercises/{SCALING}/scaling.ipynb"}
    assert (made[SCALING] / "scaling.ipynb").is_file()


@pytest.mark.slow
def test_without_a_sandbox_the_container_is_the_boundary_and_results_say_so(graded, tmp_path):
    """Where bwrap cannot make namespaces (a fake one that fails, first on PATH), the engine
    grades unsandboxed, judges in the parent all the same, and says so in the output."""
    _, made = graded
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    base = nbformat.read(str(made[MASKING] / "masking.ipynb"), as_version=4)
    nb = _filled(base, _solution(MASKING), {"causal_mask": INVERTED_CAUSAL})
    args, env = _autograder(made[MASKING] / "autograder.zip", tmp_path / "ag", "masking.ipynb",
                            nb, "eve")
    env["PATH"] = f"{fake}{os.pathsep}{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    done = subprocess.run(args, env=dict(os.environ, **env), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "ag" / "results" / "results.json").read_text())
    assert "could not start in this container" in results["output"]
    assert "namespace" in results["output"]  # what stopped it
    assert results["extra_data"]["qkv"]["sandboxed"] is False
    scores = _engine_scores(results)
    assert scores["test_causal_mask"] == 0 and scores["test_padding_mask"] == 2
    assert MISTAKE_NAMES[INVERTED_CAUSAL] in _output(results, "test_causal_mask")


def test_an_upload_in_a_folder_with_a_renamed_record_is_graded_from_both(graded, tmp_path):
    """Gradescope keeps an uploaded folder as it is, and a browser names a second download
    "qkv_answers (1).json": the one notebook below is graded, on the record beside it."""
    from qkv.checks.questions import QUESTIONS

    _, made = graded
    base = nbformat.read(str(made[MASKING] / "masking.ipynb"), as_version=4)
    nb = _filled(base, _solution(MASKING), {})
    args, env = _autograder(made[MASKING] / "autograder.zip", tmp_path / "ag", "masking.ipynb",
                            nb, "fay")
    work = tmp_path / "ag" / "submission" / "work"
    work.mkdir()
    (tmp_path / "ag" / "submission" / "masking.ipynb").rename(work / "masking.ipynb")
    q = QUESTIONS["masking_q1"]
    wrong = next(k for k in q.choices if not q.right(k))
    (work / "qkv_answers (1).json").write_text(json.dumps({"masking_q1": wrong}))
    done = subprocess.run(args, env=dict(os.environ, **env), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "ag" / "results" / "results.json").read_text())
    scores = _engine_scores(results)
    assert scores["test_masking_q1"] == 0 and scores["test_masking_q2"] == 0.5, scores
    assert scores["test_causal_mask"] == 2, scores


def test_an_upload_of_several_notebooks_is_refused_by_name_and_still_counted(tmp_path):
    """Two notebooks, neither the assignment's: the results say which were found and which to
    upload, and keep a record, so qkv report counts the student (every test not passed)."""
    from qkv_course.gradescope import autograder
    from qkv_course.report.mistakes import read_gradescope

    upload = tmp_path / "submission"
    upload.mkdir()
    for name in ("draft.ipynb", "final.ipynb"):
        (upload / name).write_text("{}")
    out = tmp_path / "results" / "results.json"
    assert autograder.main([str(ROOT), MASKING, str(upload), str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["score"] == 0 and "found 2: draft.ipynb, final.ipynb" in results["output"]
    assert "upload only the assignment's notebook (masking.ipynb)" in results["output"]
    assert list(read_gradescope(tmp_path)) == [MASKING]


def test_an_upload_with_a_copy_beside_the_notebook_grades_the_notebook_and_says_so(tmp_path):
    """A student who uploads masking.ipynb and the masking-Copy1.ipynb Jupyter made is graded on
    masking.ipynb, and the output they read says which file was graded and which was not."""
    from qkv_course.gradescope import autograder

    course = tmp_path / "course"
    shutil.copytree(ROOT / "solutions" / MASKING, course / "solutions" / MASKING)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    upload = tmp_path / "submission"
    upload.mkdir()
    for name in ("masking.ipynb", "masking-Copy1.ipynb"):
        shutil.copy(ROOT / "exercises" / MASKING / "masking.ipynb", upload / name)
    out = tmp_path / "results" / "results.json"
    assert autograder.main([str(course), MASKING, str(upload), str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["output"].startswith(
        "graded masking.ipynb; not graded: masking-Copy1.ipynb"), results["output"][:300]
    assert results["tests"] and results["extra_data"]["qkv"]["notebook"] == "masking"


# ------------------------------------------------------------------------ the sandbox's failures


def _course_with(tmp_path, assignment=MASKING):
    course = tmp_path / "course"
    shutil.copytree(ROOT / "solutions" / assignment, course / "solutions" / assignment)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    upload = tmp_path / "submission"
    upload.mkdir()
    shutil.copy(ROOT / "exercises" / assignment / "masking.ipynb", upload / "masking.ipynb")
    return course, upload


BROKEN_IMAGE = ("the sandbox's worker failed to start: Traceback (most recent call last):\n"
                '  File "/opt/qkv-grade/_qkv_grade/zygote.py", line 40, in main\n'
                "    import numpy\nModuleNotFoundError: No module named 'numpy'")


def _fake_pool(monkeypatch, error):
    """qkv_course.grade.Pool, which raises ``error`` unless unsafe; the unsafe ones it made."""
    import qkv_course.grade as grade
    from qkv_course.gradescope import autograder

    unsafe_pools = []

    class Pool:
        def __init__(self, jobs=1, limits=None, unsafe=False, qkv_path=None, **kw):
            if not unsafe:
                raise error
            unsafe_pools.append(self)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    monkeypatch.setattr(grade, "Pool", Pool)
    record = {"student": "ann", "assignment": MASKING, "notebook": "masking", "score": 0.0,
              "max_score": 1.0, "written": {}, "tests": [], "flags": []}
    monkeypatch.setattr(autograder.run, "warm", lambda pool, n: None)
    monkeypatch.setattr(autograder.run, "limit_submissions", lambda *a: None)
    monkeypatch.setattr(autograder.one, "grade_one", lambda *a: dict(record))
    return unsafe_pools


def test_a_sandbox_that_fails_to_start_in_a_broken_image_grades_nothing_unsandboxed(
        tmp_path, monkeypatch, capsys):
    """Only a container that forbids bubblewrap's namespaces grades without the sandbox: a
    worker that fails inside it (here numpy not importable there) stops the grading, for the
    staff, with the traceback's last line, and no student code runs unsandboxed."""
    from qkv_course.grade import SandboxUnavailable
    from qkv_course.gradescope import autograder

    course, upload = _course_with(tmp_path)
    unsafe_pools = _fake_pool(monkeypatch, SandboxUnavailable(BROKEN_IMAGE))
    with pytest.raises(autograder.SandboxBroken, match="No module named 'numpy'"):
        autograder.grade_submission(course, MASKING, upload)
    assert unsafe_pools == []
    out = tmp_path / "results" / "results.json"
    assert autograder.main([str(course), MASKING, str(upload), str(out)]) == 1
    err = capsys.readouterr().err
    assert "NOT GRADED" in err and "ModuleNotFoundError: No module named 'numpy'" in err
    assert not out.exists() and unsafe_pools == []


def test_a_container_that_forbids_namespaces_grades_unsandboxed_and_says_why(
        tmp_path, monkeypatch):
    from qkv_course.grade import NoNamespaces
    from qkv_course.gradescope import autograder

    course, upload = _course_with(tmp_path)
    unsafe_pools = _fake_pool(monkeypatch, NoNamespaces(
        "/usr/bin/bwrap cannot create a sandbox here: bwrap: setting up uid map\n"
        "bwrap: No permissions to create new namespace; as root bwrap needs CAP_SYS_ADMIN"))
    results = autograder.grade_submission(course, MASKING, upload)
    assert len(unsafe_pools) == 1 and results["extra_data"]["qkv"]["sandboxed"] is False
    assert "No permissions to create new namespace" in results["output"]
    with pytest.raises(NoNamespaces):
        autograder.grade_submission(course, MASKING, upload, unsafe_fallback=False)


def test_bwrap_that_cannot_make_namespaces_is_told_apart_from_other_failures(tmp_path):
    """probe's NoNamespaces is what a container's refusal raises; a missing bwrap is not it."""
    from qkv_course.grade import NoNamespaces, SandboxUnavailable
    from qkv_course.grade.sandbox import probe

    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    with pytest.raises(NoNamespaces, match="No permissions to create new namespace"):
        probe(str(fake))
    with pytest.raises(SandboxUnavailable) as missing:
        probe(str(tmp_path / "no-bwrap"))
    assert not isinstance(missing.value, NoNamespaces)


@pytest.mark.slow
def test_the_pages_local_try_of_the_zip_names_its_student(graded, tmp_path):
    """book/instructors.md's commands to try a zip outside Gradescope, as written: they write a
    submission_metadata.json, so the results name a student (not 'anonymous', which qkv report
    merges into one)."""
    import re

    _, made = graded
    page = (ROOT / "book" / "instructors.md").read_text().split("## Grading on Gradescope", 1)[1]
    block = next(b for b in re.findall(r"^```bash\n(.*?)^```", page, flags=re.M | re.S)
                 if "run_autograder" in b)
    (tmp_path / "gradescope").mkdir()
    shutil.copytree(made[SCALING], tmp_path / "gradescope" / SCALING)
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(["bash", "-euc", block], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    meta = json.loads((tmp_path / "ag" / "submission_metadata.json").read_text())
    results = json.loads((tmp_path / "ag" / "results" / "results.json").read_text())
    student = results["extra_data"]["qkv"]["student"]
    assert student == meta["users"][0]["sid"] and student != "anonymous"
