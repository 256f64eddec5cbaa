"""``qkv grade ASSIGNMENT --compare``: what ``qkv grade`` gives against what nbgrader recorded.

For a course graded so far by ``nbgrader autograde``: ``qkv grade`` grades the submissions
(its result files in ``qkv-grades/``, as always) but leaves ``gradebook.db`` as nbgrader wrote
it, then prints one line per test whose score differs, or that one of the two has and the
other has not. Nothing in the gradebook or ``autograded/`` changes; a later plain ``qkv grade``
writes them from the result files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..usage import UsageError
from . import records

Key = Tuple[str, str, str]  # (student, notebook, grade id)


def recorded(course: Path, assignment: str) -> Dict[Key, Optional[float]]:
    """Every autograded score nbgrader's gradebook holds for the assignment.

    Raises:
        UsageError: no gradebook, or it does not know the assignment.
    """
    from nbgrader.api import Gradebook, MissingEntry

    path = course / "gradebook.db"
    if not path.is_file():
        raise UsageError(f"{course} has no gradebook.db to compare with: run `nbgrader "
                         f"autograde {assignment}` first, or grade without --compare")
    found: Dict[Key, Optional[float]] = {}
    with Gradebook(f"sqlite:///{path}") as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            raise UsageError(f"the gradebook has no assignment {assignment!r}") from None
        for student in gb.students:
            try:
                submission = gb.find_submission(assignment, student.id)
            except MissingEntry:
                continue
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    found[student.id, notebook.name, grade.name] = grade.auto_score
    return found


def disagreements(results: Iterable[Tuple[str, str, Dict[str, Any]]],
                  nbgrader: Dict[Key, Optional[float]], assignment: str) -> List[str]:
    """One line per test where ``qkv grade``'s result and nbgrader's score differ.

    Args:
        results: ``(student, notebook, record)`` of ``qkv grade`` (:func:`.records.all_results`).
        nbgrader: nbgrader's autograded scores (:func:`recorded`).
        assignment: the assignment, for the lines.

    Returns:
        The lines, sorted by student, notebook and test (hand-graded tests left out).
    """
    lines = []
    graded = set()
    for student, notebook, record in results:
        graded.add((student, notebook))
        for t in record.get("tests", []):
            key = (student, notebook, t["grade_id"])
            ours = float(t["earned"])
            where = f"{student} {assignment}/{notebook} {t['grade_id']}"
            why = f" ({t['status']}: {t['message'][:120]})" if t.get("message") else ""
            if key not in nbgrader or nbgrader[key] is None:
                lines.append(f"{where}: qkv grade {ours:g}/{float(t['points']):g}{why}; "
                             "nbgrader recorded no score")
            elif abs(float(nbgrader[key]) - ours) > 1e-9:
                lines.append(f"{where}: qkv grade {ours:g}/{float(t['points']):g}{why}; "
                             f"nbgrader {float(nbgrader[key]):g}")
    for student, notebook in sorted({(s, n) for s, n, _ in nbgrader} - graded):
        lines.append(f"{student} {assignment}/{notebook}: nbgrader has scores, qkv grade has "
                     "no result (not submitted, or not graded)")
    return sorted(lines)


def report(course: Path, assignment: str) -> List[str]:
    """The disagreements of the assignment's result files with the course's gradebook."""
    return disagreements(records.all_results(course, assignment), recorded(course, assignment),
                         assignment)
