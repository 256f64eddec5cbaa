"""Every test cell of every assignment scores with its own answer right and every other answer
unwritten (issue 13, item 3): a test cell exercises one function, whatever that function
builds on comes from the reference, so a missing or wrong helper costs only its own test.

Each case runs, in a fresh interpreter (:func:`notebook.run_cells`), the assignment's set-up
cell, every answer cell (the solution's for the answer under test, the released stub, which
raises ``NotImplementedError``, for the others) and the answer's test cells, hidden tests
included, as nbgrader would.
"""

import re
from pathlib import Path

import nbformat
import pytest

from notebook import run_cells

ROOT = Path(__file__).resolve().parents[2]


def _meta(cell):
    return cell.metadata.get("nbgrader", {})


def _cases():
    out = []
    for source in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        released = ROOT / "exercises" / source.parent.name / source.name
        sol = nbformat.read(str(source), as_version=4)
        stubs = {_meta(c).get("grade_id"): c.source
                 for c in nbformat.read(str(released), as_version=4).cells}
        answers = [c for c in sol.cells if _meta(c).get("solution") and c.cell_type == "code"]
        tests = [c for c in sol.cells if _meta(c).get("grade") and c.cell_type == "code"
                 and "check_" in c.source]
        for answer in answers:
            name = answer.source.split('(')[0].split()[-1]
            mine = [t for t in tests if re.search(rf"\bcheck_{name}\b", t.source)]
            for test in mine:
                cells = [sol.cells[1].source] + [
                    a.source if a is answer else stubs[_meta(a)["grade_id"]] for a in answers]
                out.append(pytest.param(cells + [test.source],
                                        id=f"{source.parent.name}:{_meta(test)['grade_id']}"))
    return out


CASES = _cases()


def test_every_checked_answer_is_covered():
    ids = {p.id for p in CASES}
    assert len(ids) == len(CASES) >= 16, sorted(ids)


@pytest.mark.parametrize("cells", CASES)
def test_a_test_cell_scores_with_only_its_own_answer_written(cells):
    outcomes = run_cells(cells)
    assert outcomes[0] is None, outcomes[0]  # the set-up cell
    assert outcomes[-1] is None, outcomes[-1]  # the test cell: full points
