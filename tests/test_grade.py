"""``qkv grade``'s trusted parent, end to end through the command, on a small class of 04-scaling.

The sandbox here is an in-process stand-in (``tests/grade_fake_pool.py``): these tests are about
what the parent decides and records (plans from the instructor's source, hostile submission
files, result files, gradebook, autograded notebooks, feedback, export, reruns, interruption,
shards). The real sandbox and the attacks on it are in ``tests/test_grade_attacks.py``.
"""

from __future__ import annotations

import copy
import csv
import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import grade_class as gc
import scaling_submissions as class_
from qkv_course.cli import main as qkv
from qkv_course.grade import plan as plan_mod
from qkv_course.grade import jobs, one, records, run
from qkv_course.nbgrader.graded import questions

pytestmark = pytest.mark.slow  # nbgrader makes each course's gradebook

KINDS = {"alice": "model", "carol": "unscaled", "frank": "blank", "erin": "edited_test"}


@pytest.fixture(scope="module")
def fake_sandbox():
    old = run.SANDBOX
    run.SANDBOX = "grade_fake_pool"
    yield
    run.SANDBOX = old


@pytest.fixture(scope="module")
def empty_course(tmp_path_factory) -> Path:
    """A course with the gradebook made and no submissions (copied by the tests that grade)."""
    return gc.make_course(tmp_path_factory.mktemp("grade") / "course")


def _copy(course: Path, dest: Path) -> Path:
    shutil.copytree(course, dest)
    return dest


@pytest.fixture(scope="module")
def graded(empty_course, tmp_path_factory, fake_sandbox):
    course = _copy(empty_course, tmp_path_factory.mktemp("graded") / "course")
    for student, kind in KINDS.items():
        gc.submit(course, student, class_.submission(kind))
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--jobs", "2"]) == 0
    return course


def test_grades_are_what_nbgrader_gives(graded):
    got = gc.scores(graded)
    for student, kind in KINDS.items():
        points, waits = class_.expected(kind)
        assert got[student]["score"] == points, (student, got[student])
        assert got[student]["grades"][class_.WRITTEN] == ((None, True) if waits else (0, False))
    tests = got["carol"]["grades"]
    assert tests["test_attention_scores"] == (0, False)
    assert tests["test_scaled_dot_product_attention"] == (2, False)  # points follow the mistake


def test_autograded_notebook_carries_each_failing_message(graded):
    nb = nbformat.read(str(graded / "autograded" / "carol" / gc.ASSIGNMENT / gc.NOTEBOOK), 4)
    outputs = {class_.grade_id(c): c.get("outputs", []) for c in nb.cells if c.cell_type == "code"}
    *data, error = outputs["test_attention_scores"]
    assert error.output_type == "error" and error.ename == "AssertionError"
    assert "no scaling" in error.evalue
    # The check's result as data too, where qkv progress and qkv report read it.
    found = {q.grade_id: q.outcome for q in questions(nb)}
    assert found["test_attention_scores"].mistake == "no scaling"
    # The attention test calls the scores but is graded with the reference's (points follow
    # the mistake): it passes, silently.
    assert found["test_scaled_dot_product_attention"].status == "pass"
    assert outputs["test_scaled_dot_product_attention"] == []
    hidden = next(c.source for c in nb.cells
                  if class_.grade_id(c) == "test_scaled_dot_product_attention")
    assert "seed=None" in hidden  # the instructor's test cell, hidden tests included
    assert "I changed this test" not in json.dumps(
        nbformat.read(str(graded / "autograded" / "erin" / gc.ASSIGNMENT / gc.NOTEBOOK), 4))


def test_result_file_is_the_record(graded):
    record = records.read(records.path_of(graded, "carol", gc.ASSIGNMENT, "scaling"))
    assert record["score"] == class_.expected("unscaled")[0]
    failed = [t for t in record["tests"] if t["status"] != "pass"]
    assert [t["grade_id"] for t in failed] == list(class_.UNSCALED_FAILS)
    assert failed[0]["mistake"] == "no scaling"
    seeds = [c["seed"] for t in record["tests"] for c in t["calls"] if "seed=None" in c["call"]]
    assert seeds and all(isinstance(s, int) and s != 0 for s in seeds)


def test_feedback_and_export_work_after_qkv_grade(graded):
    env_path = f"{Path(sys.executable).parent}:{__import__('os').environ['PATH']}"
    env = {**__import__("os").environ, "PATH": env_path}
    for command in (["nbgrader", "generate_feedback", gc.ASSIGNMENT, "--force"],
                    ["nbgrader", "export"]):
        proc = subprocess.run(command, cwd=graded, env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
    page = (graded / "feedback" / "carol" / gc.ASSIGNMENT / "scaling.html").read_text()
    assert "no scaling" in page and "Not graded yet" in page
    with open(graded / "grades.csv", newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    assert float(rows["alice"]["score"]) == class_.expected("model")[0]
    assert rows["alice"]["needs_manual_grading"] == "True"
    assert float(rows["frank"]["score"]) == 0.0


def test_formgrader_shows_each_submission_for_grading_by_hand(graded, tmp_path):
    """The page an instructor reads a written answer on: formgrader renders the autograded
    notebook with nbconvert's HTMLExporter and a template of its own, which the course's
    feedback settings once replaced (every such page: HTTP 500, TemplateNotFound)."""
    import os
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "server", "--no-browser", f"--port={port}",
         "--ServerApp.token=t", f"--ServerApp.root_dir={graded}", "--allow-root"],
        cwd=graded, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def get(path: str) -> str:
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                         headers={"Authorization": "token t"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.read().decode()

    try:
        for _ in range(120):  # the server's start: seconds (nbgrader's extensions load)
            try:
                listed = json.loads(get(f"/formgrader/api/submitted_notebooks/{gc.ASSIGNMENT}/"
                                        "scaling"))
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("jupyter server did not answer")
        alice = next(n for n in listed if n["student"] == "alice")
        page = get(f"/formgrader/submissions/{alice['id']}/")
        assert "Attention Scores" in page or "attention_scores" in page
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_rerun_grades_nothing_and_changes_nothing(graded, capsys):
    before = gc.scores(graded)
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(graded)]) == 0
    out = capsys.readouterr().out
    assert "0 graded, 4 already graded" in out
    assert gc.scores(graded) == before


def test_a_changed_submission_is_graded_again_and_force_grades_all(empty_course, tmp_path,
                                                                   fake_sandbox, capsys):
    course = _copy(empty_course, tmp_path / "course")
    gc.submit(course, "alice", class_.submission("blank"))
    gc.submit(course, "bob", class_.submission("model"))
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    gc.submit(course, "alice", class_.submission("model"))  # handed in again
    capsys.readouterr()
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    assert "1 graded, 1 already graded" in capsys.readouterr().out
    assert gc.scores(course)["alice"]["score"] == class_.expected("model")[0]
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--force"]) == 0
    assert "2 graded, 0 already graded" in capsys.readouterr().out


def test_an_interrupted_run_loses_nothing_and_counts_nothing_twice(empty_course, tmp_path,
                                                                    fake_sandbox, monkeypatch,
                                                                    capsys):
    course = _copy(empty_course, tmp_path / "course")
    for student in ("ann", "ben", "cat"):
        gc.submit(course, student, class_.submission("model"))
    real = run.grade_one
    seen = []

    def interrupted(pool, job, key, limits):
        seen.append(job[0])
        if len(seen) == 2:
            raise KeyboardInterrupt  # Ctrl-C while the second submission is graded
        return real(pool, job, key, limits)

    monkeypatch.setattr(run, "grade_one", interrupted)
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--jobs", "1"]) == 130
    done = sorted(p.parent.parent.name for p in (course / records.FOLDER).glob("*/*/*.json"))
    assert done == ["ann"]  # complete result files only, no partial one
    assert not list((course / records.FOLDER).rglob(".*partial*"))
    monkeypatch.setattr(run, "grade_one", real)
    capsys.readouterr()
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--jobs", "1"]) == 0
    assert "2 graded, 1 already graded" in capsys.readouterr().out
    got = gc.scores(course)
    assert {s: v["score"] for s, v in got.items()} == {
        s: class_.expected("model")[0] for s in ("ann", "ben", "cat")}


def test_shards_then_merge_equal_one_run(graded, empty_course, tmp_path, fake_sandbox):
    course = _copy(empty_course, tmp_path / "course")
    for student, kind in KINDS.items():
        gc.submit(course, student, class_.submission(kind))
    shards = []
    for k in (1, 2, 3):
        assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--shard", f"{k}/3"]) == 0
        shards.append(sorted(p.parent.parent.name
                             for p in (course / records.FOLDER).glob("*/*/*.json")))
    assert shards[-1] == sorted(KINDS)  # each added its own (its students by the id's hash)
    assert [len(s) for s in shards] == list(itertools.accumulate(
        len(jobs.in_shard(list(KINDS), (k, 3))) for k in (1, 2, 3)))
    assert not (course / "autograded").exists()  # shards never write the gradebook
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--merge"]) == 0
    assert gc.scores(course) == gc.scores(graded) or all(
        gc.scores(course)[s]["score"] == gc.scores(graded)[s]["score"] for s in KINDS)


def test_a_merge_says_which_submissions_have_no_current_result(empty_course, tmp_path,
                                                                fake_sandbox, capsys):
    """A shard that died leaves students without a result file; a submission changed after its
    shard graded it has a stale one: a merge names both, writes neither, and exits 1."""
    course = _copy(empty_course, tmp_path / "course")
    for student in ("ann", "ben", "cat"):
        gc.submit(course, student, class_.submission("model"))
    for k in (1, 2, 3):
        assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--shard", f"{k}/3"]) == 0
    shutil.rmtree(course / records.FOLDER / "ben")  # ben's shard did not finish
    gc.submit(course, "cat", class_.submission("blank"))  # cat handed in again since
    capsys.readouterr()
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--merge"]) == 1
    out = capsys.readouterr().out
    assert "ben 04-scaling/scaling: NOT MERGED" in out and "cat 04-scaling/scaling: NOT MERGED" in out
    assert "2 LEFT OUT" in out
    # What the merge did, not "0 graded ... (--force grades them again)" (instr8: an invitation
    # to grade the whole class again).
    assert f"qkv grade {gc.ASSIGNMENT} --merge: 1 submission(s) with a current result file, " \
           "2 NOT MERGED (below); nothing graded here;" in out
    assert "--force" not in out and "0 graded" not in out
    # What it suggests runs as printed, from wherever the merge was run.
    assert f"run `qkv grade {gc.ASSIGNMENT} --student ben --course {course}`" in out
    assert sorted(gc.scores(course)) == ["ann"]


def test_a_question_is_graded_on_the_first_answer_the_record_holds(empty_course, tmp_path,
                                                                     fake_sandbox, capsys):
    """The notebook says the first answer is graded and recorded in qkv_answers.json, handed in
    beside it: qkv grade judges that answer, as nbgrader's kernel does; a changed record is a
    changed submission."""
    course = _copy(empty_course, tmp_path / "course")
    for student in ("ann", "ben"):
        gc.submit(course, student, class_.submission("model"))
    record = course / "submitted" / "ben" / gc.ASSIGNMENT / "qkv_answers.json"
    record.write_text(json.dumps({"scaling_q1": 8, "scaling_q2": "b"}))  # 8 first, then 64
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    grades = {s: v["grades"] for s, v in gc.scores(course).items()}
    assert grades["ann"]["test_scaling_q1"][0] == grades["ben"]["test_scaling_q2"][0] == 0.5
    assert grades["ben"]["test_scaling_q1"][0] == 0
    record.write_text(json.dumps({"scaling_q1": 64}))
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    assert gc.scores(course)["ben"]["grades"]["test_scaling_q1"][0] == 0.5
    # instr11: a re-collect (zip_collect --force) deleted it: the run says so, loudly.
    assert "LOST" not in capsys.readouterr().out
    record.unlink()
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    out = capsys.readouterr().out
    assert "1 submission(s) LOST their qkv_answers.json since the last grading" in out
    assert f"ben {gc.ASSIGNMENT}/scaling" in out.split("LOST")[1]
    said = records.read(records.path_of(course, "ben", gc.ASSIGNMENT, "scaling"))["flags"]
    assert any(f["detail"].startswith(records.ANSWERS_GONE) for f in said), said
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--force"]) == 0
    assert "1 submission(s) LOST" in capsys.readouterr().out  # said again while it is gone


def test_a_broken_record_is_flagged_and_its_questions_judged_on_the_notebook(
        empty_course, tmp_path, fake_sandbox, capsys):
    """A qkv_answers.json broken by hand (or by a copy) is no record: each question is judged
    on the notebook's answer, as before, and the submission is flagged, saying why."""
    course = _copy(empty_course, tmp_path / "course")
    gc.submit(course, "ben", class_.submission("model"))
    record = course / "submitted" / "ben" / gc.ASSIGNMENT / "qkv_answers.json"
    record.write_text('{"scaling_q1": 8,, }')
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    assert "FLAGGED for review (1: qkv_answers.json" in capsys.readouterr().out
    assert gc.scores(course)["ben"]["grades"]["test_scaling_q1"][0] == 0.5
    (flag,) = json.loads(next((course / "qkv-grades" / "ben").rglob("*.json")).read_text())["flags"]
    assert flag["source"] == "record" and "is not a record (Expecting" in flag["detail"]
    record.write_text(json.dumps({"scaling_q1": ["a"], "scaling_q2": "b"}))
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    assert "entries that are not answers were ignored (scaling_q1)" in capsys.readouterr().out
    # "64" where a number belongs is passed over for the notebook's answer, as the kernel does,
    # and flagged: the student's notebook says so too.
    record.write_text(json.dumps({"scaling_q1": "sixty-four"}))
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    assert "holds 'sixty-four' for scaling_q1, which is not an answer" in capsys.readouterr().out
    assert gc.scores(course)["ben"]["grades"]["test_scaling_q1"][0] == 0.5
    # A wrong first answer in the record says that the record is what was graded.
    record.write_text(json.dumps({"scaling_q2": "c"}))
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    result = json.loads(next((course / "qkv-grades" / "ben").rglob("*.json")).read_text())
    (q2,) = [t for t in result["tests"] if t["grade_id"] == "test_scaling_q2"]
    said = json.dumps(q2)
    assert "graded on your first answer, 'c', as qkv_answers.json recorded it" in said, said
    assert "scaling_q2: scaling_q2" not in said


def test_a_notebook_under_another_name_is_said_not_skipped(empty_course, tmp_path, fake_sandbox,
                                                          capsys):
    course = _copy(empty_course, tmp_path / "course")
    gc.submit(course, "ann", class_.submission("model"))
    gc.submit(course, "kim", class_.submission("model"), notebook="scaling (1).ipynb")
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 1
    out = capsys.readouterr().out
    assert "kim 04-scaling/scaling (1).ipynb: NOT GRADED, not a notebook of the assignment" in out
    assert "rename it and run the command again" in out
    # Beside a notebook of the right name, renaming would replace what was graded: not said.
    gc.submit(course, "ann", class_.submission("blank"), notebook="scaling-Copy1.ipynb")
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--student", "ann"]) == 1
    out = capsys.readouterr().out
    assert "ann 04-scaling/scaling-Copy1.ipynb: NOT GRADED" in out
    assert "scaling.ipynb beside it was graded" in out and "rename" not in out


def test_a_submission_folder_without_a_notebook_is_said_not_skipped(empty_course, tmp_path,
                                                                   fake_sandbox, capsys):
    course = _copy(empty_course, tmp_path / "course")
    gc.submit(course, "ann", class_.submission("model"))
    (course / "submitted" / "lee" / gc.ASSIGNMENT).mkdir(parents=True)
    (course / "submitted" / "lee" / gc.ASSIGNMENT / "timestamp.txt").write_text("2026-11-26")
    (course / "submitted" / "max" / gc.ASSIGNMENT / "scaling.ipynb").mkdir(parents=True)
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 1
    out = capsys.readouterr().out
    for student in ("lee", "max"):
        assert f"{student} {gc.ASSIGNMENT}: NOT GRADED, no notebook in" in out, out
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--student", "lee"]) == 1


def test_a_gradebook_without_the_assignment_is_said_before_any_grading(empty_course, tmp_path,
                                                                      fake_sandbox, capsys):
    import grade_fake_pool

    course = _copy(empty_course, tmp_path / "course")
    gc.submit(course, "ann", class_.submission("model"))
    (course / "gradebook.db").unlink()
    grade_fake_pool.Pool.seen.clear()
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 2
    assert "generate_assignment 04-scaling --force" in capsys.readouterr().err
    assert grade_fake_pool.Pool.seen == [] and not (course / "gradebook.db").exists()


def test_a_rerun_leaves_a_score_given_by_hand_alone(graded, tmp_path, fake_sandbox, capsys):
    """A score given by hand goes back for review only when the text it was given to changed:
    grading again for a fixed check (--force) kept every hand grade of the class flagged."""
    from nbgrader.api import Gradebook

    course = _copy(graded, tmp_path / "course")
    by_hand = (class_.WRITTEN, "task_bugs_found")  # a written answer, and a task's text
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for gid in by_hand:
            grade = gb.find_grade(gid, "scaling", gc.ASSIGNMENT, "alice")
            grade.manual_score, grade.needs_manual_grade = 2.0, False
        gb.db.commit()
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    assert [gc.scores(course)["alice"]["grades"][g] for g in by_hand] == [(None, False)] * 2
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--force",
                "--student", "alice"]) == 0
    assert [gc.scores(course)["alice"]["grades"][g] for g in by_hand] == [(None, False)] * 2
    # alice rewrites her written answer: that one goes back to a person, the task does not.
    path = course / "submitted" / "alice" / gc.ASSIGNMENT / gc.NOTEBOOK
    nb = json.loads(path.read_text())
    written = _cell(nb, class_.WRITTEN)
    written["source"] = "A new answer, written after the first was graded."
    path.write_text(json.dumps(nb))
    assert "REOPENED" not in capsys.readouterr().out  # the reruns above reopened nothing
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    assert [gc.scores(course)["alice"]["grades"][g] for g in by_hand] == [(None, True),
                                                                          (None, False)]
    # The run names the hand grade it sent back to a person.
    assert (f"1 hand grade(s) REOPENED for review (the answer changed since it was scored; "
            f"the old score is kept until you save one in formgrader): alice "
            f"{gc.ASSIGNMENT}/scaling: {class_.WRITTEN}") in capsys.readouterr().out
    # A regrade before anyone has looked keeps it flagged: the score is still for the old text.
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--force",
                "--student", "alice"]) == 0
    assert [gc.scores(course)["alice"]["grades"][g] for g in by_hand] == [(None, True),
                                                                          (None, False)]


def test_a_late_submission_gets_the_penalty_the_course_configures(graded, tmp_path,
                                                                  fake_sandbox):
    """nbgrader autograde sets a late notebook's penalty from the due date, the submission's
    timestamp.txt and the course's LateSubmissionPlugin; qkv grade, in its place, left it 0."""
    import datetime

    from nbgrader.api import Gradebook

    course = _copy(graded, tmp_path / "course")
    with (course / "nbgrader_config.py").open("a") as f:
        f.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    due = datetime.datetime(2026, 3, 1, 12, 0)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_assignment(gc.ASSIGNMENT, duedate=due)
    for student, stamp in (("alice", "2026-03-02 12:00:00 UTC"), ("carol", "2026-03-01 11:00:00 UTC")):
        (course / "submitted" / student / gc.ASSIGNMENT / "timestamp.txt").write_text(stamp)
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--force"]) == 0
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        late = gb.find_submission_notebook("scaling", gc.ASSIGNMENT, "alice")
        assert late.score > 0 and late.late_submission_penalty == late.score
        on_time = gb.find_submission_notebook("scaling", gc.ASSIGNMENT, "carol")
        assert on_time.late_submission_penalty is None


def test_a_corrected_timestamp_reaches_the_gradebook_without_grading_again(graded, tmp_path,
                                                                           fake_sandbox, capsys):
    """attack13: a time corrected after grading (timestamps.csv, then `zip_collect --force`)
    never reached the gradebook: its write was skipped as done, and the export kept the
    penalty of the wrong time. The next `qkv grade` writes it, and grades nothing again."""
    import datetime

    import grade_fake_pool
    from nbgrader.api import Gradebook

    course = _copy(graded, tmp_path / "course")
    with (course / "nbgrader_config.py").open("a") as f:
        f.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_assignment(gc.ASSIGNMENT, duedate=datetime.datetime(2026, 3, 1, 12))
    stamp = course / "submitted" / "alice" / gc.ASSIGNMENT / "timestamp.txt"
    stamp.write_text("2026-03-02 12:00:00 UTC")
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--force"]) == 0

    def penalty():
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            nb = gb.find_submission_notebook("scaling", gc.ASSIGNMENT, "alice")
            return nb.late_submission_penalty, nb.score

    assert penalty()[0] == penalty()[1] > 0
    stamp.write_text("2026-03-01 11:00:00 UTC")  # the corrected time: on time
    grade_fake_pool.Pool.seen.clear()
    capsys.readouterr()
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    assert grade_fake_pool.Pool.seen == []  # nothing graded again
    assert penalty()[0] is None
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    assert "0 submission(s) written" in capsys.readouterr().out  # once is enough


def test_compare_says_each_test_nbgrader_scored_otherwise_and_leaves_its_gradebook(
        graded, tmp_path, fake_sandbox, capsys):
    from nbgrader.api import Gradebook

    course = _copy(graded, tmp_path / "course")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:  # as if nbgrader gave it
        gb.find_grade("test_attention_scores", Path(gc.NOTEBOOK).stem, gc.ASSIGNMENT, "carol").auto_score = 1
        gb.db.commit()
    before = gc.scores(course)
    capsys.readouterr()
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--compare", "--force"]) == 0
    out = capsys.readouterr().out
    differs = [line for line in out.splitlines() if line.startswith("DIFFERS")]
    assert len(differs) == 1, out
    assert "carol" in differs[0] and "test_attention_scores: qkv grade 0/" in differs[0]
    assert "nbgrader 1" in differs[0] and "1 disagreement(s)" in out
    assert gc.scores(course) == before  # the gradebook is nbgrader's still


def test_compare_without_a_gradebook_or_with_merge_is_one_clear_line(tmp_path, capsys):
    (tmp_path / "source" / gc.ASSIGNMENT).mkdir(parents=True)
    shutil.copy(gc.ROOT / "solutions" / gc.ASSIGNMENT / gc.NOTEBOOK,
                tmp_path / "source" / gc.ASSIGNMENT)
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(tmp_path), "--compare"]) == 2
    assert "no gradebook.db to compare with" in capsys.readouterr().err
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(tmp_path), "--compare", "--merge"]) == 2
    assert "without --merge" in capsys.readouterr().err


def test_shards_split_by_a_stable_hash_of_the_id():
    """instr13: a split by position in the sorted list shifted every student after a folder
    collected between two shards' starts (shard 2 graded shard 1's students, and some none)."""
    ids = [f"s{i:03d}" for i in range(200)]
    parts = [jobs.in_shard(ids, (k, 3)) for k in (1, 2, 3)]
    assert sorted(sum(parts, [])) == ids and all(p == sorted(p) for p in parts)
    assert all(40 < len(p) < 90 for p in parts), [len(p) for p in parts]
    # A newcomer (sorted first) moves no one else.
    later = [jobs.in_shard(["aaa"] + ids, (k, 3)) for k in (1, 2, 3)]
    assert [[s for s in p if s != "aaa"] for p in later] == parts
    # The same on every machine and run (not Python's salted hash()).
    assert jobs.shard_of("frank", 8) == 1 + int(
        __import__("hashlib").sha256(b"frank").hexdigest()[:16], 16) % 8


@pytest.mark.parametrize("argv, words", [
    (["grade", "04-scalng"], "did you mean 04-scaling"),
    (["grade", "04-scaling", "--shard", "3/2"], "K must be from 1 to N"),
    (["grade", "04-scaling", "--shard", "two"], "write it K/N"),
    (["grade", "04-scaling", "--jobs", "0"], "--jobs must be at least 1"),
    (["grade", "04-scaling", "--student", "nobody"], "no submission of 04-scaling from nobody"),
])
def test_bad_input_is_one_clear_line(graded, argv, words, capsys):
    assert qkv(argv + ["--course", str(graded)]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_no_submissions_is_said(empty_course, capsys):
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(empty_course)]) == 2
    assert "no submissions of 04-scaling" in capsys.readouterr().err


def test_keyword_arguments_and_hidden_tests_come_from_the_source():
    p = plan_mod.plan(class_.SOLUTION)
    [sdpa] = [t for t in p.tests if t.grade_id == "test_scaled_dot_product_attention"]
    assert [(c.check, c.seed, c.options) for c in sdpa.calls] == [
        ("check_scaled_dot_product_attention", plan_mod.DEFAULT, {"masks": False}),
        ("check_scaled_dot_product_attention", None, {"masks": False})]


def _hostile(kind: str = "model") -> dict:
    return json.loads(nbformat.writes(class_.submission(kind)))


# The answer cell the broken file loses: no other test calls it.
LOST = "attention_with_temperature"


def _cell(nb: dict, name: str) -> dict:
    """The cell of a notebook (as JSON) with this nbgrader grade id, else this cell id."""
    return next(c for c in nb["cells"]
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id", c.get("id")) == name)


def test_hostile_files_cost_only_their_own_grade(empty_course, tmp_path, fake_sandbox, capsys):
    course = _copy(empty_course, tmp_path / "course")
    newer = _hostile()
    newer["nbformat"], newer["nbformat_minor"] = 5, 99
    for cell in newer["cells"]:
        cell.setdefault("metadata", {}).setdefault("nbgrader", {})["schema_version"] = 4
    pasted = _hostile()
    pasted["cells"].append(copy.deepcopy(_cell(pasted, "test_attention_with_temperature")))
    # (an honest student pasted a test twice)
    huge = _hostile()
    _cell(huge, "setup")["outputs"] = [{"output_type": "stream", "name": "stdout",
                                        "text": "x" * (20 << 20)}]
    broken = _hostile()
    del _cell(broken, "attention_scores")["metadata"]  # still known by its cell id
    lost = broken["cells"].index(_cell(broken, LOST))
    broken["cells"][lost] = "not a cell"  # lost: its test fails, and only its test
    files = {"newer": newer, "pasted": pasted, "huge": huge, "broken": broken,
             "honest": _hostile(), "garbage": b"{\"cells\": [", "list": [1, 2]}
    for student, data in files.items():
        gc.submit(course, student, json.dumps(data).encode() if not isinstance(data, bytes)
                  else data)
    # Two notebooks could not be read: not graded, said, and the run's exit status says so.
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 1
    out = capsys.readouterr().out
    got = {s: v["score"] for s, v in gc.scores(course).items()}
    full = class_.expected("model")[0]
    lost = class_.points()[f"test_{LOST}"]
    assert lost > 0
    assert got == {"newer": full, "pasted": full, "huge": full, "broken": full - lost,
                   "honest": full, "garbage": 0, "list": 0}
    assert "garbage 04-scaling/scaling: NOT GRADED, the notebook could not be read" in out
    assert "2 submission(s) NOT GRADED because the notebook could not be read" in out


def test_a_byte_not_utf8_is_read_graded_and_flagged(empty_course, tmp_path, fake_sandbox,
                                                     capsys):
    course = _copy(empty_course, tmp_path / "course")
    text = nbformat.writes(class_.submission("model")).replace(
        "def attention_scores(", "# caf\u00e9\\ndef attention_scores(", 1)
    assert "caf\u00e9" in text
    latin1 = text.encode().replace("caf\u00e9".encode(), b"caf\xe9")  # one Latin-1 byte
    gc.submit(course, "judy", latin1)
    gc.submit(course, "odd", b"{\"cells\": [")
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 1  # odd is not graded
    out = capsys.readouterr().out
    full = class_.expected("model")[0]
    got = gc.scores(course)
    assert got["judy"]["score"] == full  # read, with U+FFFD in a comment, and graded
    line = next(x for x in out.splitlines() if x.startswith("judy "))
    assert f"judy 04-scaling/scaling: {full:g}/" in line
    assert "FLAGGED for review (1: the notebook is not all UTF-8: byte 0xe9" in line
    record = json.loads(records.path_of(course, "judy", gc.ASSIGNMENT, "scaling").read_text())
    flag = record["flags"][0]
    assert flag["source"] == "file" and "unreadable" not in record
    assert '"# caf\'' in flag["detail"] and "saved as UTF-8" in flag["detail"], flag
    # A notebook that truly cannot be read: not graded, flagged, said with how to fix it, and
    # its written answer waits for a person (it was never read, so not "left as released").
    assert "odd 04-scaling/scaling: NOT GRADED, the notebook could not be read: not a notebook" \
        " (JSONDecodeError" in out and "hand in the notebook as Jupyter saves it" in out
    assert got["odd"]["grades"][class_.WRITTEN] == (None, True)
    assert "1 flagged for review" not in out and "2 flagged for review" in out


def test_a_grader_failure_records_nothing_and_says_so(empty_course, tmp_path, fake_sandbox,
                                                      monkeypatch, capsys):
    from qkv_course.grade import checks_api

    course = _copy(empty_course, tmp_path / "course")
    gc.submit(course, "ann", class_.submission("model"))

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in a check")

    monkeypatch.setattr(checks_api, "judge", broken)
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 1
    out = capsys.readouterr().out
    assert "ann 04-scaling/scaling: NOT GRADED, the grader failed" in out
    assert "a bug in a check" in out
    assert not records.path_of(course, "ann", gc.ASSIGNMENT, "scaling").exists()
    monkeypatch.undo()
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    assert gc.scores(course)["ann"]["score"] == class_.expected("model")[0]


def test_the_grading_threads_judge_one_at_a_time(monkeypatch):
    """References that seed torch's global random state (the ablation's training, the dropout
    block's) are judged one at a time: two grading threads judging at once moved each other's
    draws (the dropout reference once failed its own "same entries" rule under qkv grade)."""
    import threading
    import time
    import types

    from qkv_course.grade import checks_api

    inside, most = [0], [0]

    def judge(check, seed, outcomes, **options):
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.05)  # a reference that takes a while (and lets the GIL go)
        inside[0] -= 1
        return "verdict"

    fake = types.SimpleNamespace(judge=judge, calls=lambda check, seed, **o: [],
                                 prepare=lambda check: None, Raised=Exception)
    monkeypatch.setattr(checks_api, "_grading", lambda: fake)
    threads = [threading.Thread(target=checks_api.judge, args=("check_x", s, [], {}))
               for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1


def test_a_submission_not_graded_keeps_its_earlier_grade_flagged_until_it_is(
        empty_course, tmp_path, fake_sandbox, monkeypatch, capsys):
    """instr8: ann handed in again and the grader failed on it (or a merge found no result for
    it): the gradebook still holds her earlier submission's grade, and the export gave it as
    current with nothing marking it. It is kept (a score given by hand too), flagged in
    formgrader and in the export, and said; grading the new submission lifts the flag."""
    from nbgrader.api import Gradebook

    from qkv_course.grade import checks_api
    from qkv_course.nbgrader import provisional

    course = _copy(empty_course, tmp_path / "course")
    gc.submit(course, "ann", class_.submission("model"))
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    db = f"sqlite:///{course / 'gradebook.db'}"
    with Gradebook(db) as gb:  # a person grades the written answer, as formgrader saves it
        grade = gb.find_grade(class_.WRITTEN, "scaling", gc.ASSIGNMENT, "ann")
        grade.manual_score, grade.needs_manual_grade = 1.0, False
        gb.db.commit()
        before = gb.find_submission(gc.ASSIGNMENT, "ann").score

    def state():
        with Gradebook(db) as gb:
            row = provisional.rows(gb, [gc.ASSIGNMENT], ["ann"])[0]
            nb = gb.find_submission_notebook("scaling", gc.ASSIGNMENT, "ann")
            manual = gb.find_grade(class_.WRITTEN, "scaling", gc.ASSIGNMENT, "ann").manual_score
            return nb.score, nb.flagged, row["flagged"], manual

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in a check")

    gc.submit(course, "ann", class_.submission("blank"))
    monkeypatch.setattr(checks_api, "judge", broken)
    capsys.readouterr()
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 1
    out = capsys.readouterr().out
    assert "1 submission(s) in gradebook.db still hold the grade of an EARLIER submission " \
           f"(ann {gc.ASSIGNMENT}/scaling)" in out
    assert state() == (before, True, True, 1.0)
    monkeypatch.undo()
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    score, flagged, exported, manual = state()
    assert score == 1.0 and not flagged and not exported and manual == 1.0  # blank, + by hand
    # A merge that finds no result for the submission as it is now: the same.
    gc.submit(course, "ann", class_.submission("model"))
    capsys.readouterr()
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--merge"]) == 1
    out = capsys.readouterr().out
    assert "NOT MERGED" in out and "the grade of an EARLIER submission" in out
    assert state() == (1.0, True, True, 1.0)
    # A flag a person set before the grade was marked outdated is theirs: grading the current
    # submission lifts the mark's flag, not that one.
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    assert not state()[1]
    with Gradebook(db) as gb:
        gb.find_submission_notebook("scaling", gc.ASSIGNMENT, "ann").flagged = True
        gb.db.commit()
    gc.submit(course, "ann", class_.submission("blank"))
    monkeypatch.setattr(checks_api, "judge", broken)
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 1
    monkeypatch.undo()
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    assert state()[1] and state()[2]


def test_a_resubmission_under_another_name_flags_the_earlier_grade(empty_course, tmp_path,
                                                                  fake_sandbox):
    """A student graded before hands in again as ``scaling (1).ipynb``: nothing is graded for
    them, and the gradebook's grade, of the earlier notebook, is flagged as outdated (it was
    kept unflagged, as if current: found by an attack walk)."""
    import shutil

    import nbformat
    from nbgrader.api import Gradebook

    course = _copy(empty_course, tmp_path / "course")
    gc.submit(course, "ann", class_.submission("model"))
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    folder = course / "submitted" / "ann" / gc.ASSIGNMENT
    shutil.rmtree(folder)
    folder.mkdir(parents=True)
    nbformat.write(class_.submission("blank"), str(folder / "scaling (1).ipynb"))
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 1
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_submission_notebook("scaling", gc.ASSIGNMENT, "ann").flagged
    # The earlier notebook handed back: its result is current again, and so is the grade.
    shutil.rmtree(folder)
    gc.submit(course, "ann", class_.submission("model"))
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert not gb.find_submission_notebook("scaling", gc.ASSIGNMENT, "ann").flagged


def test_a_submission_s_time_grows_with_the_checks_that_train():
    """The default limit of a whole submission: 120 s, plus each call's own limit for a check
    that trains or samples; the capstone (whose ablation trains models) gets that time, a
    notebook of quick checks does not."""
    root = Path(__file__).resolve().parents[1]
    from qkv.checks import grading

    for assignment in ("10-heads", "11-capstone"):
        plans = run.plans_of(root, assignment)
        slow = [grading.CHECKS[c.check].seconds for p in plans.values() for t in p.tests
                for c in t.calls if c.check in grading.CHECKS
                and grading.CHECKS[c.check].seconds > grading.SECONDS]
        assert run.submission_budget(plans) == run.BASE_SUBMISSION_S + sum(slow)
    assert run.submission_budget(run.plans_of(root, "11-capstone")) >= 240


def test_each_submission_gets_the_submission_s_time_limit(empty_course, tmp_path, fake_sandbox):
    """The limit is known only once the checks are imported, which happens while the sandboxes
    start (not before: the import would hold them back); every submission still gets it, the
    default budget or --submission-timeout."""
    import grade_fake_pool

    course = _copy(empty_course, tmp_path / "course")
    for student in ("ann", "bob"):
        gc.submit(course, student, class_.submission("model"))
    # The default: the budget and one cell's limit (--timeout) more, for one endless loop.
    budget = run.submission_budget(run.plans_of(course, gc.ASSIGNMENT)) + 60
    for extra, wall_s, cell_s in (([], budget, 60),
                                  (["--submission-timeout", "77", "--timeout", "9", "--force"],
                                   77.0, 9)):
        grade_fake_pool.Pool.seen.clear()
        assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), *extra]) == 0
        assert [lim.wall_s for lim in grade_fake_pool.Pool.seen] == [wall_s, wall_s]
        assert [lim.cell_s for lim in grade_fake_pool.Pool.seen] == [cell_s, cell_s]
        # As many CPU seconds as wall-clock ones: the wall-clock limit decides.
        assert all(lim.cpu_s >= wall_s for lim in grade_fake_pool.Pool.seen)


def test_a_per_student_question_is_judged_with_the_student_s_own_parameters():
    """``check_question("multi_head_q1", multi_head_q1, embed_dim=embed_dim)``: the plan keeps
    the parameter's variable, and the grader judges the answer with the value the student's
    notebook gave it (a classmate's number for another embed_dim is wrong)."""
    import qkv
    from qkv_course.grade import judge

    root = Path(__file__).resolve().parents[1]
    p = plan_mod.plan(root / "solutions" / "05-multi-head" / "multi_head.ipynb")
    [call] = [c for t in p.tests if t.grade_id == "test_multi_head_q1" for c in t.calls]
    assert call.options == {"embed_dim": "embed_dim"}
    assert call.describe() == 'check_question("multi_head_q1", multi_head_q1, embed_dim=embed_dim)'

    class Sub:  # the sandbox's answers to the grader, as data
        def __init__(self, values):
            self.values = values

        def value(self, name, timeout):
            return self.values.get(name, judge.Missing)

    right = sum(x.numel() for x in qkv.MultiHeadAttention(192, 8).parameters())
    limits = judge.Timeouts()
    result, failed = judge.run_call(Sub({"multi_head_q1": right, "embed_dim": 192}), call, None,
                                    limits)
    assert failed is None and result.passed
    result, _ = judge.run_call(Sub({"multi_head_q1": right, "embed_dim": 64}), call, None, limits)
    assert not result.passed
    result, _ = judge.run_call(Sub({"multi_head_q1": right}), call, None, limits)
    assert isinstance(result, judge.NotAnswered) and "embed_dim is not set" in result.what


def test_the_code_an_answer_cell_is_given_is_not_flagged_but_a_student_s_own_use_is():
    """Assignment 11 hands the student ``qkv.ablation_loss`` in the ``ablation`` answer cell:
    every honest submission calls it, so it is not delegation; a call of the course's code
    the release did not give still is."""

    root = Path(__file__).resolve().parents[1]
    p = plan_mod.plan(root / "solutions" / "11-capstone" / "capstone.ipynb")
    given = one._given(p)
    assert "qkv.ablation_loss" in given["ablation"]
    assert gc.static_flags("check_ablation", given["ablation"], [], given["ablation"]) == []
    # Without: flagged, where the exercise does not hand it (softmax's check, say).
    assert gc.static_flags("check_softmax", given["ablation"].replace("def ablation",
                                                                      "def softmax"), [], "")
    own = given["ablation"].replace("# YOUR CODE HERE", "block = qkv.Block")
    assert gc.static_flags("check_ablation", own, [], given["ablation"]) == [
        "uses the course's reference (qkv.Block)"]


def test_what_the_release_runs_for_the_student_is_given_and_no_flag():
    """Assignment 11 says "the baseline's settings are ``qkv.ablation_baseline()``" and prints
    it in a cell of its own: an ablation that starts from it uses what it was handed (it was
    flagged "uses the course's reference"); the course's code the release never runs still is."""
    from qkv_course.grade import submission

    root = Path(__file__).resolve().parents[1]
    p = plan_mod.plan(root / "solutions" / "11-capstone" / "capstone.ipynb")
    tests = [{"grade_id": "test_ablation", "notices": []}]
    answer = ("def ablation(seed, steps=200):\n    options = qkv.ablation_baseline()\n"
              "    options['window'] = 16\n"
              "    return options, qkv.ablation_loss(options, seed, steps, progress=False)\n")
    sub = submission.Submission(answers={"ablation": answer})
    assert one._flags(p, sub, tests, {}, "") == []
    sub = submission.Submission(answers={"ablation": answer.replace(
        "    options['window'] = 16\n", "    options['window'] = 16\n    block = qkv.Block\n")})
    assert [f["detail"] for f in one._flags(p, sub, tests, {}, "")] == [
        "ablation: uses the course's reference (qkv.Block)"]


def test_the_checks_own_references_are_flagged_but_a_check_called_to_try_an_answer_is_not():

    tries = "from qkv.checks import check_softmax, in_notebook\ncheck_softmax(softmax)\n"
    assert gc.static_flags("check_softmax", tries, []) == []
    delegates = ("from qkv.checks.grading import CHECKS as _C\n"
                 "def softmax(x):\n    return _C['check_softmax'].exercises()[0].reference(x)\n")
    assert "uses the course's reference (qkv.checks.grading)" in gc.static_flags(
        "check_softmax", delegates, [])


def test_a_cell_in_ipython_s_syntax_is_read_for_flags_as_the_sandbox_runs_it():
    """The sandbox runs cells through IPython: a cell magic's body (%%capture) or a line
    magic's code (%time) defines answers there, and hid them from the static reading, which
    took the cell for a syntax error that defines nothing (found by an attack walk)."""

    hidden = ("%%capture\nimport qkv.scaling as _s\n"
              "def attention_scores(q, k, scale=None):\n    return _s.attention_scores(q, k)\n")
    assert "uses the course's reference (qkv.scaling)" in gc.static_flags(
        "check_attention_scores", hidden, [])
    # An alias of the course's package or module is read through (and with a name the
    # exercise hands the student beside it, the package itself is not taken as given).
    aliased = ("import qkv as q\ndef ablation(seed, steps=200):\n"
               "    options = qkv.ablation_baseline()\n    q.Block\n"
               "    return options, qkv.ablation_loss(options, seed, steps)\n")
    assert "uses the course's reference (qkv.Block)" in gc.static_flags(
        "check_ablation", aliased, [])
    timed = "!echo hi\n%time attention_scores = qkv.attention_scores\n"
    assert "uses the course's reference (qkv.attention_scores)" in gc.static_flags(
        "check_attention_scores", "", [timed])


@pytest.mark.parametrize("first", ["%pip install numpy==1.26", "%conda install numpy",
                                   "%timeit -n1 pass", "torch.matmul?", "files = !ls",
                                   "%matplotlib inline", "%%capture"])
def test_one_line_of_ipython_syntax_hides_no_cell_from_the_flags(first: str):
    """atk11: the static reading stripped magics with a line regex, so ``%pip install x`` (and
    each line here) left a cell that did not parse, read as naming nothing, while the sandbox
    ran it through IPython: delegation with the reference bound as a default argument scored
    15/15 with no flag at all. The cell is read as IPython makes it."""
    from qkv_course.grade import worker

    answer = (f"{first}\nimport qkv\n"
              "def attention_scores(query, key, scale=None, _f=qkv.attention_scores):\n"
              "    return _f(query, key, scale).to(query.dtype)\n")
    compile(worker._transform(answer), "<cell>", "exec")  # what the sandbox runs: all of it
    assert "uses the course's reference (qkv.attention_scores)" in gc.static_flags(
        "check_attention_scores", answer, [])
    # The code a magic runs in the sandbox's get_ipython(), written out by hand, is read too.
    by_hand = ("get_ipython().run_cell_magic('capture', '', 'import qkv\\n"
               "attention_scores = qkv.attention_scores\\n')\n")
    assert "uses the course's reference (qkv.attention_scores)" in gc.static_flags(
        "check_attention_scores", by_hand, [])


HONEST_NAMES = {
    # honest13: each right, each flagged as delegation by a reading of every name in sight
    "a fused projection named qkv (nanoGPT's idiom)": ("check_multi_head_self_attention", (
        "def multi_head_self_attention(x, W_q, W_k, W_v, W_o, num_heads):\n"
        "    B, L, D = x.shape\n"
        "    qkv = x @ torch.cat([W_q, W_k, W_v]).T\n"
        "    q, k, v = qkv.view(B, L, 3, num_heads, D // num_heads).permute(2, 0, 3, 1, 4)\n"
        "    w = torch.softmax(q @ k.transpose(-2, -1) / (D // num_heads) ** 0.5, dim=-1)\n"
        "    return (w @ v).transpose(1, 2).reshape(B, L, D) @ W_o.T\n"), []),
    "a helper's parameter named qkv": ("check_multi_head_self_attention", (
        "def _split(qkv, num_heads):\n    return qkv.chunk(3, dim=-1)\n"
        "def multi_head_self_attention(x, W_q, W_k, W_v, W_o, num_heads):\n"
        "    q, k, v = _split(x @ torch.cat([W_q, W_k, W_v]).T, num_heads)\n"
        "    return q\n"), []),
    "a local variable named alibi": ("check_alibi_bias", (
        "def alibi_bias(num_heads, L, S=None, device=None, dtype=torch.float32):\n"
        "    alibi = torch.zeros(num_heads, L, L if S is None else S)\n"
        "    return alibi\n"), []),
    "a line after the answer that compares it with torch's": ("check_softmax", (
        "def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n"
        "    return e / e.sum(dim, keepdim=True)\n"
        "print(torch.allclose(softmax(torch.ones(3)), torch.softmax(torch.ones(3), -1)))\n"),
        []),
    "a cell of its own that compares an answer with SDPA": ("check_fp16_overflow_rate", (
        "def fp16_overflow_rate(x):\n    return (x.abs() > 65504).float().mean().item()\n"),
        ["import torch.nn.functional as F\n"
         "print((chunked_attention(q, k, v) - F.scaled_dot_product_attention(q, k, v)).abs()"
         ".max())\n"]),
    # honest14: each right, each flagged
    "a scratch cell's variable named as a local of the answer": ("check_softmax", (
        "def softmax(x, dim=-1):\n    out = (x - x.amax(dim, keepdim=True)).exp()\n"
        "    return out / out.sum(dim, keepdim=True)\n"),
        ["out = torch.softmax(torch.ones(3), -1)\nprint(softmax(torch.ones(3)) - out)\n"]),
    "a scratch cell's variable named as a parameter of the answer": ("check_ablation_rise", (
        "def ablation_rise(model, layer, head, seed=0):\n    return model(layer, head)\n"),
        ["model = qkv.AttentionOnlyTransformer(16, 2, 2)\n"
         "expected = [t for t in qkv.train_induction(model)]\n"]),
    "model.eval() and torch.compile": ("check_softmax", (
        "def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n"
        "    return e / e.sum(dim, keepdim=True)\n"),
        ["net = torch.nn.Linear(3, 3).eval()\nfast = torch.compile(net)\n"]),
    "a closure over a fused projection named qkv": ("check_multi_head_self_attention", (
        "def multi_head_self_attention(x, W_q, W_k, W_v, W_o, num_heads):\n"
        "    qkv = x @ torch.cat([W_q, W_k, W_v]).T\n"
        "    part = lambda i: qkv.narrow(-1, i * x.shape[-1], x.shape[-1])\n"
        "    def rest():\n        return qkv.split(x.shape[-1], dim=-1)\n"
        "    return part(0) + rest()[1]\n"), []),
}


@pytest.mark.parametrize("case", HONEST_NAMES)
def test_an_answer_is_flagged_for_what_it_calls_not_for_names_in_sight(case):
    """A flag says the answer calls what the exercise asks it to write: read from the code the
    answer's name reaches (its definition, the helpers it calls, in any cell), not from every
    name of every cell (a local ``qkv``, a scratch comparison with torch)."""
    check, answer, added = HONEST_NAMES[case]
    assert gc.static_flags(check, answer, added) == []


HIDDEN_DELEGATION = {
    # attack13: 15/15 and no flag at all
    "a helper assigned the answer's name, under DisableTorchFunction": (
        "check_scaled_dot_product_attention",
        "import torch.nn.functional as F\n"
        "def _attn(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):\n"
        "    with torch._C.DisableTorchFunction():\n"
        "        return F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)\n"
        "scaled_dot_product_attention = _attn\n", [],
        ["names F.scaled_dot_product_attention", "the code uses DisableTorchFunction, _C"]),
    "torch's function assigned the answer's name": (
        "check_softmax", "softmax = torch.softmax\n", [], ["names torch.softmax"]),
    "getattr with the name in a string": (
        "check_softmax", "def softmax(x, dim=-1):\n    return getattr(torch, 'softmax')(x, dim)\n",
        [], ["names torch.softmax"]),
    "a helper in a cell the student added": (
        "check_softmax", "def softmax(x, dim=-1):\n    return _helper(x, dim)\n",
        ["def _helper(x, d):\n    return torch.nn.functional.softmax(x, d)\n"],
        ["names torch.nn.functional.softmax"]),
    "the reference passed as a parameter's default": (
        "check_softmax", "def softmax(x, dim=-1, q=qkv):\n    return q.softmax(x, dim)\n", [],
        ["uses the course's reference (qkv)"]),
    "the reference as a default of a parameter named qkv": (
        "check_softmax", "def softmax(x, dim=-1, qkv=qkv):\n    return qkv.softmax(x, dim)\n",
        [], ["uses the course's reference (qkv)"]),
    "a local qkv elsewhere does not hide the package here": (
        "check_softmax", "def g():\n    qkv = 1\ndef softmax(x, dim=-1):\n"
        "    return qkv.softmax(x, dim)\n", [], ["uses the course's reference (qkv.softmax)"]),
    "a name built with exec": (
        "check_softmax", "exec('softmax = torch.' + 'soft' + 'max')\n", [],
        ["the code uses exec()"]),
    # what the reading of honest14's forms must still see
    "exec under another name": (
        "check_softmax", "run = exec\nrun('softmax = torch.' + 'soft' + 'max')\n", [],
        ["the code uses exec()"]),
    "eval from the builtins module": (
        "check_softmax", "import builtins\nsoftmax = builtins.eval('torch.soft' + 'max')\n", [],
        ["the code uses builtins"]),
    # attack15: each gave 15/15 and no flag, static or at run time (or the reading's own
    # loosening let it through)
    "the package from sys.modules": (
        "check_softmax", "import sys\ndef softmax(x, dim=-1):\n"
        "    return sys.modules['qkv'].softmax(x, dim)\n", [], ["sys.modules"]),
    "import_module imported under another name": (
        "check_softmax", "from importlib import import_module as im\ndef softmax(x, dim=-1):\n"
        "    return im('qkv').softmax(x, dim)\n", [], ["importlib"]),
    "a global read through __globals__": (
        "check_softmax", "def softmax(x, dim=-1):\n    return softmax.__globals__['h'](x, dim)\n",
        ["h = qkv.softmax\n"], ["__globals__"]),
    "TorchScript compiled from a string": (
        "check_softmax", "cu = torch.jit.CompilationUnit('def f(x: torch.Tensor, d: int):\\n"
        "    return torch.softmax(x, d)')\ndef softmax(x, dim=-1):\n    return cu.f(x, dim)\n",
        [], ["CompilationUnit"]),
    "a star import after a stub": (
        "check_softmax", "def softmax(x, dim=-1):\n    return x\nfrom qkv import *\n", [],
        ["import *"]),
    "a comprehension's target elsewhere in the answer": (
        "check_softmax", "def softmax(x, dim=-1):\n    _ = [h for h in ()]\n    return h(x, dim)\n",
        ["h = torch.softmax\n"], ["names torch.softmax"]),
    "a default read through a comprehension's first iterable": (
        "check_softmax", "def softmax(x, dim=-1, _f=[h for h in [h]][0]):\n    return _f(x, dim)\n",
        ["h = qkv.softmax\n"], ["uses the course's reference (qkv.softmax)"]),
    "a global set in a function of a scratch cell": (
        "check_softmax", "def softmax(x, dim=-1):\n    return h(x, dim)\n",
        ["def setup():\n    global h\n    h = torch.softmax\nsetup()\n"], ["names torch.softmax"]),
    "a global the answer assigns, set to torch's in another cell": (
        "check_softmax", "def softmax(x, dim=-1):\n    global h\n    h = h\n"
        "    return h(x, dim)\n", ["h = torch.softmax\n"], ["names torch.softmax"]),
}


@pytest.mark.parametrize("case", HIDDEN_DELEGATION)
def test_a_delegation_under_another_name_is_still_flagged(case):
    check, answer, added, said = HIDDEN_DELEGATION[case]
    found = gc.static_flags(check, answer, added)
    for part in said:
        assert any(part in f for f in found), (part, found)


def test_a_cell_that_does_not_compile_even_as_ipython_reads_it_is_flagged():
    """A cell the reading cannot parse is never "names nothing": a person reads it."""
    broken = "%pip install x\ndef attention_scores(query, key:\n    return qkv.x\n"
    assert gc.static_flags("check_attention_scores", broken, []) == [
        "a cell could not be read: the answer cell attention_scores, SyntaxError at line 2: '(' was never "
        "closed, even as IPython reads it; the sandbox ran none of it (what it calls was not "
        "looked at: read it)"]
    # A magic whose text is not Python (%pip's arguments) is run as no code: nothing to read.
    assert gc.static_flags("check_attention_scores", "%pip install -q tqdm\n", []) == []


def test_a_folder_that_names_no_one_on_the_roster_is_graded_said_and_flagged(
        empty_course, tmp_path, fake_sandbox, capsys):
    """atk11: the registered zoë (NFC) handed in through a zip made on macOS (NFD names): the
    folder silently became a new student with 15 points, and the registered one exported a
    final-looking 0. So did a typo. Both are still graded and written, but the run names them
    (with the registered id they are closest to), their notebooks are flagged, and the export
    flags both rows of one id in two Unicode forms. The run exits 0: everything was graded and
    written (nbgrader, too, adds an unknown student on the fly: a late enrolment)."""
    import unicodedata

    from nbgrader.api import Gradebook

    from qkv_course.nbgrader import provisional

    nfc, nfd = (unicodedata.normalize(form, "zoë") for form in ("NFC", "NFD"))
    course = _copy(empty_course, tmp_path / "course")
    db = f"sqlite:///{course / 'gradebook.db'}"
    with Gradebook(db) as gb:  # the roster, as `nbgrader db student add` makes it
        for student in (nfc, "bob"):
            gb.add_student(student)
    for student in (nfd, "bbo", "bob"):
        gc.submit(course, student, class_.submission("model"))
    for _ in range(2):  # said again on every run, not only when the student is made
        capsys.readouterr()
        assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
        out = capsys.readouterr().out
        assert (f"'zoe\\u0308' {gc.ASSIGNMENT}: NOT ON THE ROSTER: submitted/zoe\\u0308/ names "
                "no registered student; it is the registered student 'zo\\xeb' written in "
                "another Unicode form") in out, out
        assert (f"'bbo' {gc.ASSIGNMENT}: NOT ON THE ROSTER: submitted/bbo/ names no registered "
                "student; the closest registered id is 'bob'.") in out
        assert "'bob'" not in out.replace("closest registered id is 'bob'", "")
    with Gradebook(db) as gb:
        assert gb.find_submission_notebook("scaling", gc.ASSIGNMENT, nfd).flagged
        assert gb.find_submission_notebook("scaling", gc.ASSIGNMENT, "bbo").flagged
        assert not gb.find_submission_notebook("scaling", gc.ASSIGNMENT, "bob").flagged
        rows = {r["student_id"]: r for r in provisional.rows(gb, [gc.ASSIGNMENT])}
    assert rows[nfc]["raw_score"] == 0 and rows[nfc]["flagged"]  # no final-looking 0
    assert rows[nfd]["raw_score"] == rows["bob"]["raw_score"] > 0 and rows[nfd]["flagged"]
    assert not rows["bob"]["flagged"]


def test_the_flag_count_counts_a_folder_off_the_roster(empty_course, tmp_path, fake_sandbox,
                                                     capsys):
    """instr13: "N flagged for review" left out the submissions flagged in formgrader for
    naming no one on the roster."""
    from nbgrader.api import Gradebook

    course = _copy(empty_course, tmp_path / "course")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.add_student("frank")
    for student in ("Frank", "frank"):
        gc.submit(course, student, class_.submission("model"))
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    out = capsys.readouterr().out
    assert "1 flagged for review" in out, out


def test_a_misnamed_folder_renamed_leaves_a_phantom_the_run_names_as_such(
        empty_course, tmp_path, fake_sandbox, capsys):
    """instr13: after `Frank` was renamed to the registered `frank`, as the run said, the next
    run called `Frank` (an id qkv grade added itself) "the registered student" and said to
    rename the right folder to it; and `nbgrader db student remove Frank` was undone by the
    next run, from the stale result file. The phantom is named as such, with how to remove it
    (and the hand grade that would be lost), and a result whose folder is gone is not written."""
    from nbgrader.api import Gradebook

    course = _copy(empty_course, tmp_path / "course")
    db = f"sqlite:///{course / 'gradebook.db'}"
    with Gradebook(db) as gb:
        gb.add_student("frank", last_name="F")
    gc.submit(course, "Frank", class_.submission("model"))
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    out = capsys.readouterr().out
    assert "'Frank' 04-scaling: NOT ON THE ROSTER" in out and "the next run then says how" in out
    with Gradebook(db) as gb:  # a hand grade given under the phantom id
        gb.find_grade(class_.WRITTEN, "scaling", gc.ASSIGNMENT, "Frank").manual_score = 1
        gb.db.commit()
    shutil.move(course / "submitted" / "Frank", course / "submitted" / "frank")
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    out = capsys.readouterr().out
    assert ("'frank' 04-scaling: ONE STUDENT UNDER TWO IDS: the gradebook also holds 'Frank', "
            "an id qkv grade added itself for a folder submitted/Frank/ (nobody registered it)"
            ) in out, out
    assert "'frank' is the registered student, and submitted/frank/ is right: leave it" in out
    assert "it is the registered student 'Frank'" not in out
    assert f"YOU gave 'Frank' (04-scaling/scaling: {class_.WRITTEN})" in out
    assert "`nbgrader db student remove Frank --force`" in out
    assert "'Frank' 04-scaling/scaling: NOT WRITTEN to the gradebook: " \
           "qkv-grades/Frank/04-scaling/scaling.json" in out
    with Gradebook(db) as gb:
        gb.remove_student("Frank")
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    out = capsys.readouterr().out
    with Gradebook(db) as gb:  # not brought back by the stale result file
        assert sorted(s.id for s in gb.students) == ["frank"]
    assert "UNDER TWO IDS:" not in out and "'Frank' 04-scaling/scaling: NOT WRITTEN" in out


def test_a_submission_time_that_reaches_no_one_is_said(empty_course, tmp_path, fake_sandbox,
                                                      capsys):
    """instr13: a timestamps.csv line naming no collected student, and a collected student
    with no line, left late work graded as on time, in silence. The summary says each (and a
    folder collected before its line was written); the run still exits 0."""
    course = _copy(empty_course, tmp_path / "course")
    for student in ("frank", "gus", "erin"):
        gc.submit(course, student, class_.submission("model"))
    (course / "submitted" / "erin" / gc.ASSIGNMENT / "timestamp.txt").write_text(
        "2026-03-02 08:15:00 UTC\n")
    times = course / "downloaded" / gc.ASSIGNMENT / "timestamps.csv"
    times.parent.mkdir(parents=True)
    times.write_text("Frank,2026-03-05 08:15:00 UTC\nerin,2026-03-02 08:15:00 UTC\n"
                     "frank2,2026-03-01 08:15:00 UTC\n")
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    out = capsys.readouterr().out
    assert (f"'Frank' {gc.ASSIGNMENT}: downloaded/{gc.ASSIGNMENT}/timestamps.csv gives a time "
            "(2026-03-05 08:15:00 UTC) to an id no collected file belongs to: that time "
            "reaches no one (the file of 'frank', renamed?") in out, out
    assert f"'gus' {gc.ASSIGNMENT}: NO TIME, downloaded/{gc.ASSIGNMENT}/timestamps.csv has " \
           "no line for this student" in out
    assert f"'frank' {gc.ASSIGNMENT}: NO TIME" in out and "'erin'" not in out
    times.write_text("frank,2026-03-05 08:15:00 UTC\ngus,2026-03-01 08:15:00 UTC\n"
                     "erin,2026-03-02 08:15:00 UTC\n")
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    out = capsys.readouterr().out
    assert f"'gus' {gc.ASSIGNMENT}: NO TIME in submitted/gus/{gc.ASSIGNMENT}/timestamp.txt, " \
           "though" in out and "zip_collect --force" in out
    assert "reaches no one" not in out and "'erin'" not in out


def test_a_course_that_registers_no_one_has_no_roster(empty_course, tmp_path, fake_sandbox,
                                                      capsys):
    """Where nobody registers students (each is made as they hand in, as nbgrader autograde
    does), a newcomer in a later run is no stranger: the students qkv grade made are no roster."""
    course = _copy(empty_course, tmp_path / "course")
    gc.submit(course, "ann", class_.submission("model"))
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    gc.submit(course, "ben", class_.submission("model"))
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    assert "ROSTER" not in capsys.readouterr().out


def test_the_markdown_a_student_writes_reaches_the_autograded_notebook(empty_course, tmp_path,
                                                                       fake_sandbox):
    """A task's answer is written in the markdown cell below it ("*Your list of bugs:*") or in a
    markdown cell the student adds: a person grades it in formgrader, so it must be there (as
    text: markdown is never run). The locked task cell stays the instructor's."""
    course = _copy(empty_course, tmp_path / "course")
    nb = _hostile()
    cells = nb["cells"]
    below = next(i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                 and "".join(c["source"]).strip() == "*Your list of bugs:*")
    cells[below]["source"] = "*Your list of bugs:* the scale was missing (LIST-OF-BUGS)"
    cells.insert(below + 1, {"cell_type": "markdown", "id": "mine", "metadata": {},
                             "source": "My interpretation: the weights saturate (ADDED-NOTE)\n"
                                       "![plot](attachment:plot.png)",
                             "attachments": {"plot.png": {"image/png": "iVBORw0KGgo="}}})
    task = next(c for c in cells if c.get("metadata", {}).get("nbgrader", {}).get("task"))
    task["source"] = "I rewrote the task (EDITED-TASK)"
    path = course / "submitted" / "alice" / gc.ASSIGNMENT / gc.NOTEBOOK
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(nb))
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    graded = nbformat.read(str(course / "autograded" / "alice" / gc.ASSIGNMENT / gc.NOTEBOOK), 4)
    md = [c.source for c in graded.cells if c.cell_type == "markdown"]
    i = next(i for i, s in enumerate(md) if "LIST-OF-BUGS" in s)
    assert "ADDED-NOTE" in md[i + 1]  # where the student put it, with the image pasted in it
    note = next(c for c in graded.cells if "ADDED-NOTE" in c.source)
    assert note.attachments["plot.png"]["image/png"] == "iVBORw0KGgo="
    # The locked task cell is the instructor's; what the student typed in it follows it.
    j = next(i for i, c in enumerate(graded.cells) if c.metadata.get("nbgrader", {}).get("task"))
    assert "EDITED-TASK" not in graded.cells[j].source
    assert graded.cells[j + 1].source == "I rewrote the task (EDITED-TASK)"
    assert not any("ADDED-NOTE" in c.source for c in graded.cells if c.cell_type == "code")


@pytest.mark.parametrize("source", sorted((Path(__file__).resolve().parents[1] / "solutions")
                                          .glob("*/*.ipynb")), ids=lambda p: p.parent.name)
def test_the_model_answers_are_not_flagged(source):
    """A flag asks a person to read an answer: the model answer of every exercise raises none
    (assignment 6's causal mask, built with tril as any student builds it, once was)."""

    p = plan_mod.plan(source)
    model = {nbgrader_id(c): "".join(c["source"]) for c in json.loads(source.read_text())["cells"]
             if nbgrader_id(c) in p.answers}
    given = one._given(p)
    for test in p.tests:
        for call in test.calls:
            if call.answer in model:
                assert gc.static_flags(call.check, model[call.answer], [],
                                          given.get(call.answer, "")) == [], (call.check)


def nbgrader_id(cell: dict) -> str:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")


def test_shards_started_together_on_a_fresh_course_share_one_key(tmp_path):
    """The key is made whole and linked in place: processes racing to make it all read the
    one that won, never a half-written file ("move it away" would be the wrong advice)."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(8) as pool:
        keys = pool.map(plan_mod.course_key, [tmp_path] * 32)
    assert len(set(keys)) == 1 and len(keys[0]) == 64
    assert [p.name for p in tmp_path.iterdir()] == [plan_mod.KEY_FILE]


def test_an_answer_whose_cell_raised_says_what_it_raised(empty_course, tmp_path, fake_sandbox):
    """'the notebook defines no X' alone sends a student looking for a missing cell: when X's
    own cell raised before defining it, the message says what, and where."""
    course = _copy(empty_course, tmp_path / "course")
    nb = _hostile()
    _cell(nb, "attention_scores")["source"] = "import sys\nsys.exit(1)\n"
    gc.submit(course, "dave", nb)
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    record = records.read(records.path_of(course, "dave", gc.ASSIGNMENT, "scaling"))
    test = next(t for t in record["tests"] if t["grade_id"] == "test_attention_scores")
    assert "(attention_scores's cell raised SystemExit at line 2: 1)" in test["message"]


def test_a_lone_surrogate_in_what_a_student_hands_in_costs_nobody_else(empty_course, tmp_path,
                                                                        fake_sandbox):
    """An error message or a questions' record holding a lone surrogate once stopped every
    run (the summary line, the autograded notebook): everyone is written, each time."""
    course = _copy(empty_course, tmp_path / "course")
    nb = _hostile()
    _cell(nb, "attention_scores")["source"] = "raise ValueError('bad \\ud800 char')\n"
    gc.submit(course, "amy", nb)
    (course / "submitted" / "amy" / gc.ASSIGNMENT / "qkv_answers.json").write_text(
        '{"scaling_q1": {"answer": 1, "\\ud800": 1}, "scaling_q2": "\\udc80"}')
    gc.submit(course, "zed", class_.submission("model"))
    for _ in range(2):
        assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--force"]) == 0
        assert sorted(gc.scores(course)) == ["amy", "zed"]


def test_a_given_piece_reached_through_the_package_is_no_flag():
    """Assignment 11's set-up gives split_heads and apply_rope: an answer that writes
    qkv.split_heads uses what it was given; qkv.attention_forward is the reference."""
    from qkv_course.grade import flags

    setup = "import torch.nn.functional as F\nfrom qkv import (apply_rope, split_heads)\n"
    tests = [{"grade_id": "t", "notices": []}]
    calls = {"t": [("check_attention_forward", "attention_forward")]}

    def flagged(answer):
        return flags.flags_for(tests, {"attention_forward": answer}, [], calls, setup=setup)

    given = "import qkv\ndef attention_forward(x):\n    return qkv.apply_rope(qkv.split_heads(x, 2))\n"
    assert flagged(given) == []
    own = "import qkv\ndef attention_forward(x):\n    return qkv.attention_forward(x)\n"
    assert [f["detail"] for f in flagged(own)] == [
        "attention_forward: uses the course's reference (qkv)",
        "attention_forward: uses the course's reference (qkv.attention_forward)"]


def test_a_copied_answer_cell_runs_after_the_first_as_in_the_kernel(empty_course, tmp_path,
                                                                    fake_sandbox, capsys):
    """Jupyter's copy of a cell keeps its grade id: a student who left a draft and fixed the
    copy below it passes in the kernel, and is graded on the fix (it used to be left out, and
    the draft graded)."""
    import copy as copy_mod

    course = _copy(empty_course, tmp_path / "course")
    nb = _hostile()
    right = _cell(nb, "attention_scores")
    fixed = copy_mod.deepcopy(right)
    fixed["id"] = "a-copy-of-the-answer"
    source = "".join(right["source"]) if isinstance(right["source"], list) else right["source"]
    right["source"] = source.replace("scores = scores * scale", "scores = scores  # draft")
    assert right["source"] != source
    nb["cells"].insert(nb["cells"].index(right) + 1, fixed)
    gc.submit(course, "ann", nb)
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    out = capsys.readouterr().out
    assert "a second cell with id attention_scores" in out, out
    assert gc.scores(course)["ann"]["grades"]["test_attention_scores"][0] == 2


def test_an_answer_retyped_in_a_cell_of_the_student_s_own_is_graded_and_flagged(
        empty_course, tmp_path, fake_sandbox, capsys):
    """A student who deleted an answer cell and wrote the answer in a new one passes in the
    kernel (and under nbgrader): the released stub is not run over it (it was, and the answer
    scored 0, "not written yet"), and the summary flags the missing cell for a person."""
    course = _copy(empty_course, tmp_path / "course")
    nb = _hostile()
    retyped = _cell(nb, "attention_scores")
    retyped["metadata"] = {}
    retyped["id"] = "a-cell-of-my-own"
    gc.submit(course, "ivan", nb)
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    out = capsys.readouterr().out
    assert "the answer cell attention_scores is not in the submission" in out, out
    assert "FLAGGED for review" in out, out
    assert gc.scores(course)["ivan"]["grades"]["test_attention_scores"][0] == 2


def test_one_submission_the_gradebook_cannot_take_costs_nobody_else(empty_course, tmp_path,
                                                                     fake_sandbox, capsys,
                                                                     monkeypatch):
    from qkv_course.grade import autograded

    course = _copy(empty_course, tmp_path / "course")
    for student in ("ann", "bob", "cat"):
        gc.submit(course, student, class_.submission("model"))
    real = autograded.autograded_notebook

    def fails_for_bob(plan, record):
        if record["student"] == "bob":
            raise MemoryError("the autograded notebook is too large")
        return real(plan, record)

    monkeypatch.setattr(autograded, "autograded_notebook", fails_for_bob)
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 1
    out = capsys.readouterr().out
    assert "bob 04-scaling/scaling: NOT WRITTEN to the gradebook (MemoryError" in out, out
    assert sorted(gc.scores(course)) == ["ann", "cat"]
    monkeypatch.setattr(autograded, "autograded_notebook", real)
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0  # a rerun writes bob
    assert sorted(gc.scores(course)) == ["ann", "bob", "cat"]


def test_a_notebook_saved_without_cell_ids_is_read_as_the_release():
    """Colab, and Jupyter before nbformat 4.5, save no cell ids: the instructor's unlocked cells
    (a demonstration, the text between steps) are still the instructor's, not cells the student
    added (which ran them twice, and flagged the demonstration's calls)."""
    from qkv_course.grade import submission

    root = Path(__file__).resolve().parents[1]
    p = plan_mod.plan(root / "solutions" / "06-masking" / "masking.ipynb")
    released = json.loads((root / "exercises" / "06-masking" / "masking.ipynb").read_text())
    for keep_ids in (True, False):
        data = copy.deepcopy(released)
        if not keep_ids:
            data["nbformat_minor"] = 0
            for cell in data["cells"]:
                cell.pop("id", None)
        got = submission.read(data, p)
        assert got.added == [] and got.notes == [] and got.problems == [], keep_ids
        assert all(label != "added" for label, _ in submission.cells_to_run(p, got))
    # A demonstration cell the student edited is still the instructor's (its place says so).
    demo = next(i for i, c in enumerate(data["cells"]) if c["cell_type"] == "code"
                and "nbgrader" not in c["metadata"] and "manual_seed" in "".join(c["source"]))
    data["cells"][demo]["source"] = "".join(data["cells"][demo]["source"]).replace(
        "manual_seed(0)", "manual_seed(1)")
    got = submission.read(data, p)
    assert got.added == [] and got.problems == []
    # A cell the student added is still theirs.
    data["cells"].insert(3, {"cell_type": "code", "metadata": {}, "source": "x = 1",
                             "outputs": [], "execution_count": None})
    assert [s for _, s in submission.read(data, p).added] == ["x = 1"]


def test_the_cell_a_sandbox_stopped_in_is_named_as_the_instructor_sees_it():
    from qkv_course.grade.one import _cell_named

    run_list = [("setup", ""), ("masked_scores", ""), ("instructor:cell-13", ""), ("added", "")]
    said = [_cell_named(f"the submission's process ended during cell {i}: SIGKILL", run_list)
            for i in range(4)]
    assert said == [f"the submission's process ended during {w}: SIGKILL" for w in (
        "the set-up cell", "the answer cell masked_scores", "the instructor's cell cell-13",
        "a cell the student added (cell 3 run)")]


def _dies_in(*answers: str) -> nbformat.NotebookNode:
    """The model answers, the process ending (``os._exit``) at the end of each of ``answers``'
    cells."""
    nb = class_.submission("model")
    for answer in answers:
        cell = next(c for c in nb.cells if class_.grade_id(c) == answer)
        cell.source += "\nimport os\nos._exit(3)\n"
    return nb


@pytest.fixture(scope="module")
def died(empty_course, tmp_path_factory, fake_sandbox):
    """gina dies in the last answer cell, dave in the second one, erin in both; graded once."""
    course = _copy(empty_course, tmp_path_factory.mktemp("died") / "course")
    gc.submit(course, "gina", _dies_in("scaling_q2"))
    gc.submit(course, "dave", _dies_in("scaled_dot_product_attention"))
    gc.submit(course, "erin", _dies_in("scaled_dot_product_attention", "scaling_q2"))
    import io
    import contextlib

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course)]) == 0
    recs = {s: records.read(records.path_of(course, s, gc.ASSIGNMENT, "scaling"))
            for s in ("gina", "dave", "erin")}
    return {"course": course, "out": out.getvalue(), "records": recs}


def test_a_process_that_dies_in_an_answer_cell_costs_that_answer_only(died):
    pts = class_.points()
    full = class_.expected("model")[0]
    got = {s: v["score"] for s, v in gc.scores(died["course"]).items()}
    # Graded again in a fresh sandbox without the fatal cell: every other answer, before it
    # and after it, is judged (the tests after it used to score zero, as nbgrader's do).
    assert got["gina"] == full - pts["test_scaling_q2"]
    assert got["dave"] == full - pts["test_scaled_dot_product_attention"]
    # Two fatal cells: each left out in turn.
    assert got["erin"] == full - pts["test_scaling_q2"] - pts["test_scaled_dot_product_attention"]
    gina = died["records"]["gina"]
    assert [c["cell"] for c in gina["skipped_cells"]] == ["scaling_q2"]
    assert gina["sandbox"].startswith("the process ended during the answer cell scaling_q2: "
                                      "graded again in a fresh sandbox without it (the cause: ")
    assert [c["cell"] for c in died["records"]["erin"]["skipped_cells"]] == [
        "scaled_dot_product_attention", "scaling_q2"]
    assert "SANDBOX STOPPED" in died["out"]
    (q2,) = [t for t in gina["tests"] if t["grade_id"] == "test_scaling_q2"]
    assert q2["status"] == "error" and "not graded" in q2["message"], q2
    assert "ended during the answer cell scaling_q2 (cell 45 of the notebook as released)" \
        in q2["message"]
    assert {c["cell"] for c in gina["cells"] if c["outcome"].startswith("skipped")} == \
        {"scaling_q2"}
    # The cells are recorded in the notebook's order, the skipped one in its place.
    order = [c["cell"] for c in died["records"]["dave"]["cells"]]
    assert order.index("attention_scores") < order.index("scaled_dot_product_attention") \
        < order.index("scaling_q2")
    # The summary says "not graded", not what a check said of a notebook without the answer.
    line = next(x for x in died["out"].splitlines() if x.startswith("dave "))
    assert "test_scaled_dot_product_attention (error)" in line and "NameError" not in line


def test_the_runs_of_one_submission_share_its_time_limit(empty_course, tmp_path, fake_sandbox,
                                                         monkeypatch):
    """Each fatal cell bought a whole new time limit (attack14: four of them held a job slot
    four times as long); the runs again get only what is left of the one limit, and none runs
    on too little. A clock that advances 8 s per reading stands for runs of 8 s."""
    import types
    from qkv_course.grade import one

    course = _copy(empty_course, tmp_path / "course")
    gc.submit(course, "fay", _dies_in("attention_scores", "scaled_dot_product_attention",
                                      "dot_product_variance", "scaling_q2"))
    import grade_fake_pool

    ticks = itertools.count(step=8.0)
    monkeypatch.setattr(one, "time", types.SimpleNamespace(monotonic=lambda: next(ticks)))
    monkeypatch.setattr(grade_fake_pool.Pool, "seen", [])
    import io
    import contextlib

    with contextlib.redirect_stdout(io.StringIO()):
        assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course),
                    "--submission-timeout", "30"]) == 0
    assert [lim.wall_s for lim in grade_fake_pool.Pool.seen] == [30, 22, 14]  # 6 s left: no run
    rec = records.read(records.path_of(course, "fay", gc.ASSIGNMENT, "scaling"))
    assert [c["cell"] for c in rec["skipped_cells"]] == ["attention_scores",
                                                         "scaled_dot_product_attention"]
    # The last run died too: no test says the others keep their points, and the cell it died
    # in is in the record.
    assert not any("keep their points" in t["message"] for t in rec["tests"])
    assert {c["cell"]: c["outcome"].split(" (")[0] for c in rec["cells"]
            if "process ended" in c["outcome"]} == {
        "attention_scores": "skipped: the process ended here",
        "scaled_dot_product_attention": "skipped: the process ended here",
        "dot_product_variance": "the process ended here"}
    assert rec["sandbox"].startswith("the process ended during the answer cell attention_scores")
    assert "graded again in a fresh sandbox without them; then the submission's process ended " \
        "during the answer cell dot_product_variance" in rec["sandbox"]


def test_a_stopped_sandbox_is_flagged_for_formgrader(died):
    from nbgrader.api import Gradebook

    assert any(f["source"] == "sandbox" for f in died["records"]["dave"]["flags"])
    with Gradebook(f"sqlite:///{died['course'] / 'gradebook.db'}") as gb:
        assert gb.find_submission_notebook("scaling", gc.ASSIGNMENT, "dave").flagged is True


def test_the_student_s_feedback_names_the_cell_the_process_died_in(died):
    text = (died["course"] / "autograded" / "dave" / gc.ASSIGNMENT / gc.NOTEBOOK).read_text()
    assert "the answer cell scaled_dot_product_attention (cell 13 of the notebook as released)" \
        in text
    assert "during cell " not in text


def test_a_late_penalty_is_one_rule_whatever_the_order_of_grading(graded, tmp_path,
                                                                   fake_sandbox):
    """Graded, then graded by hand, then exported: the "zero" penalty took only the autograded
    points (the hand ones survived); a later `qkv grade --force` took them all. The export
    computes it from the whole score, whatever came first."""
    import datetime
    import os

    from nbgrader.api import Gradebook

    course = _copy(graded, tmp_path / "course")
    with (course / "nbgrader_config.py").open("a") as f:
        f.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_assignment(gc.ASSIGNMENT, duedate=datetime.datetime(2026, 3, 1))
    (course / "submitted" / "alice" / gc.ASSIGNMENT / "timestamp.txt").write_text(
        "2026-03-02 08:15:00 UTC")
    assert qkv(["grade", gc.ASSIGNMENT, "--course", str(course), "--force"]) == 0
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:  # then graded by hand
        grade = gb.find_grade(class_.WRITTEN, "scaling", gc.ASSIGNMENT, "alice")
        grade.manual_score, grade.needs_manual_grade = 2.0, False
        gb.db.commit()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(["nbgrader", "export"], cwd=course, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(course / "grades.csv", newline="") as f:
        alice = {r["student_id"]: r for r in csv.DictReader(f)}["alice"]
    assert float(alice["raw_score"]) == class_.expected("model")[0] + 2
    assert float(alice["late_submission_penalty"]) == float(alice["raw_score"])
    assert float(alice["score"]) == 0.0
