"""The class's roster, as the gradebook holds it, and the submission folders that name no one on it.

A submission's student id is its folder's name under ``submitted/``, and nbgrader's API makes a
student of any id it is given. A folder named otherwise than the roster (``zoë`` as a zip made
on macOS writes it, decomposed (NFD), for the registered ``zoë``; a typo; another case) became a
new student in silence, graded, while the registered student exported 0 as if they had handed in
nothing (atk11). Such a folder is still graded and written (nothing of the submission is lost),
but every run names it, with the registered id it is closest to, and its notebook is flagged
in formgrader (the run still exits 0: a late enrolment is no error). Ids are compared in
Unicode's NFC form, case-folded.

The roster is the gradebook's students less those ``qkv grade`` added itself (kept in
``qkv-grades/.students-added``) and nobody registered since with a name or e-mail. A course that
registers no one (its students are made as they hand in, as ``nbgrader autograde`` does) has no
roster, and nothing here applies to it.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import sqlite3
import unicodedata
from pathlib import Path
from typing import Dict, Iterable, List, Set

ADDED = Path("qkv-grades") / ".students-added"


def key(student: str) -> str:
    """How two ids are compared: in NFC, case-folded (``zoe\\u0308`` and ``Zoë`` are ``zoë``)."""
    return unicodedata.normalize("NFC", student).casefold()


def _students(course: Path) -> Dict[str, bool]:
    """The gradebook's student ids, each with whether a name, e-mail or LMS id was registered
    for it (read with sqlite, read-only: no gradebook, or one sqlite cannot read, has none)."""
    db = course / "gradebook.db"
    if not db.is_file():
        return {}
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            rows = con.execute("SELECT id, first_name, last_name, email, lms_user_id "
                               "FROM student").fetchall()
    except sqlite3.Error:
        return {}
    return {str(r[0]): any(r[1:]) for r in rows}


def added(course: Path) -> Set[str]:
    """The ids ``qkv grade`` added to the gradebook itself."""
    try:
        found = json.loads((course / ADDED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    return {s for s in found if isinstance(s, str)} if isinstance(found, list) else set()


def note_added(course: Path, students: Iterable[str]) -> None:
    """Keep that ``qkv grade`` added these ids to the gradebook (they are no roster)."""
    new = set(students) - added(course)
    if new:
        path = course / ADDED
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(sorted(added(course) | new), ensure_ascii=False),
                        encoding="utf-8")


def registered(course: Path) -> Set[str]:
    """The roster: the gradebook's students, less those ``qkv grade`` added and nobody has
    registered since (with a name or e-mail); empty where the course registers no one."""
    mine = added(course)
    return {s for s, named in _students(course).items() if named or s not in mine}


def closest(student: str, roster: Iterable[str]) -> str:
    """How a folder's id relates to the roster, in words, for its line."""
    roster = sorted(roster)
    same = [r for r in roster if key(r) == key(student)]
    if same:
        how = ("in another Unicode form (a zip made on macOS writes names decomposed, NFD)"
               if unicodedata.normalize("NFC", same[0]) == unicodedata.normalize("NFC", student)
               else "in another case")
        return f"it is the registered student {ascii(same[0])} written {how}"
    close = difflib.get_close_matches(key(student), [key(r) for r in roster], n=1, cutoff=0.6)
    if close:
        return "the closest registered id is " + ascii(next(r for r in roster
                                                            if key(r) == close[0]))
    return "no registered id is close to it"


def strangers(course: Path, assignment: str, students: Iterable[str]) -> List[str]:
    """A line for each submission folder of ``students`` that names no one on the roster (none
    where the course has no roster), and for each that is another student's id in another
    Unicode form or case (both in the gradebook: a roster that holds both, or the list of those
    ``qkv grade`` added lost). Ids are shown as ``ascii()`` writes them, so that
    ``'zoe\u0308'`` and ``'zo\xeb'`` differ on the screen as they do on disk."""
    everyone = set(_students(course))
    roster = registered(course)
    lines = []
    for s in sorted(set(students)):
        twins = sorted(r for r in everyone if r != s and key(r) == key(s))
        if roster and s not in roster:
            lines.append(
                f"{ascii(s)} {assignment}: NOT ON THE ROSTER: submitted/{ascii(s)[1:-1]}/ names "
                f"no registered student; {closest(s, roster)}. It is graded and written as a "
                "new student, flagged in formgrader, while the registered one exports no grade "
                "of it: rename the folder to the registered id (or register the student, with a "
                "name: `nbgrader db student add ID --last-name NAME`) and run again")
        elif twins:
            lines.append(
                f"{ascii(s)} {assignment}: ONE STUDENT UNDER TWO IDS: {closest(s, twins)}, and "
                "the gradebook holds both (the export flags both rows): rename "
                f"submitted/{ascii(s)[1:-1]}/ to the registered id and run again")
    return lines
