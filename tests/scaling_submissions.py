"""A synthetic class for assignment 04-scaling: the material of tests/test_instructors.py and
benchmarks/autograde.py.

Each kind of submission starts from the released exercise, as a student's does, and its grade
is known by construction (out of 12: 10 autograded points, 2 for the written answer):

- ``model``: every answer cell and the written answer hold the model answers: 10 autograded
  points, and the written answer waits for grading by hand;
- ``unscaled``: the model answers, but ``attention_scores`` forgets the scale (a named
  mistake): its test and the attention test that calls it fail (10 - 3 - 3 = 4 points);
- ``blank``: the exercise as released: 0 points, and nothing waits for a person;
- ``edited_test``: ``blank`` with a line added to the test cell ``test_softmax`` (the one real
  edit of a locked cell in a class: autograding logs it and puts the cell back).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Dict

import nbformat
from nbformat import NotebookNode

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "04-scaling"
NOTEBOOK = "scaling.ipynb"
SOLUTION = ROOT / "solutions" / ASSIGNMENT / NOTEBOOK
EXERCISE = ROOT / "exercises" / ASSIGNMENT / NOTEBOOK
WRITTEN = "written_no_scale"
EDITED_TEST = "test_softmax"
# kind -> autograded points out of 10, and whether the written answer waits for a person
EXPECTED = {"model": (10.0, True), "unscaled": (4.0, True), "blank": (0.0, False),
            "edited_test": (0.0, False)}
_SCALE = "    scores = scores * scale\n"


def grade_id(cell: NotebookNode) -> str:
    return cell.metadata.get("nbgrader", {}).get("grade_id", "")


def model_answers() -> Dict[str, str]:
    """The solution's answer cells and written answer (grade id -> source), nbgrader's markers removed."""
    nb = nbformat.read(str(SOLUTION), as_version=4)
    return {grade_id(c): re.sub(r"^\s*### (BEGIN|END) SOLUTION\n", "", c.source, flags=re.MULTILINE)
            for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")}


def submission(kind: str) -> NotebookNode:
    """The released exercise as a student of this ``kind`` (one of :data:`EXPECTED`) hands it in."""
    if kind not in EXPECTED:
        raise ValueError(f"kind {kind!r}: one of {', '.join(EXPECTED)}")
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
