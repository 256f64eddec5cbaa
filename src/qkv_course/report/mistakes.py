"""What a class got wrong: every submission's tests, counted per assignment, test and mistake.

A submission is read from the result file ``qkv grade`` wrote
(``COURSE_DIR/qkv-grades/<student>/<assignment>/``: each test's status and the mistake the
check named, as data), else from a Gradescope ``results.json`` of ``qkv gradescope``'s
autograder (its record under ``extra_data.qkv``), else from its autograded notebook (the test
cells' outputs hold the checks' messages). :func:`summarise` counts them into
:class:`Assignment` s, which ``mistakes.csv`` (:func:`write_csv`) and the page
(:mod:`.page`) show.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Dict, Iterator, List, Optional, Set, Tuple

from ..nbgrader.graded import (BY_HAND, ERROR, FAIL, PASS, TIMEOUT, Outcome, Question, notebooks_in,
                               questions, read_notebook)
from ..grade.summary import what_failed as _what
from ..usage import UsageError
from . import exported

COLUMNS = ("assignment", "test", "mistake", "students")
GRADES = "qkv-grades"  # qkv grade's result files (qkv_course.grade.records.FOLDER)
STATUSES = (PASS, FAIL, ERROR, TIMEOUT)


@dataclass
class Assignment:
    """What a class did on one assignment.

    Args:
        name: the assignment, e.g. ``06-masking``.
        students: who submitted it (has a folder in ``autograded/``).
        tests: the autograded test cells, in notebook order.
        passed: test -> how many students passed it.
        mistakes: ``(test, mistake, students)``, sorted as in ``mistakes.csv``.
    """

    name: str
    students: List[str] = field(default_factory=list)
    tests: List[str] = field(default_factory=list)
    passed: Counter = field(default_factory=Counter)
    mistakes: List[Tuple[str, str, int]] = field(default_factory=list)


def is_course(folder: Path) -> bool:
    """Whether ``folder`` is an nbgrader course graded here (``autograded/`` or ``qkv grade``'s
    result files), rather than a folder of Gradescope ``results.json`` files."""
    return (folder / "autograded").is_dir() or (folder / GRADES).is_dir()


def read_course(course: Path, autograded: Path, records: Optional[Dict] = None
                ) -> Dict[str, Dict[str, List[Question]]]:
    """The class as ``qkv grade``'s result files record it, and, for a submission without
    one, as its autograded notebook says; or, in a folder that is no course, as the Gradescope
    ``results.json`` files under it say (``records``: those of :func:`gradescope_records`,
    when the caller has read them already). Not both: a course folder also holds
    ``results.json`` files that are not the class's (the instructors' page's local try of the
    autograder, an export kept beside it), and another folder may hold several courses."""
    if not is_course(course):
        return read_gradescope(course, records)
    graded = read_results(course)
    done = {(s, a) for a, students in graded.items() for s in students}
    found = read_class(autograded, done) if autograded.is_dir() else {}
    for assignment, students in graded.items():
        found.setdefault(assignment, {}).update(students)
    return found


def read_results(course: Path) -> Dict[str, Dict[str, List[Question]]]:
    """Every result file of ``qkv grade``: ``{assignment: {student: questions}}``."""
    from ..grade import records  # noqa: PLC0415 (only where there are results)

    found: Dict[str, Dict[str, List[Question]]] = {}
    for path in sorted((course / GRADES).glob("*/*/*.json")):
        record = records.read(path)
        if record is None or path.name.startswith("."):
            continue
        student, assignment = path.parent.parent.name, path.parent.name
        found.setdefault(assignment, {}).setdefault(student, []).extend(_questions(record))
    return found


def _described(test: Dict) -> Optional[str]:
    """What a failing check said was wrong when it named no known mistake ("the mask is
    transposed (rows and columns swapped)"), its numbers left out so that a class's answers
    count together; ``None`` when it said nothing of the kind (a wrong value, no more)."""
    what = _what(test)
    if not what or what.startswith(("it raised", "largest difference", "the result differs")):
        return None
    if what.startswith("expected one of"):  # a question's answer that is none of its letters
        return NOT_A_CHOICE
    # "expected a number ..., got str 'ten'": what was expected, not each student's answer.
    what = re.sub(r",? got .*$", "", what) if what.startswith("expected ") else what
    return re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", re.split(r"[:;]", what)[0]).strip()


#: How ``qkv report`` counts an answer to a multiple-choice question that is none of its
#: letters ("z", "e"): one row, not one per string.
NOT_A_CHOICE = "not one of the choices"


def _questions(record: Dict) -> List[Question]:
    """A result record's tests (and its hand-graded ones) as :class:`Question` s."""
    qs = [Question(t["grade_id"], float(t["points"]), False,
                   Outcome(t["status"] if t["status"] in STATUSES else ERROR,
                           t.get("message", ""), t.get("mistake") or _described(t)))
          for t in record.get("tests", [])]
    qs += [Question(g, float(p), True, Outcome(BY_HAND))
           for g, p in record.get("manual_tests", {}).items()]
    return qs


def gradescope_files(folder: Path, say: bool = False) -> Iterator[Path]:
    """Every ``results.json`` under ``folder`` where the autograder writes one (outside
    ``qkv-grades/``; never one inside a student's upload: :mod:`.exported`)."""
    return exported.results_files(folder, GRADES, say)


def read_gradescope(folder: Path, records: Optional[Dict] = None
                    ) -> Dict[str, Dict[str, List[Question]]]:
    """Every Gradescope ``results.json`` under ``folder`` that ``qkv gradescope``'s autograder
    wrote (its record in ``extra_data.qkv``): ``{assignment: {student: questions}}``, from
    :func:`gradescope_records` (or ``records``, read from it already)."""
    records = gradescope_records(folder) if records is None else records
    return {assignment: {student: _questions(record) for student, record in students.items()}
            for assignment, students in records.items()}


def gradescope_records(folder: Path) -> Dict[str, Dict[str, Dict]]:
    """Each student's latest record under ``folder``: ``{assignment: {student: record}}``.

    A student's latest record (by ``graded_at``) counts, as a resubmission replaces the
    last on Gradescope, and when there are several that is said on stderr, with their files
    (a time is what the record claims). Other ``results.json`` files are skipped with a
    warning on stderr, and so is a record that names a student the export's metadata does
    not list for its submission folder.
    """
    latest: Dict[Tuple[str, str], Dict] = {}
    seen: Dict[Tuple[str, str], List[Path]] = {}
    exports: Dict[Path, Optional[Dict[str, Set[str]]]] = {}  # each export's submitters
    for path in gradescope_files(folder, say=True):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))["extra_data"]["qkv"]
            key = (str(record["assignment"]), str(record["student"]))
            _questions(record)  # read whole here: a malformed one is skipped
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            print(f"qkv report: skipped {path}: not a results.json of qkv gradescope ({e!r})",
                  file=sys.stderr)
            continue
        if exported.claims_another(path, key[1], exports):
            print(f"qkv report: skipped {path}: it names {key[1]!r}, who is not a submitter "
                  f"of its submission in {exported.METADATA}", file=sys.stderr)
            continue
        seen.setdefault(key, []).append(path)
        if key not in latest or str(record.get("graded_at", "")) >= str(
                latest[key].get("graded_at", "")):
            latest[key] = record
    anonymous = sum(len(paths) for (_, student), paths in seen.items() if student == "anonymous")
    if anonymous > 1:  # graded without Gradescope's submission_metadata.json (a local try)
        print(f"qkv report: {anonymous} results.json files name no student ('anonymous'): "
              "they count as one student; Gradescope's own runs name each", file=sys.stderr)
    for (assignment, student), paths in sorted(seen.items()):
        if len(paths) > 1 and student != "anonymous":
            print(f"qkv report: {len(paths)} records name {student} in {assignment} ("
                  + ", ".join(str(p.relative_to(folder)) for p in paths[:5])
                  + f"): the one that says it was graded last "
                  f"({latest[(assignment, student)].get('graded_at', '?')}) counts; check "
                  "they are all the autograder's (one per submission)", file=sys.stderr)
    found: Dict[str, Dict[str, Dict]] = {}
    for (assignment, student), record in sorted(latest.items()):
        found.setdefault(assignment, {})[student] = record
    return found


def read_class(autograded: Path, skip: Collection[Tuple[str, str]] = ()
               ) -> Dict[str, Dict[str, List[Question]]]:
    """Every autograded submission's questions: ``{assignment: {student: questions}}``.

    A file that is not a notebook is skipped with a warning on stderr, and so is every
    ``(student, assignment)`` in ``skip`` (those ``qkv grade`` has a result file for).
    """
    found: Dict[str, Dict[str, List[Question]]] = {}
    for student, assignment, notebook in notebooks_in(autograded):
        if (student, assignment) in skip:
            continue
        try:
            nb = read_notebook(notebook)
        except UsageError as e:
            print(f"qkv report: skipped {e}", file=sys.stderr)
            continue
        found.setdefault(assignment, {}).setdefault(student, []).extend(questions(nb))
    return found


def summarise(by_assignment: Dict[str, Dict[str, List[Question]]]) -> List[Assignment]:
    """Count, per assignment and test, the students who passed and each kind of failure.

    Each student counts once per test (their first cell of that name); a test a student's
    notebooks lack counts as not passed. Hand-graded cells are left out.
    """
    result = []
    for name in sorted(by_assignment):
        a = Assignment(name, sorted(by_assignment[name]))
        counts: Counter = Counter()
        for student in a.students:
            seen = set()
            for q in by_assignment[name][student]:
                if q.by_hand or q.grade_id in seen:
                    continue
                seen.add(q.grade_id)
                if q.grade_id not in a.tests:
                    a.tests.append(q.grade_id)
                if q.outcome.status == PASS:
                    a.passed[q.grade_id] += 1
                else:
                    counts[q.grade_id, q.outcome.label] += 1
        a.mistakes = sorted(((t, m, n) for (t, m), n in counts.items()),
                            key=lambda row: (row[0], -row[2], row[1]))
        result.append(a)
    return result


def write_csv(path: Path, assignments: List[Assignment]) -> None:
    """``mistakes.csv``: one row per assignment, test and mistake, with its student count."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for a in assignments:
            writer.writerows((a.name, test, mistake, n) for test, mistake, n in a.mistakes)
