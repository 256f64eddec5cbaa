"""The autograded notebook a person grades by hand in (qkv_course.grade.autograded): a test cell
that calls no check says a person grades it, and which cells above it the sandbox interrupted at
their time limit (a training run, say), so that the grader knows its results never came."""

from __future__ import annotations

from types import SimpleNamespace

from qkv_course.grade.autograded import WAITS, autograded_notebook


def _cell(cell_id: str, kind: str = "code", **nbgrader) -> dict:
    meta = {"nbgrader": {"grade_id": cell_id, **nbgrader}} if nbgrader else {}
    cell = {"cell_type": kind, "id": cell_id, "metadata": meta, "source": f"# {cell_id}"}
    if kind == "code":
        cell.update(outputs=[], execution_count=None)
    return cell


_CELLS = [_cell("setup"), _cell("model", solution=True, grade=False),
          _cell("train"),
          _cell("test_training_result", grade=True, points=2),
          _cell("evaluate"),
          _cell("test_last", grade=True, points=1)]
_PLAN = SimpleNamespace(source={"cells": _CELLS}, skeleton={"cells": _CELLS, "metadata": {}},
                        manual_tests={"test_training_result": 2.0, "test_last": 1.0})


def _said(cells: list) -> dict:
    record = {"student": "ann", "tests": [], "answers": {"model": "# mine"}, "cells": cells}
    nb = autograded_notebook(_PLAN, record)
    return {c["id"]: "".join(o.get("text", "") for o in c.get("outputs", []))
            for c in nb["cells"] if c["id"].startswith("test_")}


def test_a_hand_graded_cell_says_which_cells_above_it_ran_out_of_time():
    limit = "it ran past its limit of 60 s (an endless loop?)"
    said = _said([{"cell": "setup", "outcome": "ok"}, {"cell": "model", "outcome": "ok"},
                  {"cell": "instructor:train", "outcome": "...", "time_limit": limit},
                  {"cell": "instructor:evaluate", "outcome": "...", "time_limit": limit}])
    first, last = said["test_training_result"], said["test_last"]
    assert first.startswith(WAITS) and f"train ({limit})" in first and "evaluate" not in first
    assert "train (" in last and "evaluate (" in last


def test_a_cell_the_student_added_counts_where_it_stands():
    """honest12: a slow cell the student added below every test was named to the grader of a
    test above it. Each added cell is placed by the cell it follows ("after")."""
    limit = "it ran past its limit of 60 s (an endless loop?)"
    said = _said([{"cell": "added", "outcome": "...", "time_limit": limit, "after": "model"},
                  {"cell": "added", "outcome": "...", "time_limit": limit,
                   "after": "test_training_result"},
                  {"cell": "added", "outcome": "...", "time_limit": limit, "after": "test_last"}])
    first, last = said["test_training_result"], said["test_last"]
    assert "a cell the student added below model (" in first
    assert "below test_training_result" not in first and "below test_last" not in first
    assert "below test_training_result (" in last and "below test_last" not in last
    top = _said([{"cell": "added", "outcome": "...", "time_limit": limit, "after": None}])
    assert "a cell the student added (" in top["test_training_result"]


def test_a_run_that_finished_says_only_that_a_person_grades_it():
    said = _said([{"cell": "instructor:train", "outcome": "CellOutcome(index=2, raised=None)"}])
    assert said == {"test_training_result": WAITS + "\n", "test_last": WAITS + "\n"}


def test_the_record_marks_a_cell_interrupted_at_its_limit():
    from qkv_course.grade.one import _time_limit
    from qkv_course.grade.results import CellOutcome, Raised

    said = "it ran past its limit of 60 s"
    assert _time_limit(CellOutcome(2, Raised("TimeLimit", "the worker's words"), said)) == {
        "time_limit": said}
    # what the submission's process says alone is not the grader's note (attack13: a class
    # of that name raised at once put the student's text before the hand grader)
    assert _time_limit(CellOutcome(2, Raised("TimeLimit", "give full marks"))) == {}
    assert _time_limit(CellOutcome(2, Raised("ValueError", "bad"))) == {}
    assert _time_limit(CellOutcome(2)) == {}


def test_the_record_places_each_added_cell_after_the_cell_it_follows():
    from qkv_course.grade.one import _anchors
    from qkv_course.grade.submission import Submission

    sub = Submission(added=[(None, "print(1)"), ("model", "slow()"), ("train", "slow()")])
    run = [("setup", ""), ("added", "print(1)"), ("model", "def f(): ..."),
           ("added", "slow()"), ("instructor:train", ""), ("added", "slow()")]
    assert _anchors(run, sub) == {1: None, 3: "model", 5: "train"}
