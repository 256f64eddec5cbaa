"""What an assignment grades, read from the instructor's source, never from a submission.

For each notebook of an assignment, :func:`plan` reads the source (``solutions/<A>/<nb>.ipynb``,
nbgrader's source folder) and, for the autograded notebook and the instructor's own cells, the
release (``exercises/<A>/<nb>.ipynb``). It returns the notebook's :class:`Plan`: the set-up
cell, the answer cells' ids, the written answers and tasks (graded by a person), and every test
with its points and the check calls its cell makes, each with the exact arguments the cell
passes (read with :mod:`ast`; hidden tests included). A test cell whose call cannot be read
as data (a computed argument) is an error for the instructor, said before anything runs.

Seeds: a call with ``seed=None`` (the hidden tests) is given a seed drawn here, per student,
test and call, from a secret course key (``.qkv-grade-key`` in the course folder, created on
first use, readable by its owner only), so the same submission graded again draws the same
inputs and no student can know them in advance. A call without ``seed`` keeps the check's
default (the visible, fixed inputs the student saw).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..calls import DEFAULT, Call, check_calls
from ..nbgrader.graded import nbgrader_meta, text
from ..usage import UsageError, did_you_mean

SOURCES = ("solutions", "source")  # nbgrader's source folder: this course's, then the default
RELEASES = ("exercises", "release")
KEY_FILE = ".qkv-grade-key"
SETUP = "setup"
@dataclass(frozen=True)
class Test:
    """An autograded test cell: its id, points, calls and source (hidden tests included)."""

    grade_id: str
    points: float
    calls: Tuple[Call, ...]
    source: str


@dataclass(frozen=True)
class Plan:
    """What one notebook of an assignment grades.

    Args:
        assignment: e.g. ``04-scaling``.
        notebook: the notebook's name without ``.ipynb``.
        setup: the instructor's set-up cell.
        answers: the answer cells' ids (code cells the student writes), in order.
        written: ``grade id -> points`` of written answers and tasks (graded by a person).
        tests: the autograded test cells, in order.
        manual_tests: test cells that call no check (an experiment's asserts): left for a
            person, since only a check's data can be judged out of the student's reach.
        skeleton: the released notebook (plain JSON): the autograded notebook's frame.
        source: the source notebook (plain JSON): its test cells, hidden tests included.
        instructor_ids: every cell id of the release (a submission's cell with one of these
            ids, but not an answer's, is the instructor's and never the student's code).
        locked: the release's locked cells (set-up, tests): grade id -> source, to say who
            edited one (the edit changes nothing: the instructor's cell is what counts).
    """

    assignment: str
    notebook: str
    setup: str
    answers: Tuple[str, ...]
    written: Dict[str, float]
    tests: Tuple[Test, ...]
    manual_tests: Dict[str, float]
    skeleton: Dict[str, Any]
    source: Dict[str, Any]
    instructor_ids: Tuple[str, ...]
    locked: Dict[str, str] = field(default_factory=dict)

    def digest(self) -> str:
        """A fingerprint of what is graded (a result graded under another plan is stale)."""
        text = json.dumps([self.setup, self.answers, sorted(self.written.items()),
                           [(t.grade_id, t.points, [c.describe() for c in t.calls])
                            for t in self.tests], sorted(self.manual_tests.items())])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cells(nb: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [c for c in nb.get("cells", []) if isinstance(c, dict)]


def read_json(path: Path) -> Dict[str, Any]:
    """An instructor's notebook (trusted, but said clearly when it is broken)."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: cannot read the notebook ({e})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise UsageError(f"{path}: not a notebook")
    return nb


def notebooks(course: Path, assignment: str) -> List[Path]:
    """The source notebooks of an assignment.

    Raises:
        UsageError: no source folder holds the assignment (naming the close ones).
    """
    known = set()
    for folder in SOURCES:
        path = course / folder / assignment
        if path.is_dir():
            found = sorted(p for p in path.glob("*.ipynb") if not p.name.startswith("."))
            if found:
                return found
        if (course / folder).is_dir():
            known |= {p.name for p in (course / folder).iterdir() if p.is_dir()}
    if not known and not (course / "nbgrader_config.py").is_file() \
            and not (course / "gradebook.db").is_file():
        raise UsageError(f"no assignment {assignment!r}: {course} is not an nbgrader course "
                         f"folder (no nbgrader_config.py, "
                         f"gradebook.db, {' or '.join(SOURCES)}/): run the command in the course "
                         "folder, or give it with --course DIR")
    raise UsageError(f"no assignment {assignment!r} in {' or '.join(SOURCES)}/ of {course}"
                     + did_you_mean(assignment, known))


def plan(source_path: Path) -> Plan:
    """Read one source notebook (and its release, when there is one) into a :class:`Plan`."""
    source = read_json(source_path)
    assignment, notebook = source_path.parent.name, source_path.stem
    skeleton = source
    for folder in RELEASES:
        released = source_path.parents[2] / folder / assignment / source_path.name
        if released.is_file():
            skeleton = read_json(released)
            break
    setup, answers, written, tests, manual = "", [], {}, [], {}
    for cell in _cells(source):
        meta = nbgrader_meta(cell)
        gid, kind = meta.get("grade_id"), cell.get("cell_type")
        if not gid:
            continue
        points = float(meta.get("points", 0) or 0)
        if gid == SETUP and kind == "code":
            setup = text(cell.get("source"))
        elif meta.get("task") or (meta.get("solution") and meta.get("grade")):
            written[gid] = points
        elif meta.get("solution") and kind == "code":
            answers.append(gid)
        elif meta.get("grade") and kind == "code":
            calls = check_calls(text(cell.get("source")), gid)
            if calls:
                tests.append(Test(gid, points, calls, text(cell.get("source"))))
            else:
                manual[gid] = points
    ids = tuple(str(c["id"]) for c in _cells(skeleton) if isinstance(c.get("id"), str))
    locked = {nbgrader_meta(c)["grade_id"]: text(c.get("source")) for c in _cells(skeleton)
              if nbgrader_meta(c).get("locked") and nbgrader_meta(c).get("grade_id")}
    return Plan(assignment, notebook, setup, tuple(answers), written, tuple(tests), manual,
                skeleton, source, ids, locked)


def course_key(course: Path) -> bytes:
    """The course's secret key for drawing seeds, created (owner-only) on first use."""
    path = course / KEY_FILE
    if not path.exists():
        # Written whole under a name of its own (unique across machines and containers, where
        # pids repeat), then linked in place: shards started together on a fresh course all
        # end up with the one key that was linked first, never a half-written file.
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=course)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(secrets.token_hex(32) + "\n")
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            Path(tmp).unlink(missing_ok=True)
    key = path.read_text(encoding="ascii").strip()
    if len(key) < 32:
        raise UsageError(f"{path} is not a key qkv grade wrote: move it away to start a new one")
    return key.encode()


def draw_seed(key: bytes, *parts: str) -> int:
    """A seed in ``[0, 2**32)`` from the key and what it is for (student, test, call)."""
    digest = hmac.new(key, "\0".join(parts).encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big")


def seed_for(call: Call, key: bytes, student: str, plan_: Plan, test: str,
             index: int) -> Optional[int]:
    """The seed a call is judged with: its literal one, the check's default, or one drawn."""
    if call.seed is DEFAULT:
        return 0
    if call.seed is None:
        return draw_seed(key, plan_.assignment, plan_.notebook, student, test, str(index))
    return call.seed
