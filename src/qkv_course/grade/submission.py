"""A submitted notebook, read as untrusted data: which cells are the student's code.

A submission is a JSON file a student made: it may claim any schema version, carry any
metadata, repeat cell ids, hold huge outputs or not be a notebook at all. Nothing in it says
what is graded or how (that is the instructor's :class:`~.plan.Plan`). From it this module
takes only text: the source of each answer cell (matched by the instructor's ids: the cell's
nbgrader ``grade_id`` or its cell ``id``, the first cell claiming an id wins), the written
answers and any other markdown the student wrote (for the autograded notebook and formgrader,
never run), and the code cells the student added.
Test cells, the set-up cell and the instructor's other cells are never taken from it (the
instructor's own are run instead), and outputs are never read.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .plan import SETUP, Plan, text
from .notebook_file import Unreadable

MAX_CELL = 1 << 20  # characters of one cell's source kept
#: Characters of code the student added (cells of their own) that are run and kept: an honest
#: notebook adds a few thousand; every character is copied into the result file and the
#: autograded notebook, in the trusted grader's memory.
MAX_ADDED = 4 << 20
MAX_PROSE = 16 << 20  # characters of markdown (pasted images included) kept for a person


@dataclass
class Submission:
    """The parts of a submitted notebook that are the student's.

    Args:
        answers: answer id -> the student's source.
        written: written answer id -> its text (markdown).
        added: ``(anchor, source)`` of each code cell the student added, anchored to the id of
            the instructor's cell it follows (None: before any).
        notes: ``(anchor, source, attachments)`` of each markdown cell the student added (an
            answer to a task written below it, say): for a person to read, never run.
        edited: cell id -> ``(source, attachments)``, for the release's markdown cells that
            are not locked and that the student wrote in ("*Your interpretation:*").
            ``attachments``: the images pasted into the cell, as nbformat keeps them, or None.
        problems: what was odd about the file (duplicate ids, cells that are not cells).
    """

    answers: Dict[str, str] = field(default_factory=dict)
    written: Dict[str, str] = field(default_factory=dict)
    added: List[Tuple[Optional[str], str]] = field(default_factory=list)
    notes: List[Tuple[Optional[str], str, Any]] = field(default_factory=list)
    edited: Dict[str, Tuple[str, Any]] = field(default_factory=dict)
    problems: List[str] = field(default_factory=list)


def _meta(cell: Dict[str, Any]) -> Dict[str, Any]:
    meta = cell.get("metadata")
    nb = meta.get("nbgrader") if isinstance(meta, dict) else None
    return nb if isinstance(nb, dict) else {}


def _ids(cell: Dict[str, Any]) -> List[str]:
    """The ids a cell claims: its nbgrader grade id, then its cell id."""
    found = [_meta(cell).get("grade_id"), cell.get("id")]
    return [i for i in found if isinstance(i, str) and i]


def _aligned(plan: Plan, cells: List[Any], claimable: set) -> Dict[int, str]:
    """For a notebook saved without cell ids (Colab, or Jupyter before nbformat 4.5, keeps
    none): submitted cell index -> the id of the instructor's cell it is, by the cells' order
    and text (difflib's alignment of the two lists of sources: a cell the same as released, or
    one edited in place of it). Empty when the notebook has its ids."""
    if any(isinstance(c, dict) and c.get("id") for c in cells):
        return {}
    released = [c for c in plan.skeleton.get("cells", []) if isinstance(c, dict)]

    def key(c: Any) -> str:
        return f"{c.get('cell_type')}:{text(c.get('source')).strip()}" if isinstance(c, dict) else ""

    found: Dict[int, str] = {}
    matcher = difflib.SequenceMatcher(None, [key(c) for c in released], [key(c) for c in cells],
                                      autojunk=False)
    for op, r0, r1, s0, s1 in matcher.get_opcodes():
        if op == "equal" or (op == "replace" and r1 - r0 == s1 - s0):
            for r, s in zip(range(r0, r1), range(s0, s1)):
                claimed = [x for x in _ids(released[r]) if x in claimable]
                same_kind = isinstance(cells[s], dict) and \
                    released[r].get("cell_type") == cells[s].get("cell_type")
                if claimed and same_kind:
                    found[s] = claimed[0]
    return found


def read(data: Any, plan: Plan) -> Submission:
    """Take the student's parts out of a submitted notebook's JSON.

    Args:
        data: the parsed JSON (anything).
        plan: the instructor's plan of the notebook.

    Raises:
        Unreadable: the JSON is not a notebook (no list of cells).
    """
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise Unreadable("not a notebook (no list of cells)")
    answers, written = set(plan.answers), set(plan.written)
    instructor = set(plan.instructor_ids) | {t.grade_id for t in plan.tests}
    instructor |= set(plan.manual_tests) | {SETUP}
    # The release's markdown cells a student may write in (not locked): id -> released text.
    free = {str(c["id"]): text(c.get("source")) for c in plan.skeleton.get("cells", [])
            if isinstance(c, dict) and c.get("cell_type") == "markdown"
            and isinstance(c.get("id"), str) and not _meta(c).get("locked")}
    aligned = _aligned(plan, data["cells"], instructor | set(free))
    sub, seen, anchor, prose, added = Submission(), set(), None, [0], [0]

    def add_code(source: str) -> None:
        """A cell of the student's own, run after ``anchor``; counted against :data:`MAX_ADDED`."""
        added[0] += len(source)
        if added[0] <= MAX_ADDED:
            sub.added.append((anchor, source))

    def kept(cell: Dict[str, Any], source: str) -> Optional[Tuple[str, Any]]:
        """A markdown cell's ``(source, pasted images)``, counted against :data:`MAX_PROSE`;
        None past it."""
        pasted = _attachments(cell)
        prose[0] += len(source) + _size(pasted)
        return (source, pasted) if prose[0] <= MAX_PROSE else None

    for i, cell in enumerate(data["cells"]):
        if not isinstance(cell, dict):
            sub.problems.append(f"cell {i} is not a cell")
            continue
        source = text(cell.get("source"))[:MAX_CELL]
        kind = cell.get("cell_type")
        ids = _ids(cell)
        mine = next((x for x in ids if x in answers or x in written), None)
        if mine is not None and mine in seen:
            # A copy of an answer cell (Jupyter's copy keeps the grade id): the kernel ran it
            # after the first, so it runs after the first, as a cell the student added.
            if kind == "code" and source.strip():
                sub.problems.append(f"a second cell with id {mine} (cell {i}): run after the "
                                    "first, as a cell the student added")
                add_code(source)
            elif mine in sub.written and source.strip():
                sub.problems.append(f"a second cell with id {mine} (cell {i}): its text follows "
                                    "the first's")
                sub.written[mine] += "\n\n" + source
            continue
        if mine is not None:
            seen.add(mine)
            anchor = mine
            if mine in answers and kind == "code":
                sub.answers[mine] = source
            elif mine in plan.locked:  # a task's text is the instructor's, as nbgrader keeps it
                if source.strip() != plan.locked[mine].strip():
                    sub.problems.append(f"edited the locked cell {mine}: what they wrote there "
                                        "follows it as a cell of its own")
                    note = kept(cell, source)
                    if note:
                        sub.notes.append((mine, *note))
            elif mine in written:
                sub.written[mine] = source
            continue
        theirs = next((x for x in ids if x in instructor), None)
        if theirs is None and not any(x in free for x in ids):
            same = aligned.get(i)
            theirs = same if same is not None and same not in seen else None
        if theirs is not None:
            # The instructor's cell (a test, the set-up, a demonstration), or a copy of it:
            # never run from the submission, whatever it now holds.
            if theirs in seen:
                sub.problems.append(f"a copy of the instructor's cell {theirs} (cell {i}) was "
                                    "left out")
            elif theirs in plan.locked and source.strip() != plan.locked[theirs].strip():
                sub.problems.append(f"edited the locked cell {theirs} (the instructor's is "
                                    "what counts)")
            elif kind == "markdown" and theirs in free and source.strip() != free[theirs].strip():
                note = kept(cell, source)
                if note:
                    sub.edited[theirs] = note
            seen.add(theirs)
            anchor = theirs
            continue
        if kind == "code" and source.strip():
            add_code(source)
        elif kind == "markdown" and source.strip():
            note = kept(cell, source)
            if note:
                sub.notes.append((anchor, *note))
    for gid in plan.answers:
        if gid not in sub.answers:
            sub.problems.append(f"the answer cell {gid} is not in the submission (deleted, or "
                                "its metadata lost): the released stub was not run, so a cell "
                                "the student added may define the answer")
    if added[0] > MAX_ADDED:
        sub.problems.append(f"the cells the student added hold {added[0]:,} characters of code: "
                            f"those past the first {MAX_ADDED:,} were neither run nor kept")
    if prose[0] > MAX_PROSE:
        sub.problems.append(f"the markdown the student wrote (with pasted images) holds "
                            f"{prose[0]:,} characters: what "
                            f"came after the first {MAX_PROSE:,} was left out of the autograded "
                            "notebook (the submitted file holds all of it)")
    return sub


def _attachments(cell: Dict[str, Any]) -> Any:
    """A markdown cell's pasted images (``{name: {mime type: base64 text}}``), as nbformat
    keeps them and formgrader shows them; None when it has none, or anything else."""
    found = cell.get("attachments")
    if not isinstance(found, dict) or not found:
        return None
    ok = all(isinstance(name, str) and isinstance(data, dict) and data and all(
        isinstance(mime, str) and _MIME.fullmatch(mime) and isinstance(text, str)
        for mime, text in data.items()) for name, data in found.items())
    return found if ok else None


_MIME = re.compile(r"image/[a-zA-Z0-9.+-]+")  # pasted images: what a notebook's schema allows


def _size(attachments: Any) -> int:
    return sum(len(text) for data in (attachments or {}).values() for text in data.values())


def cells_to_run(plan: Plan, sub: Submission) -> List[Tuple[str, str]]:
    """The code the sandbox runs, in notebook order: ``(label, source)``.

    The instructor's set-up cell first, then the release's cells in order: the instructor's
    own code cells as released, each answer cell as the student wrote it (not at all when the
    submission lacks it), test cells never; each cell the student added right after the
    instructor's cell it followed in the submission.
    """
    extra: Dict[Optional[str], List[str]] = {}
    for anchor, source in sub.added:
        extra.setdefault(anchor, []).append(source)
    tests = {t.grade_id for t in plan.tests} | set(plan.manual_tests)
    run = [(SETUP, plan.setup)] + [("added", s) for s in extra.get(None, [])]
    for cell in plan.skeleton.get("cells", []):
        meta = _meta(cell)
        ids = _ids(cell)
        gid = meta.get("grade_id") or (ids[0] if ids else "")
        if cell.get("cell_type") == "code" and gid != SETUP and gid not in tests:
            if gid in sub.answers:
                run.append((gid, sub.answers[gid]))
            elif gid in plan.answers:
                # Missing from the submission (deleted, its metadata lost): the released stub
                # would only raise, or define an answer that does, over one the student may
                # have written in a cell of their own.
                pass
            else:
                run.append((f"instructor:{gid}", text(cell.get("source"))))
        for anchor in ids:
            run += [("added", s) for s in extra.pop(anchor, [])]
    run += [("added", s) for rest in extra.values() for s in rest]  # anchors the release lacks
    return run
