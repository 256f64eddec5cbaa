"""Each assignment written once: ``solutions/<NN-name>/<name>.md`` -> the nbgrader notebook beside it.

The source is a MyST Markdown notebook (jupytext's ``md:myst`` format) that reads like a page.
Plain markdown and code cells are copied as they are; nbgrader's kinds of cell are marked with
code-cell options and markdown-cell metadata:

- the set-up cell, locked (grade id ``setup``); its body holds only the lines this assignment adds
  to the standard text of :mod:`qkv_course.generate.setup_cell`, often none::

      ```{code-cell} python
      :setup:
      ```

- an answer cell with grade id ``softmax``; for students, nbgrader replaces each
  ``### BEGIN SOLUTION`` / ``### END SOLUTION`` region with ``raise NotImplementedError()``::

      ```{code-cell} python
      :answer: softmax
      ```

- a locked test cell worth 2 points; ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS``
  regions are hidden from students::

      ```{code-cell} python
      :tests: test_softmax
      :points: 2
      ```

- a written answer graded by hand, worth 2 points: the markdown cell after this line holds the
  model answer (students get "YOUR ANSWER HERE")::

      +++ {"written": "why_scale", "points": 2}

- a task graded by hand against a rubric, worth 3 points: the markdown cell after this line is
  the prompt, locked; its ``<!-- BEGIN MARK SCHEME -->`` / ``<!-- END MARK SCHEME -->`` region
  (the rubric and a model answer) is removed from the students' copy, and nbgrader puts it back
  when it autogrades a submission, so the grader reads it in formgrader beside the student's
  answer (the plain markdown cell after the prompt)::

      +++ {"task": "interpret_variance", "points": 3}

- what a test's points are for, when it is not a function of the chapter (see
  :mod:`qkv_course.generate.points`): ``:kind: debugging``, ``variation``, ``experiment`` or
  ``question`` (the default for a test cell that calls ``check_question``)::

      ```{code-cell} python
      :tests: test_max_weight
      :points: 2
      :kind: experiment
      ```

- an answer an earlier assignment already asked for, taken from there (its body stays empty, so
  the solution is written once)::

      ```{code-cell} python
      :answer: softmax
      :from: 02-lookup
      ```

The intro, the markdown cell right before the set-up cell, gets a generated ending: what the
checks its test cells call try (dtypes, devices, time per call) and refuse, and the calls they
note instead, made from the checks themselves by :mod:`qkv_course.generate.checks_intro` (never typed in
the source).

Anything else is refused with a message naming the file and the cell: another option, a grade id
missing or used twice, points missing on a graded cell or given to any other.
The notebook gets nbgrader's schema-3 cell metadata, stable cell ids (the grade id, or
``cell-<index>``), no outputs, and a stamp naming its source and :data:`~qkv_course.generate.command.COMMAND`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Optional

import jupytext
import nbformat
from nbformat import NotebookNode

from ..config import ROOT, release_tag, repository_url
from ..usage import did_you_mean
from . import checks_intro
from .command import COMMAND
from .setup_cell import GRADE_ID as SETUP_ID
from .setup_cell import assignment_setup

SOURCES = "solutions/*/*.md"  # one per assignment, beside the notebook it makes
KINDS = ("setup", "answer", "tests", "written", "task")  # the option or key that names a cell's kind
OPTIONS = {"code": {"setup", "answer", "tests", "points", "from", "kind"},
           "markdown": {"written", "task", "points"}}
#: What a test's points are for (``:kind:``; default: ``question`` for a conceptual question,
#: else ``function``); written answers and tasks are ``written`` (see :mod:`.points`).
POINT_KINDS = ("function", "debugging", "variation", "experiment", "question")
GRADE_ID = re.compile(r"[A-Za-z0-9_-]+")  # what nbgrader accepts as a grade id
METADATA = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}}
MARK_BEGIN, MARK_END = "<!-- BEGIN MARK SCHEME -->", "<!-- END MARK SCHEME -->"
USAGE = ('a code cell takes `:setup:`, `:answer: ID` (with `:from: NN-name` to reuse that '
         'assignment\'s answer), or `:tests: ID` with `:points: N` (and `:kind: K`); '
         'a markdown cell takes `+++ {"written": "ID", "points": N}` or `+++ {"task": "ID", "points": N}`')


class SourceError(ValueError):
    """An assignment source breaks the convention; the message names the file and the cell."""


def _nbgrader(grade_id: str, *, grade: bool = False, solution: bool = False,
              locked: bool = False, points: Optional[float] = None, task: bool = False) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": task}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def _where(path: Path, index: int, cell: NotebookNode) -> str:
    """Where a cell is, for error messages: the file, the cell's number and its first line."""
    lines = cell.source.strip().splitlines()
    first = repr(lines[0][:50]) if lines else "empty"
    return f"{path}: cell {index + 1} ({cell.cell_type}, {first})"


def _grading(cell: NotebookNode, where: str) -> Optional[dict]:
    """nbgrader's metadata for one source cell (None for a plain cell).

    Raises:
        SourceError: unknown options, two kinds at once, a missing grade id or points, or
            points on a cell that is not graded.
    """
    options = dict(cell.metadata)
    allowed = OPTIONS.get(cell.cell_type)
    if allowed is None:
        raise SourceError(f"{where}: a {cell.cell_type} cell cannot be in an assignment; {USAGE}")
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise SourceError(f"{where}: unknown option {', '.join(unknown)}; {USAGE}")
    kinds = [kind for kind in KINDS if kind in options]
    if len(kinds) > 1:
        raise SourceError(f"{where}: one cell cannot be both {' and '.join(kinds)}; {USAGE}")
    kind = kinds[0] if kinds else None
    if "points" in options and kind not in ("tests", "written", "task"):
        raise SourceError(f"{where}: points belong on a test cell or a written answer, "
                          f"not on {'an ' + kind if kind else 'a plain'} cell")
    if "from" in options and kind != "answer":
        raise SourceError(f"{where}: `:from:` belongs on an answer cell")
    if "kind" in options and (kind != "tests" or options["kind"] not in POINT_KINDS):
        raise SourceError(f"{where}: `:kind:` belongs on a test cell and is one of "
                          f"{', '.join(POINT_KINDS)}, got {options['kind']!r}")
    if kind is None:
        return None
    if kind == "setup":
        if options["setup"] not in (None, True):
            raise SourceError(f"{where}: `:setup:` takes no value (its grade id is {SETUP_ID!r})")
        return _nbgrader(SETUP_ID, locked=True)
    grade_id = options[kind]
    if not isinstance(grade_id, str) or not GRADE_ID.fullmatch(grade_id):
        raise SourceError(f"{where}: {kind} needs a grade id (letters, digits, _ and -), "
                          f"got {grade_id!r}")
    if kind == "answer":
        return _nbgrader(grade_id, solution=True)
    points = options.get("points")
    if isinstance(points, bool) or not isinstance(points, (int, float)) or points <= 0:
        raise SourceError(f"{where}: {kind} {grade_id!r} needs points (a positive number), "
                          f"got {points!r}")
    if kind == "task":  # nbgrader's manually graded task: locked, its mark scheme hidden
        if MARK_BEGIN not in cell.source or MARK_END not in cell.source:
            raise SourceError(f"{where}: task {grade_id!r} needs its rubric between "
                              f"{MARK_BEGIN} and {MARK_END}")
        return _nbgrader(grade_id, locked=True, points=points, task=True)
    return _nbgrader(grade_id, grade=True, solution=kind == "written", locked=kind == "tests",
                     points=points)


def _borrowed(path: Path, where: str, assignment: object, grade_id: str, body: str) -> str:
    """The source of answer ``grade_id`` in assignment ``assignment`` (a sibling folder)."""
    if body.strip():
        raise SourceError(f"{where}: an answer taken `:from:` another assignment has an empty body")
    folder = path.parent.parent / str(assignment)
    sources = sorted(folder.glob("*.md")) if str(assignment) and "/" not in str(assignment) else []
    for other in sources:
        for cell in jupytext.read(other, fmt="md:myst").cells:
            if cell.metadata.get("answer") == grade_id and "from" not in cell.metadata:
                return cell.source.strip("\n")
    raise SourceError(f"{where}: `:from: {assignment}` names no assignment with an answer "
                      f"{grade_id!r} (looked in solutions/{assignment}/*.md)")


def notebook(path: Path, root: Path = ROOT) -> NotebookNode:
    """The nbgrader notebook an assignment source describes, without its stamp.

    Args:
        path: the source, a MyST Markdown notebook following this module's convention.
        root: the repository root (for the address the set-up cell installs from).

    Returns:
        A valid nbformat-4 notebook: cells in the source's order, no outputs.

    Raises:
        SourceError: the source breaks the convention (the message names the file and cell).
    """
    source = jupytext.read(path, fmt="md:myst")
    nb = nbformat.v4.new_notebook(metadata=nbformat.from_dict(METADATA))
    seen: Dict[str, str] = {}
    for index, cell in enumerate(source.cells):
        where = _where(path, index, cell)
        grading = _grading(cell, where)
        text = cell.source.strip("\n")
        if "from" in cell.metadata:
            text = _borrowed(path, where, cell.metadata["from"], grading["nbgrader"]["grade_id"], text)
        if grading and grading["nbgrader"]["grade_id"] == SETUP_ID:
            text = assignment_setup(repository_url(root), release_tag(root), text)
        new = (nbformat.v4.new_code_cell if cell.cell_type == "code"
               else nbformat.v4.new_markdown_cell)(text)
        new.id = f"cell-{index}"
        if grading:
            new.metadata.update(grading)
            new.id = grade_id = grading["nbgrader"]["grade_id"]
            if grade_id in seen:
                raise SourceError(f"{where}: grade id {grade_id!r} is already used by {seen[grade_id]}")
            seen[grade_id] = f"cell {index + 1}"
        nb.cells.append(new)
    _end_intro(nb, [c.source for c in source.cells if "tests" in c.metadata])
    nbformat.validate(nb)
    return nb


def _end_intro(nb: NotebookNode, tests: list) -> None:
    """Append what the checks try and refuse (:mod:`.checks_intro`) to the intro, in place.

    The intro is the markdown cell right before the set-up cell; a notebook without one, or
    whose tests call no check, is left as it is.
    """
    text = checks_intro.block(tests)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    at = ids.index(SETUP_ID) if SETUP_ID in ids else 0
    if text and at > 0 and nb.cells[at - 1].cell_type == "markdown":
        intro = nb.cells[at - 1]
        intro.source = checks_intro.split(intro.source)[0] + "\n\n" + text


def stamp(nb: NotebookNode, source: str) -> None:
    """Mark a generated notebook, in place, with its source and the command that makes it.

    In the metadata (``qkv.generated_from``) and in an HTML comment (invisible when rendered) at
    the top of the first markdown cell. nbgrader keeps both, so the released exercise says the
    same; it is worded for maintainers, since students do edit their copy.

    Args:
        nb: the notebook.
        source: the source's path from the repository root, e.g. ``solutions/04-scaling/scaling.md``.
    """
    nb.metadata["qkv"] = {"generated_from": source, "generated_by": COMMAND}
    first = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    if first is None:
        raise SourceError(f"{source}: an assignment needs a markdown cell (its title)")
    first.source = (f"<!-- Generated from {source} by `{COMMAND}`. Maintainers: do not edit this "
                    f"notebook; to change the assignment, edit that file and regenerate. -->\n\n"
                    + first.source)


def source(assignment: str, root: Path = ROOT) -> Path:
    """The source of an assignment named by the user: ``06-masking``, its folder, or its ``.md``.

    Args:
        assignment: an assignment's name (a folder of ``solutions/``), or a path to a folder
            holding one assignment source or to the source itself.
        root: the repository root (where names are looked up).

    Returns:
        The path of the source, ``<folder>/<name>.md``.

    Raises:
        FileNotFoundError: nothing matches; the message lists the assignments there are.
    """
    path = Path(assignment)
    if path.suffix == ".md" and path.is_file():
        return path
    named = root / "solutions" / assignment
    folder = path if path.is_dir() else named if "/" not in assignment and named.is_dir() else None
    found = sorted(folder.glob("*.md")) if folder is not None else []
    if len(found) == 1:
        return found[0]
    names = [p.parent.name for p in sorted(root.glob(SOURCES))]
    where = (f"{folder} holds {len(found)} .md files, not one" if folder
             else "no such assignment" + did_you_mean(assignment, names))
    raise FileNotFoundError(f"{assignment}: {where}; give one of {', '.join(names)}, or the path of an "
                            "assignment's folder or of its .md source")


def text(nb: NotebookNode) -> str:
    """The notebook as nbformat writes it to a file."""
    out = nbformat.writes(nb)
    return out if out.endswith("\n") else out + "\n"


def targets(root: Path = ROOT) -> Dict[Path, str]:
    """Every solution notebook, ``solutions/<NN-name>/<name>.ipynb``, rendered from its ``.md``."""
    out = {}
    for path in sorted(root.glob(SOURCES)):
        nb = notebook(path, root)
        stamp(nb, path.relative_to(root).as_posix())
        out[path.with_suffix(".ipynb")] = text(nb)
    return out
