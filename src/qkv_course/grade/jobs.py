"""Which submissions a grading run is about: ``--shard K/N`` (:func:`parse_shard`,
:func:`in_shard`), the jobs, one ``(student, plan, notebook)`` each (:func:`find_jobs`), and
what a submission folder holds that cannot be graded (:func:`strays`,
:func:`handed_in_otherwise`), said in the run's summary (:mod:`.run`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..usage import UsageError, did_you_mean
from .one import Job
from .plan import Plan


def parse_shard(value: Optional[str]) -> Optional[Tuple[int, int]]:
    """``"K/N"`` as ``(K, N)`` with ``1 <= K <= N``; None for None.

    Raises:
        UsageError: anything else.
    """
    if value is None:
        return None
    try:
        k, n = (int(x) for x in value.split("/"))
    except ValueError:
        raise UsageError(f"--shard {value!r}: write it K/N, e.g. --shard 2/8 (the second of "
                         "eight shards)") from None
    if not 1 <= k <= n:
        raise UsageError(f"--shard {value}: K must be from 1 to N (got K={k}, N={n})")
    return k, n


def shard_of(student: str, n: int) -> int:
    """The shard (1 to ``n``) of a student id: from the SHA-256 of the id's bytes, so it is
    the same in every run and on every machine, whoever else handed in (a folder collected
    between two shards' starts moves no one else)."""
    digest = hashlib.sha256(student.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % n + 1


def in_shard(students: Sequence[str], shard: Optional[Tuple[int, int]]) -> List[str]:
    """This shard's students, sorted: those whose :func:`shard_of` is K (a split by position
    in the list shifted everyone after a folder collected between two shards' starts)."""
    ordered = sorted(set(students))
    if shard is None:
        return ordered
    k, n = shard
    return [s for s in ordered if shard_of(s, n) == k]


def find_jobs(course: Path, assignment: str, plans: Dict[str, Plan],
              only: Optional[Sequence[str]], shard: Optional[Tuple[int, int]]) -> List[Job]:
    """The submissions this run is about (current or not).

    Raises:
        UsageError: no submissions, or a ``--student`` who submitted nothing.
    """
    folder = course / "submitted"
    present = [s for s in (p.parent.name for p in sorted(folder.glob(f"*/{assignment}")))
               if not s.startswith(".")] if folder.is_dir() else []
    if not present:
        raise UsageError(f"no submissions of {assignment} in {folder}/<student>/{assignment}/: "
                         "collect them first (nbgrader zip_collect, or copy them there)")
    if only:
        missing = [s for s in only if s not in present]
        if missing:
            raise UsageError(f"no submission of {assignment} from {', '.join(missing)}"
                             + did_you_mean(missing[0], present))
        present = [s for s in present if s in set(only)]
    return [(s, p, folder / s / assignment / f"{name}.ipynb")
            for s in in_shard(present, shard) for name, p in plans.items()
            if (folder / s / assignment / f"{name}.ipynb").is_file()]


def _submission_folders(course: Path, assignment: str,
                        only: Optional[Sequence[str]]) -> List[Path]:
    """``submitted/<student>/<assignment>/`` of every student, or of ``only``."""
    return [f for f in sorted((course / "submitted").glob(f"*/{assignment}"))
            if not f.parent.name.startswith(".") and (not only or f.parent.name in only)]


def handed_in_otherwise(course: Path, assignment: str, plans: Dict[str, Plan],
                        only: Optional[Sequence[str]]) -> set:
    """``(student, notebook)`` of each submission folder without that notebook: what the
    student handed in now (``scaling (1).ipynb``, or nothing) is not graded, so a grade of an
    earlier one is not current."""
    return {(folder.parent.name, name)
            for folder in _submission_folders(course, assignment, only)
            for name in plans if not (folder / f"{name}.ipynb").is_file()}


def strays(course: Path, assignment: str, plans: Dict[str, Plan],
           only: Optional[Sequence[str]]) -> List[str]:
    """A line for each submitted notebook whose name is none of the assignment's (``scaling
    (1).ipynb``: a copy renamed by a browser), and for each submission folder with no notebook
    at all, of every student or of ``only``."""
    names = ", ".join(f"{n}.ipynb" for n in plans)
    lines = []
    for folder in _submission_folders(course, assignment, only):
        notebooks = [p for p in sorted(folder.glob("*.ipynb")) if not p.name.startswith(".")]
        graded = [f"{n}.ipynb" for n in plans if (folder / f"{n}.ipynb").is_file()]
        # Beside the notebook of that name, a rename would replace what was graded.
        advice = (f"{', '.join(graded)} beside it was graded; if this one is the student's "
                  "work, decide with the student which counts, then move the other away" if
                  graded else "rename it and run the command again")
        lines += [f"{folder.parent.name} {assignment}/{path.name}: NOT GRADED, not a notebook of "
                  f"the assignment ({names}): {advice}"
                  for path in notebooks if path.stem not in plans]
        # Nothing to grade and nothing named above (a folder with only a timestamp, or a
        # folder called masking.ipynb): said, not skipped in silence.
        if not any((folder / f"{n}.ipynb").is_file() for n in plans) and \
                all(p.stem in plans for p in notebooks):
            lines.append(f"{folder.parent.name} {assignment}: NOT GRADED, no notebook in "
                         f"submitted/{folder.parent.name}/{assignment}/ (expected {names}): "
                         "collect the submission again")
    return lines
