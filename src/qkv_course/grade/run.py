"""One grading run: which submissions, in which sandboxes, how many at once, and its summary.

:func:`grade_class` finds ``submitted/<student>/<A>/<notebook>.ipynb`` for every notebook of
the assignment's source (:mod:`.jobs`), keeps the students asked for (``--student``) and this
shard's (``--shard K/N``: those whose id's SHA-256 falls in the K-th of N shards, the same
whoever else handed in: deterministic, so a Slurm array or a Kubernetes indexed job splits a
class without a scheduler of ours, and a folder collected between two shards moves no one), skips
those whose result file is current (``--force`` grades them again), grades the rest ``--jobs``
at a time, each in a fresh sandbox (:mod:`.sandbox`), and writes each result file once the
submission's sandbox has ended. An unsharded run (and ``--merge``, after the shards) then
writes the gradebook and the autograded notebooks from every result file
(:mod:`.gradebook`). Every submission gets one line of the summary, whatever it did.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..nbgrader import timestamps
from ..usage import UsageError
from . import checks_api, gradebook, judge, outdated, records, roster
from .jobs import find_jobs, handed_in_otherwise, strays
from .one import Job, grade_one
from .summary import Summary, course_option, printable, report, summary_line
from .plan import Plan, course_key, notebooks, plan

SANDBOX = "qkv_course.grade"  # where Pool and SandboxUnavailable live (tests of the parent swap it)

def check_plans(plans: Dict[str, Plan]) -> None:
    """Raise :class:`UsageError` for a test cell calling a check that does not exist (the
    instructor's error, said before any grade is recorded)."""
    for p in plans.values():
        for test in p.tests:
            for call in test.calls:
                if not checks_api.known(call.check):
                    raise UsageError(f"{p.assignment}/{p.notebook}: test {test.grade_id} calls "
                                     f"{call.check}, which qkv.checks does not have")


def prepare_checks(plans: Dict[str, Plan]) -> None:
    """Each planned check's trusted work (e.g. a model an experiment measures, trained once),
    done before any submission's wall clock starts."""
    for check in sorted({c.check for p in plans.values() for t in p.tests for c in t.calls}):
        checks_api.prepare(check)


def plans_of(course: Path, assignment: str) -> Dict[str, Plan]:
    """Every notebook's plan, checked (:func:`check_plans`)."""
    plans = {p.stem: plan(p) for p in notebooks(course, assignment)}
    check_plans(plans)
    return plans


def warm(pool: Any, jobs: int) -> None:
    """Start every slot's sandbox now, in parallel (one empty submission each), while this
    process imports torch and the checks; a sandbox that cannot start says so later."""
    def one() -> None:
        try:
            with pool.submission([]):
                pass
        except Exception:  # noqa: BLE001 (the first real submission raises it again)
            pass

    for _ in range(jobs):
        threading.Thread(target=one, daemon=True, name="qkv-grade-warm").start()


BASE_SUBMISSION_S = 120.0  # a submission's cells and its quick checks, on a loaded machine


def submission_budget(plans: Dict[str, Plan]) -> float:
    """The seconds one submission may take in all, when the instructor does not say: the base,
    plus the own limit of every call of a check that trains or samples (a minute each). So an
    assignment whose checks train a model (the capstone's ablation) is not cut short by a
    limit made for quick ones, and a submission that only sleeps still ends."""
    quick = checks_api.usual_seconds()  # a check's usual limit per call: within the base
    extra = [sum(s for s in (checks_api.seconds(c.check) for t in p.tests for c in t.calls)
                 if s > quick) for p in plans.values()]
    return BASE_SUBMISSION_S + max(extra, default=0.0)


def limit_submissions(pool: Any, plans: Dict[str, Plan], submission_s: Optional[float],
                      cell_s: float = 60.0) -> None:
    """Prepare the checks and give the pool's submissions their limits: ``cell_s`` a cell (the
    worker interrupts it there and runs the next), ``submission_s`` in all or
    :func:`submission_budget` plus one cell's limit (and each cell or call interrupted gives
    back its time, up to that much again: see the client), and CPU seconds for all of it (with
    one thread, a submission that computes all the time: the wall-clock limit decides). Called
    once the sandboxes are starting: the limit needs the checks' own limits, and importing the
    checks must not keep the sandboxes from starting."""
    prepare_checks(plans)
    wall_s = submission_budget(plans) + cell_s if submission_s is None else submission_s
    # CPU: the wall-clock time and all the time interrupts can give back (see the client).
    pool.limits = replace(pool.limits, wall_s=wall_s, cell_s=cell_s,
                          cpu_s=max(pool.limits.cpu_s, 2 * wall_s))


def grade_class(course: Path, assignment: str, *, students: Optional[Sequence[str]] = None,
                jobs: int = 2, shard: Optional[Tuple[int, int]] = None, force: bool = False,
                unsafe: bool = False, merge: bool = False, compare: bool = False,
                limits: Optional[judge.Timeouts] = None, submission_s: Optional[float] = None,
                echo: Callable[[str], None] = print) -> Summary:
    """Grade an assignment's submissions and (unless sharded) write the gradebook.

    Args:
        course: the nbgrader course folder.
        assignment: e.g. ``04-scaling``.
        students: only these (None: everyone who submitted).
        jobs: submissions graded at once, each in its own sandbox.
        shard: ``(K, N)``: grade only the K-th of N shards; the gradebook is left to ``merge``.
        force: grade again submissions whose result file is current.
        unsafe: run without the sandbox (only where bubblewrap cannot run; never for a class).
        merge: grade nothing; write the gradebook from every shard's result files.
        compare: leave the gradebook as it is (nbgrader's) and echo one line per test
            whose score differs from it (:mod:`.compare`).
        limits: per-call time limits.
        submission_s: seconds one submission may take in all (None: :func:`submission_budget`).
        echo: where the summary's lines go.
    """
    started = time.monotonic()
    plans = {p.stem: plan(p) for p in notebooks(course, assignment)}
    if shard is None and not compare:  # the gradebook will be written: it must know the
        gradebook.require_assignment(course, assignment)  # assignment, said before grading
    if compare:  # nbgrader's scores, read before grading (and said at once when missing)
        from .compare import disagreements, recorded

        nbgrader_scores = recorded(course, assignment)
    summary = Summary()
    found = find_jobs(course, assignment, plans, students, None if merge else shard)
    if shard is None:
        summary.left_out += strays(course, assignment, plans, students)
        if not compare:  # before the gradebook is written, which makes them students
            summary.strangers = roster.strangers(course, assignment, {j[0] for j in found})
        # A submission time that reaches no one, or a student without one: graded as on time.
        summary.times = [line for line in timestamps.in_course(course, assignment)
                         if not students or any(line.startswith(ascii(s) + " ")
                                                for s in students)]
    # (--force grades every submission: no file need be read to know which are current.)
    stale = found if force and not merge else [j for j in found if not records.current(
        records.path_of(course, j[0], assignment, j[1].notebook), records.submission_sha(j[2]),
        j[1].digest())]
    summary.current, summary.merged = len(found) - len(stale), merge
    if not merge:
        if stale:
            _grade_all(course, plans, stale, jobs, unsafe, limits or judge.Timeouts(),
                       submission_s, summary, echo)
    else:
        check_plans(plans)
        summary.not_merged = len(stale)
        # A shard that did not finish, or a submission changed since it was graded: its old
        # result (if any) is not written as if it were the grade.
        for student, p, _ in stale:
            summary.left_out.append(
                f"{student} {assignment}/{p.notebook}: NOT MERGED, no result file for this "
                f"submission as it is now (its shard did not finish, or it changed since): "
                f"run `qkv grade {assignment} --student {student}{course_option(course)}`, "
                "or its shard again")
    if compare:
        lines = disagreements(
            ((s, n, r) for s, n, r in records.all_results(course, assignment)
             if students is None or s in students),
            {k: v for k, v in nbgrader_scores.items() if students is None or k[0] in students},
            assignment)
        for line in lines:
            echo("DIFFERS: " + line)
        echo(f"--compare: {len(lines)} disagreement(s) with nbgrader's gradebook; "
             "gradebook.db and autograded/ left as they were")
    elif shard is None:
        # Not graded now: an earlier submission's result is not written as if current, and
        # the gradebook's grade of it is flagged.
        skip = {(j[0], j[1].notebook) for j in stale} if merge else set(summary.not_graded)
        skip |= handed_in_otherwise(course, assignment, plans, students)
        # A result whose submission folder is gone (renamed to the registered id, or
        # removed) is no one's submission now: said, and not written back (it brought back
        # a student removed from the gradebook); the gradebook's grade of it is left alone.
        gone = set(records.orphans(course, assignment))
        summary.orphans = [orphan_line(course, assignment, s, n) for s, n in sorted(gone)]
        summary.written = gradebook.write(course, plans, skip=skip | gone,
                                          failed=summary.left_out, reopened=summary.reopened)
        summary.outdated = outdated.flag(course, assignment, skip)
    summary.seconds = time.monotonic() - started
    return summary


def orphan_line(course: Path, assignment: str, student: str, notebook: str) -> str:
    """The summary's line about a result file whose submission folder is gone."""
    shown = ascii(student)[1:-1]
    return (f"{ascii(student)} {assignment}/{notebook}: NOT WRITTEN to the gradebook: "
            f"qkv-grades/{shown}/{assignment}/{notebook}.json is the result of a submission "
            f"whose folder submitted/{shown}/{assignment}/ is gone (renamed or removed); the "
            "gradebook's grade of it, if any, is left as it is. Where the folder was renamed "
            "to another id (graded under that id) or removed for good, remove the result and "
            "its autograded notebook (`qkv report` reads it): `rm -rf "
            f"qkv-grades/{shown}/{assignment} autograded/{shown}/{assignment}`; and the "
            f"student, if no one's: `nbgrader db student remove {shown} --force` (it deletes "
            "the scores you gave them)")


def _grade_all(course: Path, plans: Dict[str, Plan], todo: List[Job], jobs: int, unsafe: bool,
               limits: judge.Timeouts,
               submission_s: Optional[float], summary: Summary,
               echo: Callable[[str], None]) -> None:
    sandbox = importlib.import_module(SANDBOX)
    Pool, SandboxUnavailable = sandbox.Pool, sandbox.SandboxUnavailable
    quiet_libraries()
    key = course_key(course)
    # A folder that names no one on the roster is flagged in formgrader when written
    # (:mod:`.gradebook`): counted with the flagged ones.
    on_roster = roster.registered(course)
    lock = threading.Lock()
    stopping = threading.Event()  # set on Ctrl-C: what the killed sandboxes give is not a grade

    def work(job: Job) -> None:
        if stopping.is_set():
            return
        student, p, _ = job
        try:
            record = grade_one(pool, job, key, limits)
        except Exception as e:  # noqa: BLE001 (the grader's own failure: record nothing, say it)
            with lock, checks_api.OUTPUT:
                summary.not_graded.append((student, p.notebook))
                line = printable(f"{student} {p.assignment}/{p.notebook}: NOT GRADED, the "
                                 f"grader failed ({type(e).__name__}: {e}); nothing recorded, a "
                                 "rerun grades it")
                summary.lines.append(line)
                echo(line)
            return
        if stopping.is_set():
            return
        where = records.path_of(course, student, p.assignment, p.notebook)
        gone = records.answers_gone(records.read(where), record)
        if gone:  # a re-collect deleted the questions' record graded before: said, flagged
            record["flags"].append({"test": "", "source": "record", "detail": gone})
        records.write(where, record)
        line = summary_line(record)
        with lock, checks_api.OUTPUT:
            summary.graded += 1
            summary.unreadable += bool(record.get("unreadable"))
            summary.sandbox_failed += bool(record.get("sandbox"))
            summary.flagged += bool(record.get("flags")) or bool(on_roster) and \
                student not in on_roster
            if gone:
                summary.answers_gone.append(f"{student} {p.assignment}/{p.notebook}")
            summary.lines.append(line)
            echo(line)

    try:
        # The course folder (gradebook, sources, other students' files) is out of the
        # sandbox's sight, whatever folder it is under.
        with Pool(jobs, unsafe=unsafe, hide=[str(course)]) as pool:
            if pool.shared and jobs > 1:  # said once, before the first result line
                echo(f"note: the {jobs} job slots share the CPU and memory without caps: "
                     f"{pool.shared}; a submission that starts many busy processes slows "
                     "the others (run as root, or with --jobs 1)")
            warm(pool, min(jobs, len(todo)))
            check_plans(plans)  # imports torch and the checks while the sandboxes start
            limit_submissions(pool, plans, submission_s, limits.call_s)
            # nbgrader's import (its server extensions: seconds) is needed only at the end, to
            # write the gradebook: let it happen while the sandboxes work. Not earlier: a
            # thread importing holds the interpreter's lock, and the sandboxes' start (the
            # copy of qkv above) and the checks' import would wait for it.
            threading.Thread(target=importlib.import_module, args=("nbgrader.api",),
                             daemon=True, name="qkv-grade-import-nbgrader").start()
            threads = ThreadPoolExecutor(max_workers=jobs)
            try:
                for future in [threads.submit(work, job) for job in todo]:
                    future.result()
            except BaseException:
                stopping.set()  # before the pool ends the sandboxes (Ctrl-C, a full disk)
                threads.shutdown(wait=False, cancel_futures=True)
                raise
            threads.shutdown()
    except SandboxUnavailable as e:
        raise UsageError(f"the sandbox cannot run here ({e}); install bubblewrap "
                         "(apt-get install bubblewrap) or, on a machine of your own with no "
                         "student code you distrust, pass --unsafe") from None


def quiet_libraries() -> None:
    """urllib3's warnings (its "SOCKS support ... requires PySocks", from nbgrader's import
    in a thread during grading) are no student's: kept out of the per-student lines. Set before
    any thread starts: requests' own filter for it, added during that import, is lost when a
    check's ``warnings.catch_warnings()`` in another thread ends, and the warning came out."""
    warnings.filterwarnings("ignore", module=r"urllib3(\.|$)")


def main(course: Path, assignment: str, **options: Any) -> int:
    """Grade and print the summary; exit status 0, or 1 when some submission was not graded
    (the grader failed, a notebook could not be read, one was left out): a student's code
    failing is a grade, not an error."""
    shard = options.get("shard")
    summary = grade_class(course, assignment, **options)
    print(report(summary, assignment, shard, course), file=sys.stdout)
    # A folder that names no one on the roster is graded, said and flagged, not an error:
    # nbgrader adds an unknown student on the fly (a late enrolment), and so does this.
    return 1 if summary.errors or summary.left_out or summary.unreadable else 0
