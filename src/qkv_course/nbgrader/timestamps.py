"""``downloaded/<assignment>/timestamps.csv``: the submission times the collector
(:mod:`.collect`) gives each student's files, and what in it reaches no one.

A line whose id names no collected student (the LMS list says ``Frank`` while the file was
renamed to the registered ``frank``), or a collected student with no line, left that
submission without a time: graded as on time, exported with full marks, in silence (instr13).
:func:`mismatches` says each such case; ``zip_collect`` logs it as a warning and ``qkv grade``
names it in its summary, and neither fails for it. Imports nothing of nbgrader.
"""

from __future__ import annotations

import csv
import difflib
from pathlib import Path
from typing import Dict, Iterable, List, Tuple

#: The file's name, in ``downloaded/<assignment>/`` (beside ``archive/``).
NAME = "timestamps.csv"


def path_of(course: Path, assignment: str) -> Path:
    return course / "downloaded" / assignment / NAME


def parse(path: Path) -> Tuple[Dict[str, str], List[Tuple[int, str]]]:
    """``(student id -> time, [(line number, line) of each line that is not <id>,<time>])``;
    blank lines, ``#`` comments and a first line ``student_id,...`` are skipped."""
    stamps: Dict[str, str] = {}
    bad: List[Tuple[int, str]] = []
    with open(path, newline="", encoding="utf-8") as fh:
        for n, row in enumerate(csv.reader(fh), 1):
            cells = [c.strip() for c in row]
            if not any(cells) or cells[0].startswith("#") or \
                    (n == 1 and cells[0].lower() in ("student_id", "student")):
                continue
            if len(cells) != 2 or not all(cells):
                bad.append((n, ",".join(row)))
                continue
            stamps[cells[0]] = cells[1]
    return stamps, bad


def mismatches(stamps: Dict[str, str], collected: Iterable[str], where: str,
               label: str = "") -> List[str]:
    """A sentence for each line of ``stamps`` that names no student of ``collected``, and for
    each collected student with no line (none where there is no timestamps.csv: pass
    ``stamps`` only when the file exists); ``label`` follows the id (`` 06-masking``)."""
    from ..grade.roster import key  # ids compared as the roster compares them

    collected = sorted(set(collected))
    lines = []
    for s in sorted(set(stamps) - set(collected)):
        same = [c for c in collected if key(c) == key(s) and c not in stamps]
        near = same or [c for c in collected if c not in stamps and key(c) in
                        difflib.get_close_matches(key(s), [key(x) for x in collected],
                                                  n=1, cutoff=0.6)]
        hint = (f" (the file of {ascii(near[0])}, renamed? then write {ascii(near[0])} in its "
                "line too)") if near else ""
        lines.append(f"{ascii(s)}{label}: {where} gives a time ({stamps[s]}) to an id no collected "
                     f"file belongs to: that time reaches no one{hint}")
    for s in collected:
        if s not in stamps:
            lines.append(f"{ascii(s)}{label}: NO TIME, {where} has no line for this student: the "
                         "submission is collected without a time, so graded as on time (no "
                         "late penalty); add its line and collect again (`nbgrader zip_collect "
                         "--force`)")
    return lines


def in_course(course: Path, assignment: str) -> List[str]:
    """What ``qkv grade`` says of ``downloaded/<assignment>/timestamps.csv`` (nothing where
    there is none): :func:`mismatches` against the submission folders, and each folder whose
    student has a line but that holds no ``timestamp.txt`` (collected before the line was
    written)."""
    path = path_of(course, assignment)
    if not path.is_file():
        return []
    try:
        stamps, _ = parse(path)
    except (OSError, UnicodeDecodeError, csv.Error):
        return []
    folder = course / "submitted"
    collected = sorted(p.parent.name for p in folder.glob(f"*/{assignment}")
                       if p.is_dir() and not p.parent.name.startswith("."))
    where = f"downloaded/{assignment}/{NAME}"
    lines = mismatches(stamps, collected, where, f" {assignment}")
    lines += [f"{ascii(s)} {assignment}: NO TIME in submitted/{ascii(s)[1:-1]}/{assignment}/"
              f"timestamp.txt, though {where} has its line: graded as on time; collect again "
              f"(`nbgrader zip_collect --force {assignment}`)"
              for s in collected if s in stamps
              and not (folder / s / assignment / "timestamp.txt").is_file()]
    return lines
