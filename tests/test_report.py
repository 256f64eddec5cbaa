"""``qkv report``: a class's mistakes counted from autograded notebooks.

The slow test grades a synthetic class of 31 submissions of 06-masking with a real
``nbgrader autograde`` and checks the counts, known by construction, in ``mistakes.csv``
and the page. The fast tests use hand-made autograded notebooks, whose failure messages
come from running the real checks on wrong answers.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from masking_submissions import (ASSIGNMENT, DIAGONAL_MASKED, INVERTED_CAUSAL, INVERTED_PADDING,
                                 LOOPS_WITHOUT_S, MISSING_CAUSAL, MISTAKE_NAMES, SOLUTION,
                                 ZERO_FILL, finish, grade_id, masking_course, nbgrader,
                                 masked_scores_with_its_own_causal_mask, submission,
                                 where_it_failed)
from qkv.checks import check_causal_mask, check_padding_mask
from qkv_course.cli import main

CAUSAL, PADDING, MASKED = "test_causal_mask", "test_padding_mask", "test_masked_scores"
# Every function test of the assignment (its questions, ``test_masking_q*``, aside).
FUNCTION_TESTS = tuple(
    grade_id(c) for c in nbformat.read(str(SOLUTION), as_version=4).cells
    if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
    and "_q" not in grade_id(c))
LOOP_TIMEOUT = 15  # seconds per cell for the students whose answer never ends

# (students, their answers, what each of them must get: test -> mistake); None: left blank.
CLASS = [
    (8, {}, {}),
    (7, {"causal_mask": INVERTED_CAUSAL}, {CAUSAL: MISTAKE_NAMES[INVERTED_CAUSAL]}),
    (5, {"causal_mask": DIAGONAL_MASKED}, {CAUSAL: MISTAKE_NAMES[DIAGONAL_MASKED]}),
    (3, {"causal_mask": MISSING_CAUSAL}, {CAUSAL: "error"}),  # NameError: causal_mask
    (3, {"padding_mask": INVERTED_PADDING}, {PADDING: MISTAKE_NAMES[INVERTED_PADDING]}),
    (2, {"padding_mask": LOOPS_WITHOUT_S}, {PADDING: "timeout"}),
    # The masking step's test uses the course's causal mask: its own mistake costs it alone.
    (2, {"masked_scores": ZERO_FILL}, {MASKED: MISTAKE_NAMES[ZERO_FILL]}),
    (1, None, {test: "not written yet" for test in FUNCTION_TESTS}),
]


def _snapshot(folder: Path):
    return {p.relative_to(folder): (p.stat().st_mode, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _report(capsys, course, out):
    code = main(["report", str(course), "--out", str(out)])
    return (code, *capsys.readouterr())


def _rows(out):
    with open(out / "mistakes.csv", newline="") as f:
        return list(csv.reader(f))


# --------------------------------------------------------------------------- a real class


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """Autograde the class with nbgrader; return the folder holding all of ``autograded/``.

    The class is graded in three courses at once (the machine's cores wait less on each
    kernel's start), one of them for the endless loops with a short time limit per cell;
    their ``autograded/`` folders are then gathered in one course folder.
    """
    tmp = tmp_path_factory.mktemp("report")
    base = tmp / "base"
    release = masking_course(base)

    shards = {"a": [], "b": [], "loops": []}  # shard -> [(student, notebook)]
    expected = {}
    for group, (count, answers, outcome) in enumerate(CLASS):
        for i in range(count):
            student = f"g{group}s{i}"
            nb = (nbformat.read(str(release), as_version=4) if answers is None else submission(
                {"masked_scores": masked_scores_with_its_own_causal_mask(), **answers},
                base=release))
            shard = "loops" if answers == {"padding_mask": LOOPS_WITHOUT_S} else "ab"[len(expected) % 2]
            shards[shard].append((student, nb))
            expected[student] = outcome
    procs = []
    for shard, students in shards.items():
        course = tmp / shard
        shutil.copytree(base, course)
        for student, nb in students:
            (course / "submitted" / student / ASSIGNMENT).mkdir(parents=True)
            nbformat.write(nb, str(course / "submitted" / student / ASSIGNMENT / "masking.ipynb"))
        timeout = [f"--Execute.timeout={LOOP_TIMEOUT}"] if shard == "loops" else []
        procs.append((course, timeout, nbgrader(course, "autograde", ASSIGNMENT, "--force",
                                                *timeout)))
    for course, timeout, proc in procs:
        _finish_or_retry(course, proc, timeout)
    gathered = tmp / "class"
    for shard in shards:
        shutil.copytree(tmp / shard / "autograded", gathered / "autograded", dirs_exist_ok=True)
    return gathered, expected


def _finish_or_retry(course: Path, proc, extra) -> None:
    """Wait for an autograde run; grade once more each student whose notebook nbgrader could not
    process at all (its kernel died or never started: the loaded machine's doing, not the
    answer's; a cell's error or timeout is recorded in the notebook and is no such failure)."""
    log = proc.communicate(timeout=600)[0]
    failed = re.findall(r"error processing assignment '[^']+' for student '([^']+)'", log)
    if proc.returncode == 0 or not failed:
        assert proc.returncode == 0, where_it_failed(log)
        return
    for student in sorted(set(failed)):
        finish(nbgrader(course, "autograde", ASSIGNMENT, "--force", f"--student={student}",
                        *extra))


@pytest.mark.slow
def test_report_counts_a_real_class_mistakes(graded_class, capsys, tmp_path):
    course, expected = graded_class
    assert len(expected) >= 30
    assert {CAUSAL, PADDING, MASKED} < set(FUNCTION_TESTS)  # the scripted tests, and more
    before = _snapshot(course)
    code, out, err = _report(capsys, course, tmp_path / "out")
    assert code == 0, err
    assert _snapshot(course) == before  # nothing in the course folder changes

    counts = Counter((test, mistake) for outcome in expected.values()
                     for test, mistake in outcome.items())
    rows = sorted(((t, m, n) for (t, m), n in counts.items()), key=lambda r: (r[0], -r[2], r[1]))
    # The class scripts mistakes in the function tests; the assignment's two questions
    # (answered by the submissions as the solution does, or missing with the answers) are
    # counted too, but are not part of the script.
    got = [r for r in _rows(tmp_path / "out") if "_q" not in r[1]]
    assert got == [["assignment", "test", "mistake", "students"]] + [
        [ASSIGNMENT, t, m, str(n)] for t, m, n in rows]

    page = (tmp_path / "out" / "report.html").read_text()
    assert page.count("<img") == 1 and "src='data:image/png;base64," in page
    for test in FUNCTION_TESTS:
        passed = sum(test not in outcome for outcome in expected.values())
        assert f"<td>{test}</td><td class='n'>{passed} / {len(expected)}</td>" in page


# --------------------------------------------------------------------------- hand-made notebooks


def _failed(check, source):
    """The outputs a failing check leaves in a cell: its result as data, then the error."""
    import json

    from qkv.checks.result import MIME, CheckFailed

    ns = {"torch": torch}
    exec(source, ns)  # noqa: S102
    name = check.__name__[len("check_"):]
    with pytest.raises(CheckFailed) as e:
        check(ns[name])
    shown = new_output("display_data", data={MIME: json.loads(e.value.result.to_json()),
                                             "text/plain": ""})
    return [shown, _error("CheckFailed", str(e.value))]


def _test_cell(grade_id, *outputs):
    cell = new_code_cell("check(answer)", outputs=list(outputs), execution_count=3)
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "points": 2, "grade_id": grade_id}
    return cell


def _error(ename, evalue=""):
    return new_output("error", ename=ename, evalue=evalue, traceback=[])


def _autograded(course, student, assignment, *cells):
    folder = course / "autograded" / student / assignment
    folder.mkdir(parents=True)
    written = new_markdown_cell("my answer")
    written.metadata["nbgrader"] = {"grade": True, "solution": True, "points": 1, "grade_id": "why"}
    nbformat.write(new_notebook(cells=[*cells, written]), str(folder / "nb.ipynb"))


@pytest.fixture
def small_class(tmp_path):
    course = tmp_path / "course"
    inverted = _failed(check_causal_mask, INVERTED_CAUSAL)
    padding = _failed(check_padding_mask, INVERTED_PADDING)
    for student in ("ann", "bob", "cy"):
        _autograded(course, student, "01-one", _test_cell("t1", *inverted),
                    _test_cell("t2", *padding))
    _autograded(course, "dee", "01-one", _test_cell("t1", _error("NameError", "name 'f'")),
                _test_cell("t2", new_output("stream", name="stderr", text="a warning")))
    _autograded(course, "ann", "02-two", _test_cell("t1", _error("KeyboardInterrupt"),
                                                    _error("CellTimeoutError")))
    _autograded(course, "bob", "02-two", _test_cell("t1"))
    (course / "autograded" / "bob" / "02-two" / "broken.ipynb").write_text("not json")
    return course


def test_small_class_csv_sorted_and_one_chart_per_assignment(small_class, capsys, tmp_path):
    before = _snapshot(small_class)
    code, out, err = _report(capsys, small_class, tmp_path / "out")
    assert code == 0 and "skipped" in err and "broken.ipynb" in err
    assert _snapshot(small_class) == before
    assert _rows(tmp_path / "out")[1:] == [
        ["01-one", "t1", MISTAKE_NAMES[INVERTED_CAUSAL], "3"],
        ["01-one", "t1", "error", "1"],
        ["01-one", "t2", MISTAKE_NAMES[INVERTED_PADDING], "3"],
        ["01-one", "t2", "unnamed failure", "1"],  # stderr output: failed, as nbgrader scores it
        ["02-two", "t1", "timeout", "1"],
    ]
    page = (tmp_path / "out" / "report.html").read_text()
    assert page.count("<img") == 2 and "<td>t1</td><td class='n'>0 / 4</td>" in page
    assert "<td>t1</td><td class='n'>1 / 2</td>" in page and "<td>why<" not in page  # hand-graded


@pytest.mark.parametrize("make, message", [
    (lambda tmp: (tmp / "nowhere", tmp / "out"), "no such folder"),
    (lambda tmp: (tmp, tmp / "out"), "has no autograded/ folder"),
    (lambda tmp: ((tmp / "autograded").mkdir() or tmp, tmp / "out"), "no autograded notebooks"),
])
def test_bad_course_folder_exits_2_with_one_line(capsys, tmp_path, make, message):
    course, out = make(tmp_path)
    code, stdout, err = _report(capsys, course, out)
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not out.exists()


def test_unwritable_out_folder_exits_2_and_changes_nothing(small_class, capsys, tmp_path):
    (tmp_path / "a_file").write_text("")
    before = _snapshot(small_class)
    code, _, err = _report(capsys, small_class, tmp_path / "a_file" / "out")
    assert code == 2 and "cannot write to" in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("qkv report: cannot write")
    assert _snapshot(small_class) == before


# --------------------------------------------------------------------------- qkv grade's records


def _record(tests):
    return {"student": "x", "tests": [{"grade_id": g, "points": 2.0, "status": s, "message": "m",
                                       "mistake": m} for g, s, m in tests],
            "manual_tests": {"test_experiment": 2.0}}


def test_report_reads_qkv_grades_result_files_first(tmp_path, capsys):
    from qkv_course.grade import records

    course = tmp_path / "course"
    records.write(records.path_of(course, "ann", ASSIGNMENT, "masking"), _record([
        (CAUSAL, "fail", "inverted mask"), (PADDING, "pass", None), (MASKED, "timeout", None)]))
    records.write(records.path_of(course, "ben", ASSIGNMENT, "masking"), _record([
        (CAUSAL, "fail", "inverted mask"), (PADDING, "fail", None), (MASKED, "error", None)]))
    # An autograded notebook of ann's too (as qkv grade also writes): the result file wins.
    folder = course / "autograded" / "ann" / ASSIGNMENT
    folder.mkdir(parents=True)
    cell = new_code_cell("x", metadata={"nbgrader": {"grade": True, "grade_id": CAUSAL,
                                                     "points": 2}})
    nbformat.write(new_notebook(cells=[cell]), str(folder / "masking.ipynb"))
    code, out, err = _report(capsys, course, tmp_path / "out")
    assert code == 0, err
    rows = {(r[1], r[2]): r[3] for r in _rows(tmp_path / "out")[1:]}
    assert rows == {(CAUSAL, "inverted mask"): "2", (PADDING, "unnamed failure"): "1",
                    (MASKED, "timeout"): "1", (MASKED, "error"): "1"}


def test_a_failure_the_check_described_counts_by_its_description(tmp_path, capsys):
    """No known mistake, but the check said what is wrong (a transposed mask): the class's
    answers count together under that description, its numbers left out."""
    from qkv_course.grade import records

    course = tmp_path / "course"
    for student, shape in (("ann", "(2, 3)"), ("ben", "(4, 5)")):
        record = _record([(CAUSAL, "fail", None), (PADDING, "fail", None)])
        record["tests"][0]["calls"] = [{"passed": False, "what": "the mask is transposed (rows "
                                        "and columns swapped): True above the diagonal"}]
        record["tests"][1]["calls"] = [{"passed": False, "what": f"the result has shape "
                                        f"{shape}; expected another"}]
        records.write(records.path_of(course, student, ASSIGNMENT, "masking"), record)
    code, out, err = _report(capsys, course, tmp_path / "out")
    assert code == 0, err
    rows = {(r[1], r[2]): r[3] for r in _rows(tmp_path / "out")[1:]}
    assert rows == {(CAUSAL, "the mask is transposed (rows and columns swapped)"): "2",
                    (PADDING, "the result has shape (#, #)"): "2"}


def test_report_reads_a_folder_of_gradescope_results(tmp_path, capsys):
    """``qkv gradescope``'s autograder keeps the record in results.json: a folder of them
    (one per submission, any depth) is a class; a student's latest record counts."""
    import json

    def results(folder, student, tests, graded_at):
        record = dict(_record(tests), student=student, assignment=ASSIGNMENT, graded_at=graded_at)
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps(
            {"score": 0, "tests": [], "extra_data": {"qkv": record}}))

    export = tmp_path / "export"
    results(export / "submission_1", "ann", [(CAUSAL, "fail", "inverted mask")], "2026-01-01")
    results(export / "submission_2", "ann", [(CAUSAL, "pass", None)], "2026-01-02")  # resubmitted
    results(export / "submission_3", "ben", [(CAUSAL, "fail", "inverted mask")], "2026-01-01")
    (export / "other").mkdir()
    (export / "other" / "results.json").write_text('{"score": 1, "tests": []}')  # not qkv's
    bad = dict(_record([(CAUSAL, "pass", None)]), student="cid", assignment=ASSIGNMENT)
    bad["tests"][0]["points"] = "lots"  # malformed: skipped, not a crash of the whole report
    (export / "malformed").mkdir()
    (export / "malformed" / "results.json").write_text(json.dumps({"extra_data": {"qkv": bad}}))
    code, out, err = _report(capsys, export, tmp_path / "out")
    assert code == 0, err
    assert "2 student(s)" in out and "skipped" in err and "other" in err and "malformed" in err
    rows = {(r[1], r[2]): r[3] for r in _rows(tmp_path / "out")[1:]}
    assert rows == {(CAUSAL, "inverted mask"): "1"}
    assert "<td>test_causal_mask</td><td class='n'>1 / 2</td>" in (
        tmp_path / "out" / "report.html").read_text()


def test_results_that_name_no_student_are_said_to_count_as_one(tmp_path, capsys):
    """A zip tried locally (no submission_metadata.json) names every submission 'anonymous'."""
    from qkv_course.report.mistakes import read_gradescope

    for i in range(2):
        folder = tmp_path / f"sub{i}"
        folder.mkdir()
        record = {"assignment": "04-scaling", "student": "anonymous", "tests": [],
                  "graded_at": f"2026-01-0{i + 1}"}
        (folder / "results.json").write_text(json.dumps({"extra_data": {"qkv": record}}))
    assert list(read_gradescope(tmp_path)["04-scaling"]) == ["anonymous"]
    assert "2 results.json files name no student" in capsys.readouterr().err


def test_a_course_folder_reads_its_own_results_not_every_results_json_below_it(tmp_path):
    """The instructors' page tries the Gradescope autograder in ag/ inside the course: its
    results.json is no student's (it counted as an 'anonymous' student with 'not written yet')."""
    from qkv_course.report.mistakes import read_course

    (tmp_path / "autograded").mkdir()
    (tmp_path / "ag" / "results").mkdir(parents=True)
    record = {"assignment": "04-scaling", "student": "anonymous", "tests": [],
              "graded_at": "2026-01-01"}
    (tmp_path / "ag" / "results" / "results.json").write_text(
        json.dumps({"extra_data": {"qkv": record}}))
    assert read_course(tmp_path, tmp_path / "autograded") == {}
    # The same file in a folder that is no course is what the report reads.
    assert list(read_course(tmp_path / "ag", tmp_path / "ag" / "autograded")) == ["04-scaling"]


def test_a_results_json_inside_a_students_upload_is_never_read(tmp_path, capsys):
    """A student's upload keeps its folders: a results.json of their own inside it could claim
    a classmate and a later time, and replace the classmate's record (and accuse them of
    copying). Only where the autograder writes counts; several records of one student are
    said; with Gradescope's metadata, a record must name a submitter of its folder."""
    import json

    from qkv_course.report.mistakes import gradescope_records

    def results(folder, student, status, graded_at):
        record = dict(_record([(CAUSAL, status, "inverted mask" if status == "fail" else None)]),
                      student=student, assignment=ASSIGNMENT, graded_at=graded_at)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "results.json").write_text(json.dumps({"extra_data": {"qkv": record}}))

    export = tmp_path / "export"
    results(export / "submission_1", "ann", "pass", "2026-01-01")
    results(export / "submission_2", "bob", "pass", "2026-01-01")
    results(export / "submission_2" / "extra", "ann", "fail", "9999-12-31")  # bob's upload
    results(export / "submission_2" / "results", "ann", "fail", "9999-12-31")
    results(export / "gs" / "ann" / "results", "ann", "pass", "2026-01-02")  # the autograder's
    found = gradescope_records(export)[ASSIGNMENT]
    err = capsys.readouterr().err
    assert found["ann"]["graded_at"] == "2026-01-02" and found["bob"]["graded_at"] == "2026-01-01"
    assert err.count("a results.json inside a student's upload is theirs") == 2
    assert f"2 records name ann in {ASSIGNMENT} (" in err  # said, not silently preferred
    # Bob forges ann at the top of his own submission folder: the export's metadata says whose
    # submission that folder is.
    (export / "gs" / "ann" / "results" / "results.json").unlink()
    results(export / "submission_2", "ann", "fail", "9999-12-31")
    (export / "submission_metadata.yml").write_text(
        "submission_1:\n  :submitters:\n  - :name: Ann\n    :sid: ann\n"
        "submission_2:\n  :submitters:\n  - :name: Bob\n    :sid: bob\n")
    found = gradescope_records(export)[ASSIGNMENT]
    assert found["ann"]["graded_at"] == "2026-01-01" and "bob" not in found
    assert "names 'ann', who is not a submitter" in capsys.readouterr().err
    # The export unzipped into a folder of its own (assignment_<id>_export/submission_<id>/),
    # read from the folder above: the same records, its metadata beside its submissions.
    found = gradescope_records(tmp_path)[ASSIGNMENT]
    assert found["ann"]["graded_at"] == "2026-01-01" and "bob" not in found
    assert "names 'ann', who is not a submitter" in capsys.readouterr().err


def test_answers_that_are_none_of_the_choices_count_as_one_mistake():
    """Each wrong string ("z", "e") was its own row, named by the raw message; counted
    together, the class sees how many answered outside the choices."""
    from qkv_course.report.mistakes import NOT_A_CHOICE, _described

    def test(what):
        return {"grade_id": "test_lookup_q2", "status": "fail", "calls": [
            {"passed": False, "what": what}]}

    said = {_described(test(f'expected one of "a", "b", "c", "d" (a str), got str {x!r}'))
            for x in ("z", "e", "A!")}
    assert said == {NOT_A_CHOICE}
    assert _described(test("expected a number (an int or a float), got str 'ten'")) == \
        _described(test("expected a number (an int or a float), got list [1]")) == \
        "expected a number (an int or a float)"
    assert _described(test("the mask is transposed (rows and columns swapped)")) == \
        "the mask is transposed (rows and columns swapped)"
