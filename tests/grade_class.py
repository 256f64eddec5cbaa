"""A small course folder for ``qkv grade`` tests and its benchmark: assignment 04-scaling, its
gradebook made by nbgrader, and submissions of known kinds (``tests/scaling_submissions.py``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Dict, Iterable, Optional

import nbformat

import scaling_submissions as class_
from qkv_course.config import ROOT

ASSIGNMENT = class_.ASSIGNMENT
NOTEBOOK = class_.NOTEBOOK


def make_course(dest: Path, assignments: Iterable[str] = (ASSIGNMENT,)) -> Path:
    """A course folder holding the repository's nbgrader configuration, the assignments'
    sources and releases, and a gradebook that knows them (``nbgrader generate_assignment``)."""
    from qkv_course.nbgrader.api import nbgrader_api, nbgrader_environment

    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "nbgrader_config.py", dest / "nbgrader_config.py")
    for a in assignments:
        for folder in ("solutions", "exercises"):
            shutil.copytree(ROOT / folder / a, dest / folder / a)
    with nbgrader_environment():
        api = nbgrader_api(dest)
        for a in assignments:
            result = api.generate_assignment(a, force=True)
            assert result["success"], result.get("error")
    return dest


def submit(course: Path, student: str, nb: Any, assignment: str = ASSIGNMENT,
           notebook: str = NOTEBOOK) -> Path:
    """Put a submission where nbgrader's collect puts it (a notebook node, a dict or raw bytes)."""
    path = course / "submitted" / student / assignment / notebook
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(nb, bytes):
        path.write_bytes(nb)
    elif isinstance(nb, dict) and not isinstance(nb, nbformat.NotebookNode):
        path.write_text(json.dumps(nb))
    else:
        nbformat.write(nb, str(path))
    return path


def with_cell(kind: str, source: str, after: Optional[str] = None,
              meta: Optional[Dict[str, Any]] = None) -> Any:
    """A submission of ``kind`` with one code cell added (after the cell with grade id
    ``after``, else at the end)."""
    nb = class_.submission(kind)
    cell = nbformat.v4.new_code_cell(source)
    if meta is not None:
        cell.metadata.update(meta)
    where = len(nb.cells)
    if after is not None:
        where = 1 + next(i for i, c in enumerate(nb.cells) if class_.grade_id(c) == after)
    nb.cells.insert(where, cell)
    return nb


def scores(course: Path, assignment: str = ASSIGNMENT) -> Dict[str, Dict[str, Any]]:
    """The gradebook's view: student -> {grade id: (auto_score, needs_manual_grade)} and total."""
    from nbgrader.api import Gradebook

    found: Dict[str, Dict[str, Any]] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for sub in gb.find_assignment(assignment).submissions:
            grades = {g.name: (g.auto_score, g.needs_manual_grade)
                      for nb in sub.notebooks for g in nb.grades}
            found[sub.student.id] = {"grades": grades, "score": sub.score}
    return found


def static_flags(check: str, answer_source: str, added: Iterable[str],
                 given: str = "") -> list:
    """What the grader's static reading flags in one answer's code (and the added cells), as
    :func:`qkv_course.grade.flags.flags_for` says it for a test calling ``check`` on it; the
    answer's name left out of each detail."""
    from qkv_course.grade import flags

    name = check[len("check_"):]  # the answer's name, and its cell's id, as in the notebooks
    found = flags.flags_for([{"grade_id": "t", "notices": []}], {name: answer_source},
                            list(added), {"t": [(check, name)]}, given={name: given})
    return [f["detail"][len(name) + 2:] if f["detail"].startswith(name + ": ") else f["detail"]
            for f in found]
