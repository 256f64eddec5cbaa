"""One submission graded: its notebook read, its cells run and its checks judged in one fresh
sandbox, then its record (scores, flags, what each cell did) built by this process alone.

:func:`grade_one` is what :mod:`.run` does for each student, and what the Gradescope
autograder does for its one upload; nothing here writes a file.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from . import checks_api, flags, judge, notebook_file, records, submission
from .plan import SETUP, Plan, text

Job = Tuple[str, Plan, Path]  # student, the notebook's plan, the submitted file


def _record(student: str, p: Plan, sha: str, sub: submission.Submission,
            tests: List[judge.TestResult], cells: List[Dict[str, str]],
            sandbox: str, seconds: float, answers: Optional[Dict[str, Any]] = None,
            answers_problem: str = "") -> Dict[str, Any]:
    tests_json = [t.to_json() for t in tests]
    return {"student": student, "assignment": p.assignment, "notebook": p.notebook,
            "plan": p.digest(), "submission_sha256": sha, "graded_at": records.now(),
            "seconds": round(seconds, 3), "tests": tests_json,
            "score": sum(t.earned for t in tests), "max_score": sum(t.points for t in p.tests),
            "manual_tests": p.manual_tests, "answers": sub.answers, "written": sub.written,
            "added": [list(a) for a in sub.added], "notes": [list(n) for n in sub.notes],
            "edited": {k: list(v) for k, v in sub.edited.items()}, "problems": sub.problems,
            "cells": cells,
            "sandbox": sandbox,
            "flags": _flags(p, sub, tests_json, answers or {}, answers_problem)}


def _flags(p: Plan, sub: submission.Submission, tests_json: List[Dict[str, Any]],
           answers: Dict[str, Any], answers_problem: str) -> List[Dict[str, str]]:
    """Every flag of one submission, for a person to look at: what the tests and the static
    reading saw, an answer cell the student changed the kind of, and a record of answers
    (``qkv_answers.json``) that could not be read or holds what is no answer."""
    calls = {t.grade_id: [(c.check, c.answer) for c in t.calls] for t in p.tests}
    # What the file itself holds wrong first (the line of the run shows the first flag).
    found = [{"test": "", "source": "file", "detail": problem} for problem in sub.problems
             if problem.startswith(notebook_file.NOT_UTF8)]
    found += flags.flags_for(tests_json, sub.answers, [s for _, s in sub.added], calls,
                             given=_given(p), setup=p.setup)
    found += [{"test": "", "source": "static", "detail": problem} for problem in sub.problems
              if problem.startswith("the answer cell")]
    asked = {c.question for t in p.tests for c in t.calls if c.check == judge.QUESTION}
    if answers_problem and asked:
        found.append({"test": "", "source": "record", "detail": answers_problem})
    for question in sorted(asked & set(answers)):  # an entry edited by hand, say
        if not checks_api.is_answer(question, answers[question]):
            found.append({"test": "", "source": "record", "detail": (
                f"{records.ANSWERS_FILE} holds {str(answers[question])[:40]!r} for {question}, "
                "which is not an answer: judged on the notebook's answer")})
    return found


def _given(p: Plan) -> Dict[str, str]:
    """The code the release gives in each answer cell (grade id -> source): what the
    instructor wrote there is no student's delegation."""
    return {cell["metadata"]["nbgrader"]["grade_id"]: text(cell.get("source"))
            for cell in p.skeleton.get("cells", [])
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") in p.answers}


def _time_limit(outcome: Any) -> Dict[str, str]:
    """``{"time_limit": message}`` for a cell the sandbox interrupted at its limit (a person
    grading a later cell by hand is told its results never came), else nothing."""
    raised = getattr(outcome, "raised", None)
    return {"time_limit": raised.message} if raised is not None and raised.type == "TimeLimit" else {}


def _unreadable(student: str, p: Plan, sha: str, why: str) -> Dict[str, Any]:
    tests = [judge.TestResult(t.grade_id, t.points, judge.ERROR,
                              f"the submitted notebook could not be read: {why}") for t in p.tests]
    record = _record(student, p, sha, submission.Submission(problems=[why]), tests, [], "", 0.0)
    record["unreadable"] = why
    # For a person: formgrader marks it, and its hand-graded answers wait (never read, so
    # not "left as released").
    record["flags"] = [{"test": "", "source": "file",
                        "detail": f"the submitted notebook could not be read: {why}"}]
    return record


def grade_one(pool: Any, job: Job, key: bytes, limits: judge.Timeouts) -> Dict[str, Any]:
    """Grade one submitted notebook in a fresh sandbox; its record (not yet written), every
    string of it writable as UTF-8 (what the student's code said may hold a lone surrogate)."""
    return notebook_file.no_lone_surrogates(_grade_one(pool, job, key, limits))


def _grade_one(pool: Any, job: Job, key: bytes, limits: judge.Timeouts) -> Dict[str, Any]:
    student, p, path = job
    sha = records.submission_sha(path)
    read_as: List[str] = []  # what was odd about the file itself (bytes not UTF-8)
    try:
        sub = submission.read(notebook_file.load(path, read_as), p)
    except notebook_file.Unreadable as e:
        return _unreadable(student, p, sha, str(e))
    sub.problems[:0] = read_as
    run = submission.cells_to_run(p, sub)
    answers, answers_problem = notebook_file.first_answers(path.parent)
    start = time.monotonic()
    with pool.submission([source for _, source in run]) as box:
        tests = judge.grade(box, p, key, student, limits, answers)
        outcomes = list(getattr(box, "cells", []) or [])
        stopped = getattr(box, "failed", None)
    # The sandbox has ended: from here on only this process acts.
    cells = [{"cell": label, "outcome": str(o)[:300], **_time_limit(o)}
             for (label, _), o in zip(run, outcomes)]
    _say_why_undefined(tests, run, outcomes)
    return _record(student, p, sha, sub, tests, cells,
                   _cell_named(str(stopped or ""), run)[:300], time.monotonic() - start,
                   answers, answers_problem)


def _cell_named(reason: str, run: List[Tuple[str, str]]) -> str:
    """The sandbox's "during cell 5" with the cell said as the instructor sees it ("the
    instructor's cell cell-13", "the answer cell masked_scores"): 5 counts the cells run."""
    def named(match: Any) -> str:
        index = int(match.group(1))
        if index >= len(run):
            return match.group(0)
        label = run[index][0]
        if label == SETUP:
            return "the set-up cell"
        if label == "added":
            return f"a cell the student added (cell {index} run)"
        if label.startswith("instructor:"):
            return f"the instructor's cell {label[len('instructor:'):]}"
        return f"the answer cell {label}"
    return re.sub(r"\bcell (\d+)\b", named, reason, count=1)


def _say_why_undefined(tests: List[judge.TestResult], run: List[Tuple[str, str]],
                       outcomes: List[Any]) -> None:
    """"the notebook defines no 'f'" says what the student can act on when f's own cell
    raised before defining it (a ``SystemExit``, a typo): what it raised, and where."""
    for (label, _), outcome in zip(run, outcomes):
        raised = getattr(outcome, "raised", None)
        if raised is None:
            continue
        first = (raised.message.strip().splitlines() or [""])[0][:200]
        why = (f" ({label}'s cell raised {raised.type}"
               f"{f' at line {raised.line}' if raised.line else ''}{': ' + first if first else ''})")
        for needle in (f"the notebook defines no {label!r}", f"name {label!r} is not defined"):
            for t in tests:
                if needle in t.message and why not in t.message:
                    t.message = t.message.replace(needle, needle + why, 1)
