"""A synthetic class for assignment 04-scaling: the material of tests/test_instructors.py and
benchmarks/autograde.py.

Each kind of submission starts from the released exercise, as a student's does, and its grade
is known by construction (:func:`expected`, from the points in the solution notebook):

- ``model``: every answer cell and the written answer hold the model answers: every autograded
  point, and the written answer waits for grading by hand;
- ``unscaled``: the model answers, but ``attention_scores`` forgets the scale (a named
  mistake): its test and the attention test that calls it fail, the others pass;
- ``blank``: the exercise as released: 0 points, and nothing waits for a person;
- ``edited_test``: ``blank`` with a line added to the test cell
  ``test_scaled_dot_product_attention`` (the one real edit of a locked cell in a class:
  autograding logs it and puts the cell back).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Dict, Tuple

import nbformat
from nbformat import NotebookNode

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "04-scaling"
NOTEBOOK = "scaling.ipynb"
SOLUTION = ROOT / "solutions" / ASSIGNMENT / NOTEBOOK
EXERCISE = ROOT / "exercises" / ASSIGNMENT / NOTEBOOK
WRITTEN = "written_no_scale"
EDITED_TEST = "test_scaled_dot_product_attention"
KINDS = ("model", "unscaled", "blank", "edited_test")
# The scores lose their scale; attention built on them is graded with the reference's scores
# (points follow the mistake), so only the scores' test fails.
UNSCALED_FAILS = ("test_attention_scores",)
_SCALE = "    scores = scores * scale\n"


def grade_id(cell: NotebookNode) -> str:
    return cell.metadata.get("nbgrader", {}).get("grade_id", "")


def points() -> Dict[str, float]:
    """The points of every graded cell of the assignment (grade id -> points), tests and written."""
    nb = nbformat.read(str(SOLUTION), as_version=4)
    return {grade_id(c): float(c.metadata["nbgrader"]["points"])
            for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}


def expected(kind: str) -> Tuple[float, bool]:
    """The autograded points a submission of this ``kind`` gets, and whether its written answer
    waits for a person."""
    tests = {g: p for g, p in points().items() if g != WRITTEN}
    if kind == "model":
        return sum(tests.values()), True
    if kind == "unscaled":
        return sum(p for g, p in tests.items() if g not in UNSCALED_FAILS), True
    return 0.0, False


def model_answers() -> Dict[str, str]:
    """The solution's answer cells and written answer (grade id -> source), nbgrader's markers removed."""
    nb = nbformat.read(str(SOLUTION), as_version=4)
    return {grade_id(c): re.sub(r"^\s*### (BEGIN|END) SOLUTION\n", "", c.source, flags=re.MULTILINE)
            for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")}


def submission(kind: str) -> NotebookNode:
    """The released exercise as a student of this ``kind`` (one of :data:`KINDS`) hands it in."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: one of {', '.join(KINDS)}")
    nb = copy.deepcopy(nbformat.read(str(EXERCISE), as_version=4))
    answers = model_answers() if kind in ("model", "unscaled") else {}
    if kind == "unscaled":
        assert _SCALE in answers["attention_scores"], "the model answer no longer scales like this"
        answers["attention_scores"] = answers["attention_scores"].replace(_SCALE, "")
    for cell in nb.cells:
        cell.source = answers.get(grade_id(cell), cell.source)
        if kind == "edited_test" and grade_id(cell) == EDITED_TEST:
            cell.source += '\nprint("I changed this test")'
    return nb
