"""What a grading run says: one line per submission, and the closing lines."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .judge import PASS


@dataclass
class Summary:
    """What a run did: a line per submission, and counts."""

    lines: List[str] = field(default_factory=list)
    graded: int = 0
    current: int = 0
    unreadable: int = 0
    sandbox_failed: int = 0
    flagged: int = 0
    written: int = 0
    errors: int = 0
    seconds: float = 0.0


def summary_line(record: Dict[str, Any]) -> str:
    """One line for one submission: points, what failed, what stopped it, flags."""
    name = f"{record['student']} {record['assignment']}/{record['notebook']}"
    line = f"{name}: {record['score']:g}/{record['max_score']:g}"
    if record.get("unreadable"):
        return line + f" (UNREADABLE: {record['unreadable']})"
    failed = [f"{t['grade_id']} ({t.get('mistake') or t['status']})"
              for t in record["tests"] if t["status"] != PASS]
    if failed:
        line += "; failed " + ", ".join(failed)
    edits = [p for p in record.get("problems", []) if p.startswith("edited the locked cell")]
    if edits:
        line += "; " + "; ".join(edits)
    if record.get("sandbox"):
        line += f"; SANDBOX STOPPED: {record['sandbox']}"
    if record.get("flags"):
        line += f"; FLAGGED for review ({len(record['flags'])}: {record['flags'][0]['detail']})"
    return line


def report(summary: Summary, assignment: str, shard: Optional[Tuple[int, int]]) -> str:
    """The run's closing lines."""
    rate = summary.graded / summary.seconds if summary.seconds and summary.graded else 0.0
    lines = [f"qkv grade {assignment}: {summary.graded} graded, {summary.current} already "
             f"graded (--force grades them again), {summary.unreadable} unreadable, "
             f"{summary.sandbox_failed} stopped by the sandbox, {summary.flagged} flagged for "
             f"review; {summary.seconds:.1f} s ({rate:.2f} notebooks/s)"]
    if summary.errors:
        lines.append(f"{summary.errors} submission(s) NOT graded because the grader failed: "
                     "run the same command again")
    if shard is None:
        lines.append(f"gradebook.db and autograded/: {summary.written} submission(s) written")
    else:
        lines.append(f"shard {shard[0]}/{shard[1]}: result files written; when every shard "
                     f"is done, run `qkv grade {assignment} --merge` to write the gradebook")
    return "\n".join(lines)
