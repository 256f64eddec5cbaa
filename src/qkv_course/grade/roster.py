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


def hand_work(course: Path, student: str) -> List[str]:
    """``assignment/notebook: cell`` of each score, extra credit or comment a person gave
    ``student`` in the gradebook (read with sqlite, read-only; none where it cannot be read):
    what removing the student from the gradebook would lose."""
    db = course / "gradebook.db"
    if not db.is_file():
        return []
    where = ("JOIN submitted_notebook sn ON x.notebook_id = sn.id "
             "JOIN submitted_assignment sa ON sn.assignment_id = sa.id "
             "JOIN assignment a ON sa.assignment_id = a.id "
             "JOIN notebook n ON sn.notebook_id = n.id "
             "JOIN base_cell c ON x.cell_id = c.id WHERE sa.student_id = ? AND ")
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            rows = con.execute(
                "SELECT a.name, n.name, c.name FROM grade x " + where +
                "(x.manual_score IS NOT NULL OR x.extra_credit IS NOT NULL) UNION "
                "SELECT a.name, n.name, c.name FROM comment x " + where +
                "x.manual_comment IS NOT NULL AND x.manual_comment != ''",
                (student, student)).fetchall()
    except sqlite3.Error:
        return []
    return sorted(f"{a}/{n}: {c}" for a, n, c in rows)


def _phantom_advice(course: Path, phantom: str, student: str) -> str:
    """How to take ``phantom`` (an id ``qkv grade`` added, nobody registered) out of the course,
    losing nothing of the instructor's: what is left of it, and the commands."""
    folder = ascii(phantom)[1:-1]
    shown = ascii(student)[1:-1]
    steps = []
    left = sorted(p.name for p in (course / "submitted" / phantom).glob("*") if p.is_dir())
    if left:
        steps.append(f"submitted/{folder}/ still holds {', '.join(left)}: move each to "
                     f"submitted/{shown}/ (or away, if {shown} handed it in there already)")
    kept = hand_work(course, phantom)
    if kept:
        steps.append(f"the gradebook holds {len(kept)} grade(s) or comment(s) YOU gave "
                     f"{ascii(phantom)} ({'; '.join(kept[:5])}{'; ...' if len(kept) > 5 else ''}"
                     f"), which removing it deletes: give them again to {ascii(student)} in "
                     "formgrader first (nothing here removes them)")
    steps.append(f"{'then ' if steps else ''}`nbgrader db student remove {folder} --force` and `rm -rf "
                 f"qkv-grades/{folder} autograded/{folder} feedback/{folder}`")
    return "; ".join(steps)


def strangers(course: Path, assignment: str, students: Iterable[str]) -> List[str]:
    """A line for each submission folder of ``students`` that names no one on the roster (none
    where the course has no roster), and for each that is another student's id in another
    Unicode form or case (both in the gradebook: a roster that holds both, the list of those
    ``qkv grade`` added lost, or an id it added for a misnamed folder since renamed: that one,
    the phantom, is named as such, with how to remove it). Ids are shown as ``ascii()``
    writes them, so that ``'zoe\u0308'`` and ``'zo\xeb'`` differ on the screen as they do on
    disk."""
    everyone = set(_students(course))
    roster = registered(course)
    mine = added(course)
    lines = []
    for s in sorted(set(students)):
        twins = sorted(r for r in everyone if r != s and key(r) == key(s))
        # Ids qkv grade added itself, nobody registered: never "the registered student".
        # (Where no one is registered, only one whose folder is gone: else which is right?)
        phantoms = [t for t in twins if t in mine and t not in roster and (
            s in roster or not (course / "submitted" / t).is_dir())]
        if roster and s not in roster:
            lines.append(
                f"{ascii(s)} {assignment}: NOT ON THE ROSTER: submitted/{ascii(s)[1:-1]}/ names "
                f"no registered student; {closest(s, roster)}. It is graded and written as a "
                "new student, flagged in formgrader, while the registered one exports no grade "
                "of it: rename the folder to the registered id (or register the student, with a "
                "name: `nbgrader db student add ID --last-name NAME`) and run again (the next "
                "run then says how to remove the id this one adds)")
        elif phantoms:
            how = "registered student" if s in roster else "student whose folder is there now"
            lines.extend(
                f"{ascii(s)} {assignment}: ONE STUDENT UNDER TWO IDS: the gradebook also holds "
                f"{ascii(t)}, an id qkv grade added itself for a folder submitted/"
                f"{ascii(t)[1:-1]}/ (nobody registered it), the same id in another "
                f"{'case' if unicodedata.normalize('NFC', t) != unicodedata.normalize('NFC', s) else 'Unicode form'}; "
                f"{ascii(s)} is the {how}, and submitted/{ascii(s)[1:-1]}/ is right: leave it. "
                f"Both rows are flagged in the export until {ascii(t)} is removed: "
                + _phantom_advice(course, t, s) for t in phantoms)
        elif twins:
            lines.append(
                f"{ascii(s)} {assignment}: ONE STUDENT UNDER TWO IDS: {closest(s, twins)}, and "
                "the gradebook holds both (the export flags both rows): rename "
                f"submitted/{ascii(s)[1:-1]}/ to the registered id and run again")
    return lines
