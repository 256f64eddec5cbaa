"""What a grading run says: one line per submission, and the closing lines."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from . import outdated
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
    seconds: float = 0.0
    #: Lines about submissions left out of the gradebook: a notebook under another name, a
    #: submission a merge found no current result file for.
    left_out: List[str] = field(default_factory=list)
    #: Lines about submission folders that name no one on the gradebook's roster (:mod:`.roster`).
    strangers: List[str] = field(default_factory=list)
    #: Lines about timestamps.csv: a line naming no collected student, a student with none.
    times: List[str] = field(default_factory=list)
    #: Lines about result files whose submission folder is gone, not written to the gradebook.
    orphans: List[str] = field(default_factory=list)
    #: ``(student, notebook)`` of each submission the grader failed on.
    not_graded: List[Tuple[str, str]] = field(default_factory=list)
    #: The gradebook's grades left from an earlier submission, flagged (:mod:`.outdated`).
    outdated: List[str] = field(default_factory=list)
    #: ``student assignment/notebook: grade id`` of each hand grade sent back for review (its
    #: answer's text changed since a person scored it).
    reopened: List[str] = field(default_factory=list)
    #: Submissions whose qkv_answers.json, graded before, is gone (a re-collect deleted it).
    answers_gone: List[str] = field(default_factory=list)
    #: ``--merge``: nothing was graded; how many submissions had no current result file.
    merged: bool = False
    not_merged: int = 0

    @property
    def errors(self) -> int:
        """How many submissions the grader failed on."""
        return len(self.not_graded)


def printable(text: str) -> str:
    """``text`` safe for a terminal: a control or format character (an escape sequence that
    moves the cursor or recolours, a right-to-left override) from a submission's messages or
    names is shown escaped, never acted on."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def summary_line(record: Dict[str, Any]) -> str:
    """One line for one submission: points, what failed, what stopped it, flags (escaped:
    :func:`printable`)."""
    return printable(_line(record))


def _line(record: Dict[str, Any]) -> str:
    name = f"{record['student']} {record['assignment']}/{record['notebook']}"
    line = f"{name}: {record['score']:g}/{record['max_score']:g}"
    if record.get("unreadable"):
        return (f"{name}: NOT GRADED, the notebook could not be read: {record['unreadable']}; "
                f"recorded as 0/{record['max_score']:g} and flagged for review until a "
                "readable notebook is collected and graded")
    failed = [f"{t['grade_id']} ({t.get('mistake') or what_failed(t) or t['status']})"
              for t in record["tests"] if t["status"] != PASS]
    if failed:
        line += "; failed " + ", ".join(failed)
    # What changed the code that was graded: a locked cell edited, an answer cell copied, code
    # past what is run.
    shown = ("edited the locked cell", "a second cell with id", "the cells the student added",
             "the answer cell")
    edits = [p for p in record.get("problems", []) if p.startswith(shown)]
    if edits:
        line += "; " + "; ".join(edits)
    if record.get("sandbox"):
        line += f"; SANDBOX STOPPED: {record['sandbox']}"
    if record.get("flags"):
        line += f"; FLAGGED for review ({len(record['flags'])}: {record['flags'][0]['detail']})"
    return line


def what_failed(test: Dict[str, Any]) -> str:
    """What the failing check said was wrong, in short, when it named no known mistake ("the
    mask is transposed"), from the call's recorded verdict."""
    for call in reversed(test.get("calls", [])):
        what = call.get("what") if isinstance(call, dict) and not call.get("passed") else None
        if isinstance(what, str) and what.strip():
            first = what.strip().split(";")[0].splitlines()[0]
            return first if len(first) <= 80 else first[:77] + "..."
    return ""


def course_option(course: Any) -> str:
    """`` --course DIR`` for a command the summary suggests, unless the course is the current
    folder (the default): run as printed, it must grade the same course."""
    from pathlib import Path

    return "" if Path(course).resolve() == Path.cwd().resolve() else f" --course {course}"


def report(summary: Summary, assignment: str, shard: Optional[Tuple[int, int]],
           course: Any = ".") -> str:
    """The run's closing lines."""
    rate = summary.graded / summary.seconds if summary.seconds and summary.graded else 0.0
    if summary.merged:  # graded nothing: what it merged, and what it could not
        lines = [f"qkv grade {assignment} --merge: {summary.current} submission(s) with a "
                 f"current result file, {summary.not_merged} NOT MERGED (below); nothing graded "
                 f"here; {summary.seconds:.1f} s"]
    else:
        lines = [f"qkv grade {assignment}: {summary.graded} graded, {summary.current} already "
                 f"graded (--force grades them again); of those graded, {summary.unreadable} "
                 f"unreadable, {summary.sandbox_failed} stopped by the sandbox, "
                 f"{summary.flagged} flagged for review; {summary.seconds:.1f} s "
                 f"({rate:.2f} notebooks/s)"]
    if summary.unreadable:
        lines.append(f"{summary.unreadable} submission(s) NOT GRADED because the notebook could "
                     "not be read (above, with how to fix it): each is recorded as 0 and "
                     "flagged until a readable notebook is collected and graded")
    if summary.errors:
        lines.append(f"{summary.errors} submission(s) NOT graded because the grader failed: "
                     "run the same command again")
    lines += map(printable, summary.left_out)
    lines += map(printable, summary.strangers)
    lines += map(printable, summary.orphans)
    lines += map(printable, summary.times)
    if summary.answers_gone:
        lines.append(printable(
            f"{len(summary.answers_gone)} submission(s) LOST their qkv_answers.json since the "
            "last grading (a re-collect with --force deletes it; their questions were judged "
            "on the notebook): copy it back and grade again: " + "; ".join(summary.answers_gone)))
    if summary.reopened:
        lines.append(printable(
            f"{len(summary.reopened)} hand grade(s) REOPENED for review (the answer changed "
            "since it was scored; the old score is kept until you save one in formgrader): "
            + "; ".join(summary.reopened)))
    if summary.outdated:
        lines.append(printable(outdated.summary_line(summary.outdated)))
    if shard is None:
        lines.append(f"gradebook.db and autograded/: {summary.written} submission(s) written "
                     "(the others unchanged since the last run)"
                     + (f"; {len(summary.left_out)} LEFT OUT (above)" if summary.left_out else ""))
    else:
        lines.append(f"shard {shard[0]}/{shard[1]}: result files written; when every shard "
                     f"is done, run `qkv grade {assignment} --merge{course_option(course)}` "
                     "to write the gradebook")
    return "\n".join(lines)
