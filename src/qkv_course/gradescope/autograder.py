"""The same engine on Gradescope: one submission graded as ``qkv grade`` grades it, into
Gradescope's own ``results.json``.

Gradescope runs ``/autograder/run_autograder`` in a container per submission; that script can
call ``python -m qkv_course.gradescope.autograder COURSE ASSIGNMENT SUBMISSION_DIR RESULTS``, where
``COURSE`` is a course folder shipped in the autograder (the assignment's source and release,
and the course's ``.qkv-grade-key``). The submitted notebook is read as untrusted data, its
code runs in the sandbox (or, where the container forbids bubblewrap's namespaces, unsandboxed:
the container is then the boundary, one per submission; any other failure of the sandbox to
start grades nothing and exits 1, for the staff to fix the image), the checks judge outside
it, and this process writes ``results.json``: one test per test cell, its points and its
message (each shown to the student when the grades are published), and the whole record under
``extra_data.qkv`` (what ``qkv report`` reads from a result file); the run's summary line,
flags included, goes to stdout, for the course staff alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, Optional

from ..grade import judge, one, run
from ..grade.plan import course_key
from ..usage import UsageError


class SandboxBroken(RuntimeError):
    """The sandbox failed to start for a reason other than a container that forbids its
    namespaces (a broken image, an import error inside it): nothing was graded, and the
    submission's code never ran outside the sandbox."""


def last_lines(text: str, lines: int = 3, chars: int = 1000) -> str:
    """The last ``lines`` non-blank lines of ``text`` (a traceback ends in its error), joined
    with `` / `` and at most ``chars`` long (the end kept)."""
    kept = " / ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip())
    return kept if len(kept) <= chars else "..." + kept[-chars:]


def student_of(submission_dir: Path) -> str:
    """The submitter's id from Gradescope's ``submission_metadata.json`` (for the seeds)."""
    try:
        meta = json.loads((submission_dir.parent / "submission_metadata.json").read_text())
        users = meta.get("users") or [{}]
        return str(users[0].get("sid") or users[0].get("email") or meta.get("id") or "anonymous")
    except (OSError, ValueError, AttributeError, IndexError, TypeError):
        return "anonymous"


WRITTEN_NOTE = ("Written answers are not scored here: they are graded by hand, as Gradescope "
                "questions of their own.")
# What a student reads at once. Every test is shown only when the grades are published (hidden
# tests' names and messages, the named mistakes, any flag for review); the summary line that
# holds all of them goes to the run's stdout, which Gradescope shows to the course staff only,
# or a student could resubmit until a flag went away.
GRADED_NOTE = "Graded: each test's points and message are shown when the grades are published."


def results_json(record: Dict[str, Any], sandboxed: bool, why: str = "") -> Dict[str, Any]:
    """Gradescope's ``results.json`` from a result record.

    Args:
        record: what the engine decided (:func:`qkv_course.grade.one.grade_one`), kept whole in
            ``extra_data.qkv`` for ``qkv report``.
        sandboxed: whether the submission's code ran in bubblewrap's sandbox.
        why: when it did not, what stopped the sandbox (said in the output).
    """
    tests = [{"name": t["grade_id"], "score": t["earned"], "max_score": t["points"],
              "output": t["message"] or "passed", "visibility": "after_published"}
             for t in record["tests"]]
    lines = [GRADED_NOTE]
    if not sandboxed:
        lines.append("The sandbox (bubblewrap) could not start in this container"
                     + (f" ({why})" if why else "") + ": the submission's code ran without it, "
                     "isolated by the container alone; the checks still judged outside it.")
    if record.get("written"):
        lines.append(WRITTEN_NOTE)
    record = dict(record, sandboxed=sandboxed)
    return {"score": record["score"], "tests": tests, "output": "\n".join(lines),
            "stdout_visibility": "hidden", "extra_data": {"qkv": record}}


def grade_submission(course: Path, assignment: str, submission_dir: Path,
                     student: Optional[str] = None, unsafe_fallback: bool = True,
                     limits: Optional[judge.Timeouts] = None) -> Dict[str, Any]:
    """Grade the one notebook in ``submission_dir``; Gradescope's ``results.json`` as a dict.

    Args:
        unsafe_fallback: where bubblewrap cannot create its namespaces (a container that
            forbids them: :class:`~qkv_course.grade.NoNamespaces`), grade without the sandbox
            and say so in the output.

    Raises:
        UsageError: no notebook, or several, in ``submission_dir``.
        SandboxBroken: the sandbox failed to start for any other reason (its error's last
            lines in the message); the submission's code did not run unsandboxed.
    """
    from ..grade import NoNamespaces, Pool, SandboxUnavailable

    plans = run.plans_of(course, assignment)
    # Uploaded as a folder (Gradescope keeps it): the one notebook below, hidden ones aside.
    found = sorted(p for p in submission_dir.rglob("*.ipynb")
                   if not any(part.startswith(".") for part in p.relative_to(submission_dir).parts))
    named = [f for f in found if f.stem in plans]
    said = ""
    if len(found) > 1 and len(named) == 1:  # a copy uploaded beside it (scaling-Copy1.ipynb)
        others = [f.name for f in found if f not in named]
        said = (f"graded {named[0].name}; not graded: {', '.join(others)} (upload only "
                f"{named[0].name} to have no doubt)\n")
        found = named
    if len(found) != 1:
        names = ", ".join(f.relative_to(submission_dir).as_posix() for f in found[:10])
        raise UsageError(f"expected one notebook, found {len(found)}{': ' if found else ''}"
                         f"{names}: upload only the assignment's notebook "
                         f"({', '.join(n + '.ipynb' for n in sorted(plans))})")
    p = plans.get(found[0].stem) or (next(iter(plans.values())) if len(plans) == 1 else None)
    if p is None:
        raise UsageError(f"{found[0].name} is none of {', '.join(sorted(plans))}")
    job = (student or student_of(submission_dir), p, found[0])
    key = course_key(course)

    def grade(pool: Any) -> Dict[str, Any]:
        run.warm(pool, 1)  # the sandbox starts while this process imports the checks
        run.limit_submissions(pool, {p.notebook: p}, None)
        return one.grade_one(pool, job, key, limits or judge.Timeouts())

    def said_first(result: Dict[str, Any]) -> Dict[str, Any]:
        """The student reads the results' output: which of their files was graded, first."""
        return {**result, "output": said + result.get("output", "")}

    try:
        with Pool(1, hide=[str(course)]) as pool:
            return said_first(results_json(grade(pool), True))
    except NoNamespaces as e:
        if not unsafe_fallback:
            raise
        why = last_lines(str(e), lines=5, chars=600)
    except SandboxUnavailable as e:
        # Not the container's restriction: a broken image must not grade unsandboxed.
        raise SandboxBroken(f"the sandbox failed to start, and not because this container "
                            f"forbids its namespaces, so nothing was graded (fix the image, "
                            f"then regrade): {last_lines(str(e))}") from None
    with Pool(1, unsafe=True) as pool:
        return said_first(results_json(grade(pool), False, why))


def main(argv: Optional[list] = None) -> int:
    """``COURSE ASSIGNMENT SUBMISSION_DIR RESULTS_JSON``: grade and write ``results.json``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4:
        print("usage: python -m qkv_course.gradescope.autograder COURSE ASSIGNMENT SUBMISSION_DIR "
              "RESULTS_JSON", file=sys.stderr)
        return 2
    course, assignment, submission_dir, out = args
    try:
        result = grade_submission(Path(course), assignment, Path(submission_dir))
    except SandboxBroken as e:
        # For the course staff: no results.json, so Gradescope shows the run as failed.
        print(f"qkv autograder: NOT GRADED: {e}", file=sys.stderr)
        return 1
    except UsageError as e:
        # Kept for qkv report too: the student counts, with every test not passed.
        from ..grade import records
        result = {"score": 0, "output": f"not graded: {e}", "tests": [],
                  "extra_data": {"qkv": {"student": student_of(Path(submission_dir)),
                                         "assignment": assignment, "tests": [],
                                         "unreadable": str(e), "graded_at": records.now()}}}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(result, indent=1))
    if result.get("extra_data", {}).get("qkv", {}).get("tests"):
        # For the course staff: the run's stdout (results.json's stdout_visibility: hidden).
        print(run.summary_line(result["extra_data"]["qkv"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
