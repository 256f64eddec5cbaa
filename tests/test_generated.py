"""Every generated file fresh from its source; the assignments' source convention enforced.

``solutions/<a>/<name>.md`` -> ``solutions/<a>/<name>.ipynb`` (qkv_course.assignments) ->
``exercises/<a>/<name>.ipynb`` (nbgrader, qkv_course.exercises); the other generators (Colab
copies, ``_toc.yml``, the export lists, CONTRIBUTING's concept map) are checked here too.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest

from qkv_course import assignments, exercises
from qkv_course.config import ROOT
from qkv_course.generate import COMMAND, GENERATORS, stale

# The Colab copies are made from book/_glue, which a background book build rewrites.
pytestmark = pytest.mark.usefixtures("book_build_finished")

ASSIGNMENT_GENERATORS = [g for g in GENERATORS if g.name in ("solutions", "exercises")]
SCALING = "solutions/04-scaling/scaling.md"
HEAD = "---\nkernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n\n"


def test_two_generators_solutions_first():
    assert [g.module for g in ASSIGNMENT_GENERATORS] == ["qkv_course.assignments",
                                                         "qkv_course.exercises"]


# The exercises' generator runs nbgrader: slow, like every test that does.
@pytest.mark.parametrize("generator", [
    pytest.param(g, id=g.name, marks=[pytest.mark.slow] if g.name == "exercises" else [])
    for g in GENERATORS])
def test_generated_files_are_up_to_date(generator):
    problems = stale(ROOT, [generator])
    assert not problems, "\n".join(problems + [f"run `{COMMAND}` and commit the result"])


def _copy(tmp_path: Path, assignment: str) -> Path:
    """The files the two generators read, for one assignment (and those it takes answers
    `:from:`), in a fresh root."""
    for name in ("_config.yml", "nbgrader_config.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    sources = "".join(p.read_text() for p in (ROOT / "solutions" / assignment).glob("*.md"))
    for name in {assignment, *re.findall(r"^:from: (\S+)", sources, re.MULTILINE)}:
        for folder in ("solutions", "exercises"):
            shutil.copytree(ROOT / folder / name, tmp_path / folder / name)
    return tmp_path


@pytest.mark.slow
def test_an_edited_source_makes_both_notebooks_stale(tmp_path):
    root = _copy(tmp_path, "04-scaling")
    assert stale(root, ASSIGNMENT_GENERATORS) == []
    source = root / SCALING
    text = source.read_text()
    assert "## What you built" in text
    source.write_text(text.replace("## What you built", "## What you have built"))
    assert stale(root, ASSIGNMENT_GENERATORS) == [
        "solutions/04-scaling/scaling.ipynb is stale (solutions)",
        "exercises/04-scaling/scaling.ipynb is stale (exercises)",
    ]


@pytest.mark.slow
def test_release_holds_only_the_notebook(tmp_path):
    # The whole solutions/<a>/ folder, its .md included, goes through generate_assignment; a
    # released .md would be a target here (and a "missing" file in the check).
    root = _copy(tmp_path, "04-scaling")
    released = list(exercises.targets(root))
    assert root / "exercises/04-scaling/scaling.ipynb" in released
    assert [p for p in released if "04-scaling" in p.parts] == [root / "exercises/04-scaling/scaling.ipynb"]
    assert all(p.suffix == ".ipynb" for p in released), released


@pytest.mark.slow
def test_a_notebook_without_a_source_is_reported(tmp_path):
    root = _copy(tmp_path, "04-scaling")
    (root / SCALING).unlink()
    problems = stale(root, ASSIGNMENT_GENERATORS)
    assert problems == [
        "solutions/04-scaling/scaling.ipynb has no source any more (solutions)",
        "exercises/04-scaling/scaling.ipynb has no source any more (exercises)",
    ]


def _meta(cell):
    return cell.metadata.get("nbgrader")


def test_rendered_cells_carry_nbgrader_metadata_by_kind():
    nb = assignments.notebook(ROOT / SCALING)
    by_id = {cell.id: cell for cell in nb.cells}
    base = {"schema_version": 3, "task": False}
    assert _meta(by_id["setup"]) == {**base, "grade": False, "grade_id": "setup", "locked": True,
                                     "solution": False}
    assert _meta(by_id["softmax"]) == {**base, "grade": False, "grade_id": "softmax",
                                       "locked": False, "solution": True}
    assert _meta(by_id["test_softmax"]) == {**base, "grade": True, "grade_id": "test_softmax",
                                            "locked": True, "solution": False, "points": 1}
    written = by_id["written_no_scale"]
    assert written.cell_type == "markdown"
    assert _meta(written) == {**base, "grade": True, "grade_id": "written_no_scale",
                              "locked": False, "solution": True, "points": 2}
    plain = [c for c in nb.cells if _meta(c) is None]
    assert plain and all(c.id == f"cell-{nb.cells.index(c)}" and not c.metadata for c in plain)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert "### BEGIN HIDDEN TESTS" in by_id["test_softmax"].source


def test_setup_cell_is_the_standard_text_plus_the_assignments_lines():
    nb = assignments.notebook(ROOT / "solutions/05-multi-head/multi_head.md")
    setup = next(c for c in nb.cells if c.id == "setup")
    assert setup.source.startswith("# Set-up: run this cell first.")
    assert setup.source.endswith("warnings_to_stdout()  # the autograder fails a test cell "
                                 "that writes to stderr\nfrom torch import nn\n\n"
                                 "from qkv import combine_masks  # given: the masks of chapter 6, "
                                 "merged into one")


def test_generated_notebooks_are_stamped():
    for target, text in assignments.targets(ROOT).items():
        nb = nbformat.reads(text, as_version=4)
        source = target.relative_to(ROOT).with_suffix(".md").as_posix()
        assert nb.metadata["qkv"] == {"generated_from": source, "generated_by": COMMAND}
        first = next(c for c in nb.cells if c.cell_type == "markdown")
        assert first.source.startswith(f"<!-- Generated from {source} by `{COMMAND}`.")
    for path in ROOT.glob("exercises/*/*.ipynb"):  # nbgrader kept the stamp
        nb = nbformat.read(str(path), as_version=4)
        assert nb.metadata["qkv"]["generated_from"].startswith("solutions/")
        assert nb.cells[0].source.startswith("<!-- Generated from solutions/")


def _code(options: str, body: str = "x = 1") -> str:
    return f"```{{code-cell}} python\n{options}\n\n{body}\n```\n"


@pytest.mark.parametrize("cells, words", [
    (_code(":answers: softmax"), ["unknown option answers"]),
    ("+++ {\"hidden\": true}\n\nText\n", ["unknown option hidden"]),
    (_code(":answer:"), ["answer needs a grade id", "None"]),
    (_code(":answer: one") + "\n" + _code(":tests: one\n:points: 1"),
     ["grade id 'one' is already used by cell 2"]),
    (_code(":answer: softmax\n:points: 2"), ["points belong on a test cell", "an answer cell"]),
    (_code(":points: 2"), ["points belong on a test cell", "a plain cell"]),
    (_code(":tests: test_softmax"), ["tests 'test_softmax' needs points"]),
    ("+++ {\"written\": \"why\"}\n\nBecause.\n", ["written 'why' needs points"]),
    (_code(":answer: softmax\n:tests: test_softmax\n:points: 1"), ["both answer and tests"]),
    (_code(":setup: mine"), ["`:setup:` takes no value"]),
    (_code(":tests: t\n:points: 1\n:from: 02-lookup"), ["`:from:` belongs on an answer cell"]),
    (_code(":answer: softmax\n:from: 02-lookup"), ["empty body"]),
    (_code(":answer: softmax\n:from: 99-nowhere", ""), ["names no assignment", "99-nowhere"]),
])
def test_a_bad_source_names_the_file_and_the_cell(tmp_path, cells, words):
    path = tmp_path / "bad.md"
    path.write_text(HEAD + "# Title\n\n" + cells)
    with pytest.raises(assignments.SourceError) as err:
        assignments.notebook(path)
    message = str(err.value)
    assert message.startswith(f"{path}: cell "), message
    for word in words:
        assert word in message, message


def test_an_answer_taken_from_another_assignment_is_written_once():
    """Assignment 4 asks for the softmax of assignment 2: its source borrows the cell."""
    four = assignments.notebook(ROOT / "solutions/04-scaling/scaling.md")
    two = assignments.notebook(ROOT / "solutions/02-lookup/lookup.md")
    cell = {c.id: c for c in four.cells}["softmax"]
    assert cell.source == {c.id: c for c in two.cells}["softmax"].source
    assert "### BEGIN SOLUTION" in cell.source
    assert ":from: 02-lookup" in (ROOT / "solutions/04-scaling/scaling.md").read_text()
