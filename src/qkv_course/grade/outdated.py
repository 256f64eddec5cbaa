"""A submission newer than its grade: the grade is kept, and flagged until the new one is graded.

When a student's current notebook could not be graded (the grader failed on it, or a merge
found no result file for it as it is now), ``gradebook.db`` still holds the grade of what they
handed in before. Nothing of it is removed (a score given by hand stays), but it must not pass
for the current grade: the submission's notebook is flagged (formgrader's flag column, and the
``flagged`` column of ``nbgrader export`` with :mod:`qkv_course.nbgrader.provisional`), and a
mark beside its autograded notebook says why. The next time a result for it is written to the
gradebook, :func:`lift` takes that flag away again, unless the new result has flags of its
own or the notebook was flagged already when it was marked (a person's flag stays; one a
person sets while the mark is there cannot be told from the mark's, and is lifted with it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple


def mark_path(course: Path, student: str, assignment: str, notebook: str) -> Path:
    """Where the mark of an outdated grade is: beside the autograded notebook."""
    return course / "autograded" / student / assignment / f".{notebook}.qkv-outdated"


def flag(course: Path, assignment: str, pairs: Iterable[Tuple[str, str]]) -> List[str]:
    """Flag the gradebook's grade of each ``(student, notebook)`` whose current submission was
    not graded; scores (automatic or by hand) are left as they are.

    Returns:
        ``"student assignment/notebook"`` of each one the gradebook holds a grade of (one it
        holds none of is no outdated grade: nothing is exported for it as if current).
    """
    from nbgrader.api import Gradebook, MissingEntry

    pairs = sorted(set(pairs))
    if not pairs:
        return []
    flagged = []
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student, notebook in pairs:
            try:
                nb = gb.find_submission_notebook(notebook, assignment, student)
            except MissingEntry:
                continue
            mark = mark_path(course, student, assignment, notebook)
            # Flagged before (by a person, or for what the grade itself holds): the flag is
            # theirs, and stays when the current submission is graded.
            theirs = bool(nb.flagged) and not mark.is_file() or _kept(mark)
            nb.flagged = True
            gb.db.commit()
            mark.parent.mkdir(parents=True, exist_ok=True)
            mark.write_text("the gradebook's grade is of an earlier submission: the current one "
                            "was not graded\n" + (_KEEP if theirs else ""), encoding="utf-8")
            flagged.append(f"{student} {assignment}/{notebook}")
    return flagged


def lift(gb: Any, course: Path, student: str, assignment: str, notebook: str,
         record: Dict[str, Any]) -> Optional[Path]:
    """Before a result of the current submission is committed: the flag :func:`flag` set is
    taken away (kept when the new result has flags). Returns the mark to remove once the
    gradebook is committed (None: there was none)."""
    mark = mark_path(course, student, assignment, notebook)
    if not mark.is_file():
        return None
    if not record.get("flags") and not _kept(mark):
        gb.find_submission_notebook(notebook, assignment, student).flagged = False
    return mark


#: The mark's line saying the notebook was flagged before it was marked outdated.
_KEEP = "it was flagged before: that flag stays\n"


def _kept(mark: Path) -> bool:
    """Whether the notebook was flagged before :func:`flag` marked it (its flag is kept)."""
    try:
        return _KEEP in mark.read_text(encoding="utf-8")
    except OSError:
        return False


def summary_line(names: List[str]) -> str:
    """The run's line about the grades it flagged as outdated ("" when none)."""
    if not names:
        return ""
    return (f"{len(names)} submission(s) in gradebook.db still hold the grade of an EARLIER "
            f"submission ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''}): kept "
            "(scores given by hand included) and FLAGGED in formgrader and in `nbgrader "
            "export`'s flagged column until the current submission is graded")
