"""The report of ``qkv progress``, in a student's words: one line per graded cell (pass or fail,
its points), a failure's message in full, the ungraded cells that failed, the totals.
:mod:`.command` prints it for each notebook run, :mod:`.notebook` one line per check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Tuple

from ..nbgrader.graded import (BY_HAND, ERROR, NOT_WRITTEN, PASS, TIMED_OUT, TIMEOUT, Outcome,
                               Question, cell_outcome, is_graded, nbgrader_meta)

_WORDS = {PASS: "pass", BY_HAND: "by hand", TIMEOUT: "TIMEOUT", ERROR: "ERROR"}
_INDENT = " " * 11


def _other_failures(nb: Any) -> List[Tuple[str, Outcome]]:
    """Ungraded cells that failed: often why a test cell after them cannot find an answer."""
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or is_graded(cell):
            continue
        outcome = cell_outcome(cell)
        if outcome.status in (ERROR, TIMEOUT) and cell.get("outputs"):
            name = nbgrader_meta(cell).get("grade_id")
            found.append((f"cell {i + 1}" + (f" ({name})" if name else _first_line(cell)),
                          outcome))
    return found


def _first_line(cell: Any) -> str:
    """``, starting "x = causal_mask(4)"``: Jupyter and Colab number no cells, so a cell is
    told by its first line of code."""
    lines = [line.strip() for line in str(cell.get("source", "")).splitlines()]
    first = next((line for line in lines if line and not line.startswith("#")), "")
    if not first:
        return ""
    return f', starting "{first[:50]}{"..." if len(first) > 50 else ""}"'



def format_outcome(name: str, outcome: Outcome, score: str = "", note: str = "",
                   width: int = 0) -> str:
    """One reported line (status, name padded to ``width``, score), then a failure's message
    in full, indented."""
    status = _WORDS.get(outcome.status, outcome.status.upper())
    head = f"  {status:<8} {name:<{width}}" + (f"  {score}" if score else "")
    lines = [head.rstrip()]
    message = outcome.message if outcome.status != BY_HAND else ""
    if note:
        message = f"{message} {note}" if message else note
    lines += [_INDENT + line for line in message.splitlines()]
    return "\n".join(lines)


def format_notebook(path: Path, found: List[Question], others: List[Tuple[str, Outcome]],
                    timeout: int) -> str:
    """The report of one executed notebook: its assignment, every question, the totals."""
    lines = [f"{path.parent.name or path.stem}: {path}"]
    width = max([len(q.grade_id) for q in found] + [0])
    for q in found:
        if q.by_hand:
            unwritten = q.outcome.message == NOT_WRITTEN  # a written answer left blank
            lines.append(format_outcome(q.grade_id, q.outcome, (
                f"{q.points:g} points, not written yet (0 until you write it)" if unwritten
                else f"{q.points:g} points, graded by hand"), width=width))
        else:
            # A cell interrupted at its limit (a check's own time budget names its limit).
            note = (f"(limit: {timeout} s per cell)"
                    if q.outcome.status == TIMEOUT and q.outcome.message == TIMED_OUT else "")
            lines.append(format_outcome(q.grade_id, q.outcome, f"{q.earned:g}/{q.points:g}",
                                        note, width))
    if others:
        lines.append("  other cells that failed (a test after them may not find your answer):")
        lines += [format_outcome(name, outcome) for name, outcome in others]
    tests = [q for q in found if not q.by_hand]
    total = (f"  total: {sum(q.earned for q in tests):g}/{sum(q.points for q in tests):g} points "
             f"from the tests ({sum(q.outcome.status == PASS for q in tests)} of {len(tests)} "
             "pass)")
    by_hand = sum(q.points for q in found if q.by_hand)
    lines.append(total + (f"; {by_hand:g} more graded by hand" if by_hand else ""))
    return "\n".join(lines) + "\n"
