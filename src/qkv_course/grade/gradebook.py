"""From the result files to what nbgrader's tools read: ``gradebook.db`` and autograded notebooks.

Run by the trusted parent only, after every sandbox has ended, from the result files
(:mod:`.records`), so writing is idempotent: the same files give the same gradebook, and a run
interrupted here is finished by the next one. A submission whose result file has not changed
since it was last written (a mark beside its autograded notebook says which file that was) is
left alone: writing it again would flag its hand-given scores for review. For each submitted
notebook it does what ``nbgrader autograde`` records, through nbgrader's own API and rules:

- the autograded notebook, ``autograded/<student>/<assignment>/<notebook>.ipynb`` (made by
  :mod:`.autograded`): the release's cells, the student's answer cells and written answers (and any markdown they wrote
  or added, as text), the cells the student added, and the instructor's test cells (hidden
  tests included) with each failing test's message as its error output (``AssertionError``),
  so ``nbgrader generate_feedback``, ``nbgrader export``, formgrader and ``qkv report`` read it
  as after ``nbgrader autograde``;
- in the gradebook (``nbgrader.api.Gradebook``): the student, the submission (its
  ``timestamp.txt``), and each grade cell's ``auto_score`` and ``needs_manual_grade`` as
  nbgrader's ``SaveAutoGrades`` sets them (``nbgrader.utils.determine_grade`` on the autograded
  cell: a test with an error output scores 0, one without the full points; a written answer
  left as released scores 0, one the student wrote waits for a person; a score given by hand
  is kept and flagged for review), and "No response." on answers left as released. A test
  cell that calls no check waits for a person (``auto_score`` None).
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..usage import UsageError
from . import autograded, outdated, records, roster
from .plan import Plan
from .notebook_file import read_regular


def _stamp_text(course: Path, student: str, assignment: str) -> str:
    """The submission's ``timestamp.txt``, read as the notebook is (a regular file, 1 KiB at
    most: a link to a FIFO or /dev/zero would stall or flood the write); "" when there is none."""
    try:
        raw = read_regular(course / "submitted" / student / assignment / "timestamp.txt", 1024)
        return raw.decode("utf-8").strip() if len(raw) <= 1024 else ""
    except (OSError, UnicodeDecodeError):
        return ""


def _timestamp(stamp: str) -> Any:
    from nbgrader.utils import parse_utc

    try:
        return parse_utc(stamp) if stamp else None
    except (ValueError, OverflowError):
        return None


def _record_grades(gb: Any, node: Any, plan: Plan, student: str,
                   before: Optional[Dict[str, str]] = None, unread: bool = False,
                   reopened: Optional[List[str]] = None) -> None:
    """nbgrader's SaveAutoGrades on the autograded notebook (checkless tests: for a person).

    ``before``: what a person graded last time (:func:`.autograded.answer_texts` of the notebook
    written then): a written answer or task whose text is the same keeps its grade without being sent
    back for review (a regrade for a fixed check, or a changed record of first answers,
    flagged every hand grade of the class again); one whose text changed is flagged.

    ``unread``: the notebook could not be read, so its written answers are not "left as
    released" (scored 0, "No response."): they wait for a person, as its tasks do.

    ``reopened``: gets the grade id of each answer a person had scored, and that goes back to
    a person now (its text changed): the run names them.
    """
    from nbgrader import utils

    now = autograded.answer_texts(node.cells)
    same = {gid for gid, said in now.items() if (before or {}).get(gid) == said}
    for cell in node.cells:
        meta = cell.metadata.get("nbgrader", {})
        gid = meta.get("grade_id")
        if not gid:
            continue
        if utils.is_grade(cell) or utils.is_task(cell):
            grade = gb.find_grade(gid, plan.notebook, plan.assignment, student)
            # Scored by a person, for this very text, and not flagged since (formgrader clears
            # the flag when a person saves a score; a flag waits for that person, whatever
            # this regrade finds).
            reviewed = grade.manual_score is not None and gid in same and \
                not grade.needs_manual_grade
            was_settled = grade.manual_score is not None and not grade.needs_manual_grade
        if utils.is_grade(cell):
            score = (None if gid in plan.manual_tests or (unread and utils.is_solution(cell))
                     else utils.determine_grade(cell, None)[0])
            grade.auto_score = score
            grade.needs_manual_grade = not (score is None and reviewed) and (
                grade.manual_score is not None or score is None)
        elif utils.is_task(cell):
            # A task's answer is the student's text below it, which no check reads: a person
            # grades it, and reviews it again when that text changed (as a written answer),
            # rather than keep a score given to other text.
            grade.auto_score = None
            grade.needs_manual_grade = not reviewed
        if (utils.is_grade(cell) or utils.is_task(cell)) and reopened is not None and \
                was_settled and grade.needs_manual_grade:
            reopened.append(gid)
        if utils.is_solution(cell) or utils.is_task(cell):
            comment = gb.find_comment(gid, plan.notebook, plan.assignment, student)
            unchanged = (meta.get("checksum") == utils.compute_checksum(cell)
                         and not utils.is_task(cell) and not unread)
            comment.auto_comment = "No response." if unchanged else None


def require_assignment(course: Path, assignment: str) -> None:
    """Refuse at once (before any grading) when the gradebook does not know ``assignment``.

    Read with sqlite itself, not nbgrader (whose import takes seconds, and whose Gradebook
    would create an empty ``gradebook.db``); a gradebook sqlite cannot read is left to
    nbgrader to explain when it is written.

    Raises:
        UsageError: no ``gradebook.db``, or no such assignment in it.
    """
    db = course / "gradebook.db"
    fix = f"run `nbgrader generate_assignment {assignment} --force` in {course} first"
    if not db.is_file():
        raise UsageError(f"{db} does not exist: {fix}")
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            row = con.execute("SELECT 1 FROM assignment WHERE name = ?", (assignment,)).fetchone()
    except sqlite3.Error:
        return
    if row is None:
        raise UsageError(f"the gradebook has no assignment {assignment!r}: {fix}")


def write(course: Path, plans: Dict[str, Plan], only: Any = None, skip: Any = (),
          failed: Optional[List[str]] = None, reopened: Optional[List[str]] = None) -> int:
    """Write the gradebook and the autograded notebooks from an assignment's result files.

    Args:
        course: the course folder (holding ``gradebook.db``).
        plans: the assignment's plans, by notebook name.
        only: students to write (None: every student with a result file).
        skip: ``(student, notebook)`` pairs not to write (a result file that is stale).
        failed: where to say each submission that could not be written (the others are
            written all the same: one student's file costs nobody else).

    Returns:
        how many submissions were written.

    Raises:
        UsageError: the gradebook does not know the assignment (run generate_assignment).
    """
    assignment = next(iter(plans.values())).assignment
    with warnings.catch_warnings():
        # nbgrader's own add_submission makes SQLAlchemy warn about autoflush (as under
        # nbgrader autograde); the rows are written all the same.
        warnings.simplefilter("ignore")
        return _write_all(course, plans, only, assignment, set(skip),
                          failed if failed is not None else [],
                          reopened if reopened is not None else [])


def _late_plugin(course: Path) -> Any:
    """nbgrader's late-submission plugin as the course configures it (``penalty_method``, or a
    plugin class of the course's own: ``AssignLatePenalties.plugin_class``), as ``nbgrader
    autograde`` would apply it."""
    from nbgrader.preprocessors import AssignLatePenalties
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    cfg = Config()
    if (course / "nbgrader_config.py").is_file():
        cfg = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    assign = AssignLatePenalties(config=cfg)
    assign.init_plugin()
    return assign


def _late_penalty(gb: Any, late: Any, plan: Plan, student: str) -> None:
    """The notebook's late-submission penalty, from the submission's timestamp and the
    assignment's due date (none when either is missing): what ``nbgrader autograde`` sets, and
    ``nbgrader export`` subtracts."""
    submission = gb.find_submission(plan.assignment, student)
    notebook = gb.find_submission_notebook(plan.notebook, plan.assignment, student)
    notebook.late_submission_penalty = None
    if submission.total_seconds_late > 0:
        penalty = late.plugin_inst.late_submission_penalty(student, notebook.score,
                                                           submission.total_seconds_late)
        if penalty is not None:  # as nbgrader bounds it: from 0 to the notebook's score
            notebook.late_submission_penalty = min(max(float(penalty), 0.0), notebook.score)


def _write_all(course: Path, plans: Dict[str, Plan], only: Any, assignment: str,
               skip: set, failed: List[str], reopened: List[str]) -> int:
    from nbgrader.api import Gradebook, MissingEntry

    written = 0
    late = _late_plugin(course)
    # A folder that names no one on the roster is written as a new student (nothing of it is
    # lost), flagged: the run names it (:mod:`.roster`).
    on_roster = roster.registered(course)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            raise UsageError(f"the gradebook has no assignment {assignment!r}: run `nbgrader "
                             f"generate_assignment {assignment} --force` first") from None
        known = {s.id for s in gb.students}
        for student, notebook, record in records.all_results(course, assignment):
            if (only is not None and student not in only) or notebook not in plans \
                    or (student, notebook) in skip:
                continue
            plan = plans[notebook]
            folder = course / "autograded" / student / assignment
            # Written already from this very result file: writing it again would only flag
            # every score given by hand for review (as after grading again), for nothing.
            mark = folder / f".{notebook}.qkv-result"
            written_nb = folder / f"{notebook}.ipynb"
            digest = records.sha256(records.path_of(course, student, assignment, notebook))
            # The time handed in, too: a corrected timestamps.csv (then `zip_collect --force`)
            # must reach the gradebook, and the late penalty with it, without grading again.
            stamp = _stamp_text(course, student, assignment)
            digest += " " + hashlib.sha256(stamp.encode("utf-8")).hexdigest()
            # The autograded notebook as written then too: nbgrader autograde may have
            # replaced it (and the grades) since.
            # (A grade marked outdated is written again: its submission is current again, the
            # earlier file handed back, say, and the mark is lifted.)
            if _marked(mark, f"{digest} {records.sha256(written_nb)}") and \
                    _has_submission(gb, assignment, student) and \
                    not outdated.mark_path(course, student, assignment, notebook).is_file():
                continue
            try:
                before = autograded.previous_answers(written_nb)
                node = autograded.write_notebook(written_nb,
                                                 autograded.autograded_notebook(plan, record))
                if stamp:
                    (folder / "timestamp.txt").write_text(stamp + "\n", encoding="utf-8")
                gb.update_or_create_student(student)
                when = _timestamp(stamp)
                gb.update_or_create_submission(assignment, student,
                                               **({"timestamp": when} if when else {}))
                again: List[str] = []
                _record_grades(gb, node, plan, student, before,
                               unread=bool(record.get("unreadable")), reopened=again)
                if record.get("flags") or (on_roster and student not in on_roster):
                    # formgrader's flag column shows it to whoever grades
                    gb.find_submission_notebook(plan.notebook, assignment, student).flagged = True
                # A grade flagged as an earlier submission's is current again.
                outdated_mark = outdated.lift(gb, course, student, assignment, notebook, record)
                gb.db.flush()
                _late_penalty(gb, late, plan, student)
                gb.db.commit()  # one submission's grades together
                reopened += [f"{student} {assignment}/{notebook}: {gid}" for gid in again]
            except Exception as e:  # noqa: BLE001 (said, and the next student is written)
                gb.db.rollback()
                failed.append(f"{student} {assignment}/{notebook}: NOT WRITTEN to the gradebook "
                              f"({type(e).__name__}: {str(e)[:200]}); its result file is kept, "
                              "a rerun writes it again")
                continue
            # After the commit: an interrupted write is done again by the next run.
            if student not in known:
                roster.note_added(course, [student])
                known.add(student)
            mark.write_text(f"{digest} {records.sha256(written_nb)}", encoding="utf-8")
            if outdated_mark is not None:
                outdated_mark.unlink(missing_ok=True)
            written += 1
    return written


def _marked(mark: Path, digest: str) -> bool:
    try:
        return bool(digest.strip()) and mark.read_text(encoding="utf-8") == digest
    except OSError:
        return False


def _has_submission(gb: Any, assignment: str, student: str) -> bool:
    from nbgrader.api import MissingEntry

    try:
        gb.find_submission(assignment, student)
        return True
    except MissingEntry:
        return False
