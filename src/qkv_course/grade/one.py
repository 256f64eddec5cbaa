"""One submission graded: its notebook read, its cells run and its checks judged in one fresh
sandbox, then its record (scores, flags, what each cell did) built by this process alone.

:func:`grade_one` is what :mod:`.run` does for each student, and what the Gradescope
autograder does for its one upload; nothing here writes a file.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
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
    said = getattr(outcome, "time_limit", None)
    return {"time_limit": said} if said else {}


def _anchors(run: List[Tuple[str, str]], sub: submission.Submission) -> Dict[int, Optional[str]]:
    """For each cell the student added (its index in ``run``), the id of the instructor's cell
    it follows in the notebook (``None``: above them all), as the submission placed it."""
    pending = list(sub.added)
    found: Dict[int, Optional[str]] = {}
    for i, (label, source) in enumerate(run):
        if label == "added":
            k = next((j for j, (_, s) in enumerate(pending) if s == source), None)
            if k is not None:
                found[i] = pending.pop(k)[0]
    return found


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
    where = _positions(p)
    kept = list(range(len(run)))  # the cells of `run` the results were got from
    tests, outcomes, stopped, spent = _run(pool, p, key, student, limits, answers, run, kept,
                                           where)
    skipped: List[Dict[str, Any]] = []
    fatal = _died_in_cell(stopped, outcomes, run, kept)
    left = _time_left(pool, spent)
    while fatal is not None and len(skipped) < MAX_SKIPPED and left is not False:
        # The process died in a cell (os._exit, a signal, a segfault) before any test was
        # judged. As a cell that raised, that cell is left out: in a fresh sandbox every other
        # cell runs again, before it and after it, and the tests are judged on them, so an
        # answer that does not use the fatal cell keeps its points. Every run of one
        # submission shares its one time limit (fatal cells buy no time).
        index = kept[fatal]
        trying = [i for i in kept if i != index]
        tests2, outcomes2, stopped2, took = _run(pool, p, key, student, limits, answers, run,
                                                 trying, where, left)
        spent += took
        if len(outcomes2) < fatal:  # the cells before the fatal one did not all run again
            break
        skipped.append({"index": index, "cell": run[index][0],
                        "named": _cell_named(f"cell {index}", run, where),
                        "why": stopped.split(": ", 1)[-1]})
        tests, outcomes, stopped, kept = tests2, outcomes2, stopped2, trying
        fatal = _died_in_cell(stopped, outcomes, run, kept)
        left = _time_left(pool, spent)
    said = _cell_named(stopped, run, where)
    if skipped:
        # The cells first, the causes last: the record keeps 300 characters.
        names = " and ".join(re.sub(r" \(cell \d+ of the notebook as released\)", "",
                                    s["named"]) for s in skipped)
        causes = "; ".join(s["why"][:60] for s in skipped)
        stopped = (f"the process ended during {names}: graded again in a fresh sandbox "
                   f"without {'them' if len(skipped) > 1 else 'it'}"
                   f"{f'; then {said}' if said else ''} (the cause: {causes})")
        _say_why_skipped(p, tests, skipped, bool(said))
    else:
        stopped = said
    # The sandbox has ended: from here on only this process acts.
    anchors = _anchors(run, sub)
    got = dict(zip(kept, outcomes))
    why = {s["index"]: s["why"] for s in skipped}
    if fatal is not None:  # the last run died in this cell too
        why[kept[fatal]] = said.split(": ", 1)[-1]
    cells = []
    for i, (label, _) in enumerate(run):
        after = {"after": anchors.get(i)} if label == "added" else {}
        if i in got:
            cells.append({"cell": label, "outcome": str(got[i])[:300],
                          **_time_limit(got[i]), **after})
        elif i in why:
            verb = "skipped: " if i not in kept else ""
            cells.append({"cell": label, "outcome": f"{verb}the process ended here ("
                          + why[i][:200] + ")", **after})
    _say_why_undefined(tests, [run[i] for i in kept], outcomes)
    record = _record(student, p, sha, sub, tests, cells, stopped[:300],
                     time.monotonic() - start, answers, answers_problem)
    if skipped:
        record["skipped_cells"] = [{"cell": s["cell"], "why": s["why"]} for s in skipped]
    if stopped:  # formgrader's flag: a person looks at a submission the sandbox stopped
        record["flags"].append({"test": "", "source": "sandbox", "detail": (
            "the sandbox stopped it (its line of the summary says why): a person looks "
            "before the total is used")})
    return record


def _run(pool: Any, p: Plan, key: bytes, student: str, limits: judge.Timeouts,
         answers: Dict[str, Any], run: List[Tuple[str, str]], kept: List[int],
         where: Dict[str, int], wall_s: Optional[float] = None
         ) -> Tuple[List[judge.TestResult], List[Any], str, float]:
    """The cells ``kept`` of ``run`` in one fresh sandbox (within ``wall_s`` seconds, when
    given) and every test judged on them: the tests, each cell's outcome, why the sandbox
    stopped ("" when it did not: its "cell N" counts in ``run``) and the seconds it took; each
    test's message names the cell as the student sees it (``where``: :func:`_positions`)."""
    start = time.monotonic()
    sources = [run[i][1] for i in kept]
    box_limits = {"limits": replace(pool.limits, wall_s=wall_s)} if wall_s else {}
    with pool.submission(sources, **box_limits) as box:
        tests = judge.grade(box, p, key, student, limits, answers)
        outcomes = list(getattr(box, "cells", []) or [])
        stopped = str(getattr(box, "failed", None) or "")
    if stopped:
        # "cell N" counts the cells this sandbox ran: say it as the N-th of `run`
        raw, stopped = stopped, re.sub(
            r"\bcell (\d+)\b", lambda m: f"cell {kept[int(m.group(1))]}"
            if int(m.group(1)) < len(kept) else m.group(0), stopped, count=1)
        named = _cell_named(stopped, run, where)
        for t in tests:
            t.message = t.message.replace(raw, named)
    return tests, outcomes, stopped, time.monotonic() - start


def _time_left(pool: Any, spent: float) -> Any:
    """The seconds left of the submission's time limit after ``spent`` (``None``: the pool
    says no limit; ``False``: too little to run the notebook again)."""
    wall_s = getattr(getattr(pool, "limits", None), "wall_s", None)
    if not isinstance(wall_s, (int, float)):
        return None
    left = wall_s - spent
    return left if left >= min(10.0, wall_s / 4) else False


def _died_in_cell(stopped: str, outcomes: List[Any], run: List[Tuple[str, str]],
                  kept: List[int]) -> Optional[int]:
    """The index (in ``kept``) of the cell the submission's process died in, when it died
    while the cells ran (not at a limit of time, not in the set-up cell), else None."""
    index = len(outcomes)
    if (not stopped.startswith(DIED) or index == 0 or index >= len(kept)
            or run[kept[index]][0] == SETUP):
        return None
    return index


#: How many cells a process may die in before the rest of the notebook is left ungraded (each
#: costs one more run of the whole notebook).
MAX_SKIPPED = 3

#: How the sandbox says the submission's process ended (see :mod:`.child`).
DIED = "the submission's process ended during "


def _positions(p: Plan) -> Dict[str, int]:
    """Each cell's place in the released notebook (1 for the first), by grade id and id."""
    where: Dict[str, int] = {}
    for i, cell in enumerate(p.skeleton.get("cells", []), 1):
        meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell, dict) else {}
        for name in (meta.get("grade_id"), cell.get("id") if isinstance(cell, dict) else None):
            if isinstance(name, str) and name:
                where.setdefault(name, i)
    return where


def _say_why_skipped(p: Plan, tests: List[judge.TestResult], skipped: List[Dict[str, Any]],
                     stopped_again: bool) -> None:
    """A test of an answer whose own cell was left out (the process died in it) is not graded,
    and says so, instead of "the notebook defines no 'f'"; every other test keeps what the
    graded-again notebook earned."""
    answers = {t.grade_id: {c.answer for c in t.calls} for t in p.tests}
    for s in skipped:
        for t in tests:
            if t.status == judge.PASS or s["cell"] not in answers.get(t.grade_id, ()):
                continue
            t.status = judge.ERROR
            t.mistake = None
            # what its calls said came from a notebook without the answer: no verdict
            t.calls = [{k: c[k] for k in ("call", "seed") if k in c} for c in t.calls]
            t.message = (f"not graded: the submission's process ended during {s['named']} "
                         f"({s['why']}); the notebook was graded again without that cell"
                         + (", and stopped again (the other tests say why)" if stopped_again
                            else ", so the other tests keep their points"))


def _cell_named(reason: str, run: List[Tuple[str, str]],
                where: Optional[Dict[str, int]] = None) -> str:
    """The sandbox's "during cell 5" with the cell said as the student and the instructor see
    it ("the answer cell masked_scores (cell 12 of the notebook as released)", "the
    instructor's cell cell-13"): 5 counts the cells run, which neither of them can find."""
    where = where or {}

    def named(match: Any) -> str:
        index = int(match.group(1))
        if index >= len(run):
            return match.group(0)
        label = run[index][0]
        if label == SETUP:
            return "the set-up cell"
        if label == "added":
            above = next((run[i][0] for i in range(index - 1, -1, -1)
                          if run[i][0] not in ("added", SETUP)), "")
            name = above[len("instructor:"):] if above.startswith("instructor:") else above
            at = f", below cell {where[name]} of the notebook as released" if name in where \
                else ""
            return f"a cell the student added (cell {index} run{at})"
        name = label[len("instructor:"):] if label.startswith("instructor:") else label
        at = f" (cell {where[name]} of the notebook as released)" if name in where else ""
        if label.startswith("instructor:"):
            return f"the instructor's cell {name}{at}"
        return f"the answer cell {label}{at}"
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
