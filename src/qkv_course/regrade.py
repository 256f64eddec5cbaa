"""``qkv regrade COURSE_DIR --out DIR``: grade every submission again, outside its kernel.

A notebook can change anything in its own kernel, so what ``nbgrader autograde`` recorded is
only as good as the kernel's defences. For every submission (``autograded/<student>/<A>/``;
one that nbgrader could not grade is taken from ``submitted/``), this takes the student's
*answer* cells only (the code cells whose nbgrader grade id is an answer of the assignment's
source, never a test cell), runs them in a fresh, guarded process (:mod:`._regrade_run`) and
grades each test with the check its cell calls in the source, on fresh inputs. It writes:

- ``DIR/regrade.csv``: ``student,assignment,test,nbgrader_points,clean_points,max_points,flags``,
  one row per student, assignment and test; ``nbgrader_points`` is empty where nbgrader
  graded nothing; ``flags`` is ``keyword: detail; ...`` (keywords: :data:`FLAGS`);
- ``DIR/summary.txt``: submissions, disagreements and flagged students (also printed).

A flag marks every disagreement between nbgrader's points and the clean points, every answer
that names or uses machinery no exercise needs (:mod:`._regrade_scan` reads the code; the child
reports what it did), and every step that crashed or ran out of time. Exit status: 0 when
nothing is flagged, 1 when something is, 2 for bad usage. Nothing in ``COURSE_DIR`` changes.
"""

from __future__ import annotations

import argparse
import ast
import csv
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ._regrade_run import Flag, Job, grade
from ._regrade_scan import KEYWORDS, scan
from . import _regrade_sandbox as sandbox, outdir
from .graded import (UsageError, did_you_mean, nbgrader_meta, notebooks_in, questions, read_notebook,
                     require_folder)

#: What ``qkv regrade`` writes into ``--out``.
OUTPUTS = ("regrade.csv", "summary.txt")
COLUMNS = ("student", "assignment", "test", "nbgrader_points", "clean_points", "max_points",
           "flags")
SOURCES = ("solutions", "source")  # nbgrader's source folder: this course's, then the default
FLAGS = {**KEYWORDS, "delegates": "calls what the exercise forbids (the checks' guard refused it)",
         "guard": "did something else the checks' guard refuses", "tampers":
         "changed the checks (they undid it)", "crashed": "ended its process (os._exit, a crash, "
         "out of memory)", "timeout": "ran past the time limit", "disagree":
         "nbgrader's points differ from the clean points", "not-autograded":
         "nbgrader has no autograded notebook (its kernel died?)", "protocol":
         "the regrade's process sent a report that is not one"}


@dataclass(frozen=True)
class Plan:
    """What an assignment notebook's source says: set-up, answer ids, tests.

    Args:
        setup: the set-up cell's code.
        answers: the answer cells' grade ids, in order.
        tests: ``(grade id, points, check, answer)`` for each autograded test cell.
    """

    setup: str
    answers: List[str]
    tests: List[Tuple[str, float, str, str]]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``qkv regrade``."""
    parser.add_argument("course_dir", metavar="COURSE_DIR",
                        help="the nbgrader course folder (holding autograded/ or submitted/)")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="where to write regrade.csv and summary.txt (created if needed)")
    parser.add_argument("--assignment", metavar="A", help="only this assignment (e.g. 06-masking)")
    parser.add_argument("--timeout", type=float, default=60, metavar="S",
                        help="seconds each answer cell and each check may run (default 60)")
    parser.add_argument("--memory", type=int, default=4096, metavar="MB",
                        help="memory the answers of one submission may take, in MiB, beyond "
                        "what torch and the checks take (default 4096)")
    parser.add_argument("--jobs", type=int, default=2, metavar="N",
                        help="submissions graded at once, each in its own process (default 2)")
    outdir.add_force_argument(parser)


def _cells(nb: Any) -> List[Tuple[Dict[str, Any], Any]]:
    return [(nbgrader_meta(c), c) for c in nb.get("cells", [])]


def _check_call(source: str) -> Optional[Tuple[str, str]]:
    """The first ``check_x(answer, ...)`` a test cell makes: ``(check, answer)``.

    A question's ``check_question("id", answer)`` gives ``("check_question:id", answer)``.
    """
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "check_question" and len(node.args) == 2
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[1], ast.Name)):
            return f"check_question:{node.args[0].value}", node.args[1].id
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id.startswith("check_") and node.args
                and isinstance(node.args[0], ast.Name)):
            return node.func.id, node.args[0].id
    return None


def plan(source: Any) -> Plan:
    """Read a source notebook (nbgrader metadata as :mod:`.assignments` writes it)."""
    setup, answers, tests = "", [], []
    for meta, cell in _cells(source):
        if cell.get("cell_type") != "code" or not meta.get("grade_id"):
            continue
        if meta["grade_id"] == "setup":
            setup = cell.source
        elif meta.get("solution"):
            answers.append(meta["grade_id"])
        elif meta.get("grade"):
            call = _check_call(cell.source)
            if call is None:
                raise UsageError(f"test {meta['grade_id']} calls no qkv check: cannot regrade it")
            tests.append((meta["grade_id"], float(meta.get("points", 0) or 0), *call))
    return Plan(setup, answers, tests)


def source_plan(course: Path, assignment: str, name: str) -> Plan:
    """The plan of ``<source folder>/<assignment>/<name>`` (or of the ``.md`` it is made from)."""
    for folder in SOURCES:
        path = course / folder / assignment / name
        if path.is_file():
            return plan(read_notebook(path))
        md = path.with_suffix(".md")
        if md.is_file():
            from . import assignments

            return plan(assignments.notebook(md))
    raise UsageError(f"no source for {assignment}/{name} in {' or '.join(SOURCES)}/ of {course}")


def submissions(course: Path, only: Optional[str]) -> List[Tuple[str, str, Path, bool]]:
    """``(student, assignment, notebook, autograded)``: every autograded notebook, and every
    submitted one nbgrader left without an autograded copy."""
    found = {(s, a, p.name): (p, True) for s, a, p in notebooks_in(course / "autograded")}
    for s, a, p in notebooks_in(course / "submitted"):
        found.setdefault((s, a, p.name), (p, False))
    return [(s, a, p, auto) for (s, a, _), (p, auto) in sorted(found.items())
            if only is None or a == only]


def _answers(nb: Any, ids: List[str]) -> List[Tuple[str, str]]:
    """The student's answer cells: the first code cell with each answer's grade id."""
    found: Dict[str, str] = {}
    for meta, cell in _cells(nb):
        gid = meta.get("grade_id")
        if cell.get("cell_type") == "code" and meta.get("solution") and gid in ids:
            found.setdefault(gid, cell.source)
    return [(gid, found[gid]) for gid in ids if gid in found]


def regrade_notebook(student: str, assignment: str, nb: Any, autograded: bool, p: Plan,
                     timeout: float, memory: int) -> List[List[Any]]:
    """Regrade one submitted notebook: its CSV rows (flags as lists of ``(keyword, detail)``)."""
    answers = _answers(nb, p.answers)
    graded = grade(Job(p.setup, answers, [(t, c, a) for t, _, c, a in p.tests]), timeout, memory)
    static = {gid: scan(src) for gid, src in answers}
    tested = {a for _, _, _, a in p.tests}
    anywhere = [f for gid, _ in answers if gid not in tested
                for f in static[gid] + graded.cell_flags.get(gid, [])] + graded.flags
    nbgrader = ({q.grade_id: q.earned for q in reversed(questions(nb)) if not q.by_hand}
                if autograded else {})
    rows = []
    for test, points, _, answer in p.tests:
        result = graded.results[test]
        clean = points if result.passed else 0.0
        flags = (static.get(answer, []) + graded.cell_flags.get(answer, []) + result.flags
                 + anywhere)
        theirs = nbgrader.get(test)
        if not autograded:
            flags.append(("not-autograded", "nbgrader wrote no autograded notebook for this "
                          "submission: its kernel died?"))
        if abs((theirs or 0.0) - clean) > 1e-9:
            lines = result.message.strip().splitlines()
            why = lines[0][:200] if lines else "passed"
            flags.append(("disagree", f"nbgrader {theirs or 0:g}, clean {clean:g} ({why})"))
        rows.append([student, assignment, test, "" if theirs is None else f"{theirs:g}",
                     f"{clean:g}", f"{points:g}", flags])
    return rows


def _flag_text(flags: List[Flag]) -> str:
    clean = lambda s: " ".join(s.replace(";", ",").split())  # noqa: E731
    return "; ".join(f"{k}: {clean(d)}" for k, d in dict.fromkeys(flags))


def summary(rows: List[List[Any]], out: Path) -> str:
    """The few lines of ``summary.txt``: counts, then each flagged student with their keywords."""
    subs = {(r[0], r[1]) for r in rows}
    disagree = sum(any(k == "disagree" for k, _ in r[6]) for r in rows)
    flagged: Dict[str, Dict[str, List[str]]] = {}  # student -> assignment -> keywords
    for r in rows:
        for k, _ in r[6]:
            keywords = flagged.setdefault(r[0], {}).setdefault(r[1], [])
            keywords += [] if k in keywords else [k]
    lines = [f"qkv regrade: {len(subs)} submission(s) of {len({s for s, _ in subs})} student(s), "
             f"{len(rows)} test(s) graded again",
             f"disagreements with nbgrader: {disagree}",
             f"flagged students: {len(flagged)}" + ("" if flagged else " (none)")]
    lines += [f"  {s}: " + "; ".join(f"{a} ({', '.join(ks)})" for a, ks in sorted(by_a.items()))
              for s, by_a in sorted(flagged.items())]
    version = sandbox.abi()
    lines.append(f"sandbox: Landlock ABI {version} (answers reach no course file, no other "
                 "process)" if version else "sandbox: NONE (no Linux Landlock here): the "
                 "answers ran with your rights; run qkv regrade on Linux 5.13+ to contain them")
    lines.append(f"details: {out / 'regrade.csv'}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """Regrade, write the CSV and the summary; 0 when nothing is flagged, else 1."""
    course = require_folder(args.course_dir, "COURSE_DIR")
    for option, value in (("--timeout", args.timeout), ("--memory", args.memory), ("--jobs", args.jobs)):
        if not value > 0:  # NaN too
            raise UsageError(f"{option} must be positive, got {value}")
    found = submissions(course, args.assignment)
    if not found:
        there = {a for _, a, _, _ in submissions(course, None)}
        raise UsageError(f"{course} holds no autograded or submitted notebooks"
                         + (f" of {args.assignment}" + did_you_mean(args.assignment, there)
                            if args.assignment else ""))
    plans = {(a, p.name): source_plan(course, a, p.name) for _, a, p, _ in found}
    out = outdir.prepare(Path(args.out), OUTPUTS, args.force)
    work = []
    for student, assignment, path, autograded in found:
        try:
            work.append((student, assignment, read_notebook(path), autograded,
                         plans[assignment, path.name], args.timeout, args.memory << 20))
        except UsageError as e:
            print(f"qkv regrade: skipped {e}", file=sys.stderr)
    # Each submission's grading waits on its own child process: threads are enough.
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = [row for rows in pool.map(lambda w: regrade_notebook(*w), work) for row in rows]
    text = summary(rows, out)
    try:
        with outdir.atomic(out / "regrade.csv") as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(COLUMNS)
            writer.writerows(r[:6] + [_flag_text(r[6])] for r in rows)
        outdir.write_text(out / "summary.txt", text)
        outdir.record(out, OUTPUTS)
    except OSError as e:
        raise UsageError(f"cannot write to {out}: {e.strerror or e}") from None
    print(text, end="")
    return 1 if any(r[6] for r in rows) else 0
