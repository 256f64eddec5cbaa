"""Grades that wait for a person say so: in students' feedback and in the exported grades.

After ``nbgrader autograde``, a written answer (graded by hand in formgrader) has no score yet,
and nbgrader counts it as 0: the feedback page shows "Written response 0.0 / 2.0", even for the
model answer, and ``grades.csv`` holds a total that will still change, with nothing marking it.

- :class:`PendingGrades` (feedback): nbgrader's ``GetGrades``, which also marks every answer that
  nobody has scored yet (no score from the autograder, none saved in formgrader). The course's
  feedback template, ``templates/feedback_qkv/feedback.html.j2`` (nbgrader's page with two
  blocks changed), says "Not graded yet" on those answers and lists them above the notebook,
  and shows no "0.0 / 2.0" for them.
- :class:`ProvisionalCsvExport` (``nbgrader export``): nbgrader's ``grades.csv`` columns, properly
  quoted, plus ``needs_manual_grading`` (nbgrader's flag, as formgrader shows it: an answer waits
  for a person, or a hand-given score is to be reviewed after autograding again) and
  ``ungraded_points`` (the points of the answers nobody has scored: while it is above 0, the
  total is provisional), and ``flagged`` (formgrader's flag on one of its notebooks: for a
  person to read before the total is used; ``qkv grade`` sets it on a flag of its own, on a
  grade that is of an earlier submission than the current one, which could not be graded, and
  on a submission folder that names no one on the roster; set here too on every row of two ids
  that are one in another Unicode form or case, the registered student's 0 included).

Enable both in ``nbgrader_config.py``::

    c.GenerateFeedback.preprocessors = ["qkv_course.nbgrader.provisional.PendingGrades", ...]
    c.GenerateFeedback.exporter_class = "qkv_course.nbgrader.provisional.FeedbackExporter"
    c.FeedbackExporter.template_name = "feedback_qkv"
    c.FeedbackExporter.template_file = "feedback.html.j2"
    c.FeedbackExporter.extra_template_basedirs = qkv_course.nbgrader.provisional.template_dirs()
    c.ExportApp.plugin_class = "qkv_course.nbgrader.provisional.ProvisionalCsvExport"

The template is set on :class:`FeedbackExporter`, not on nbconvert's ``HTMLExporter``: formgrader
renders each submission with an ``HTMLExporter`` of its own template, which settings on
``HTMLExporter`` would replace (every grading page then fails, ``TemplateNotFound``).
"""

from __future__ import annotations

import csv
import re
import unicodedata
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

from nbconvert.exporters import HTMLExporter
from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from nbgrader.preprocessors import GetGrades

TEMPLATE = "feedback_qkv"
# nbgrader's columns, in its order (LMS imports set up for nbgrader's file keep working), then ours.
COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
           "raw_score", "late_submission_penalty", "score", "max_score",
           "needs_manual_grading", "ungraded_points", "flagged"]


def template_dirs() -> List[str]:
    """Where the feedback templates are: nbgrader's (ours extends its ``feedback``), then ours."""
    import nbgrader

    ours = Path(__file__).resolve().parent / "templates"
    theirs = Path(nbgrader.__file__).resolve().parent / "server_extensions" / "formgrader" / "templates"
    return [str(theirs), str(ours)]


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter under a name of its own, for the feedback pages alone (see the
    module's docstring). nbgrader's contents at the top of the page are no block a template
    can change: an answer still waiting for a person gets "not graded yet" there, here."""

    def from_notebook_node(self, nb: NotebookNode, resources: Any = None,
                           **kw: Any) -> Tuple[str, Any]:
        html, resources = super().from_notebook_node(nb, resources, **kw)
        for p in (resources or {}).get("nbgrader", {}).get("pending", []):
            entry = re.escape(f'href="#{p["grade_id"]}"')
            html = re.sub(rf'(<li><a {entry}>[^<]*</a>) \(Score: [^)]*\)',
                          rf'\1 (not graded yet: {p["points"]:g} points, graded by hand)', html)
        return html, resources


class PendingGrades(GetGrades):
    """``GetGrades`` that marks the answers still waiting for a person, for the feedback template.

    Sets ``cell.metadata.nbgrader.pending`` on each such cell and lists them in
    ``resources["nbgrader"]["pending"]`` (grade id and points, in the notebook's order).
    """

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> Tuple[NotebookNode, ResourcesDict]:
        resources.setdefault("nbgrader", {})["pending"] = []
        return super().preprocess(nb, resources)

    def _get_score(self, cell: NotebookNode, resources: ResourcesDict) -> None:
        super()._get_score(cell, resources)
        meta = cell.metadata.nbgrader
        grade = self.gradebook.find_grade(meta["grade_id"], self.notebook_id, self.assignment_id,
                                          self.student_id)
        if not_scored(grade):
            meta["pending"] = True
            # nbgrader's template prints "score / points" wherever a cell is a grade cell (the
            # contents and the cell's heading); this is the page's copy of the notebook, and
            # the course template gives the cell its own "not graded yet" heading instead.
            meta["grade"] = False
            resources["nbgrader"]["pending"].append({"grade_id": meta["grade_id"],
                                                     "points": float(grade.max_score)})


def not_scored(grade) -> bool:
    """Whether nobody has scored this answer: no score from the autograder, none by hand.

    A written answer left as released has an automatic 0 and waits for no one; a score saved in
    formgrader stays when the notebook is autograded again (nbgrader then flags it for review).
    """
    return grade.auto_score is None and grade.manual_score is None


def _ungraded_points(submission) -> float:
    """The points of a submission's answers that nobody has scored (0.0 when there are none)."""
    return float(sum(grade.max_score for notebook in submission.notebooks
                     for grade in notebook.grades if not_scored(grade)))


def late_penalties(config: Any) -> Callable[[Any], float]:
    """The late penalty of a submission, computed now from each notebook's whole score (the
    points given by hand included) with the course's late-submission plugin (``config``: the
    course's nbgrader configuration), as ``nbgrader autograde`` computes it for one notebook.

    The gradebook's own ``late_submission_penalty`` is what the score was when the notebook
    was last autograded (before or after its hand grading): one late student would export
    two totals depending on the order of the commands."""
    from nbgrader.preprocessors import AssignLatePenalties

    assign = AssignLatePenalties(config=config)
    assign.init_plugin()

    def penalty(submission: Any) -> float:
        seconds = submission.total_seconds_late or 0
        if seconds <= 0:
            return 0.0
        total = 0.0
        for notebook in submission.notebooks:
            got = assign.plugin_inst.late_submission_penalty(submission.student.id,
                                                             notebook.score, seconds)
            if got is not None:  # as nbgrader bounds it: from 0 to the notebook's score
                total += min(max(float(got), 0.0), notebook.score)
        return total
    return penalty


def rows(gradebook: Gradebook, assignments: Iterable[str] = (), students: Iterable[str] = (),
         late: Optional[Callable[[Any], float]] = None) -> List[Dict]:
    """One row per assignment and student in the gradebook, with :data:`COLUMNS` as keys.

    Args:
        gradebook: an open nbgrader gradebook.
        assignments: only these assignments (all when empty).
        students: only these student ids (all when empty).
        late: a submission's late penalty (:func:`late_penalties`); the gradebook's stored
            one when not given.

    Returns:
        The rows; a student who submitted nothing scores 0 and needs no manual grading.
    """
    assignments, students = {str(a) for a in assignments}, {str(s) for s in students}
    twins = same_ids(s.id for s in gradebook.students)
    out = []
    for assignment in gradebook.assignments:
        if assignments and assignment.name not in assignments:
            continue
        for student in gradebook.students:
            if students and student.id not in students:
                continue
            row = {"assignment": assignment.name, "duedate": assignment.duedate,
                   "student_id": student.id, "last_name": student.last_name,
                   "first_name": student.first_name, "email": student.email,
                   "max_score": assignment.max_score, "timestamp": "", "raw_score": 0.0,
                   "late_submission_penalty": 0.0, "score": 0.0, "needs_manual_grading": False,
                   "ungraded_points": 0.0, "flagged": student.id in twins}
            try:
                submission = gradebook.find_submission(assignment.name, student.id)
            except MissingEntry:
                out.append(row)
                continue
            penalty = late(submission) if late is not None else (
                submission.late_submission_penalty or 0.0)
            ungraded = _ungraded_points(submission)
            row.update(timestamp=submission.timestamp, raw_score=submission.score,
                       late_submission_penalty=penalty,
                       score=max(0.0, submission.score - penalty),
                       needs_manual_grading=bool(submission.needs_manual_grade),
                       ungraded_points=ungraded,
                       flagged=student.id in twins or any(nb.flagged
                                                          for nb in submission.notebooks))
            out.append(row)
    return out


def same_ids(ids: Iterable[str]) -> Set[str]:
    """The ids that are another's in another Unicode form or case (``zoe\u0308``, decomposed as
    a zip made on macOS writes it, and the registered ``zoë``): one student graded under a
    folder's name, the other exporting no grade of it. Their rows are flagged."""
    groups: Dict[str, List[str]] = {}
    for i in ids:
        groups.setdefault(unicodedata.normalize("NFC", i).casefold(), []).append(i)
    return {i for group in groups.values() if len(group) > 1 for i in group}


class ProvisionalCsvExport(ExportPlugin):
    """``nbgrader export`` to ``grades.csv`` (or ``--to``), provisional totals marked."""

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "grades.csv"
        self.log.info("Exporting grades to %s", dest)
        table = rows(gradebook, self.assignment, self.student, late_penalties(self.config))
        with open(dest, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
            writer.writeheader()
            for row in table:
                writer.writerow({k: "" if v is None else v for k, v in row.items()})
        pending = sum(1 for row in table if row["ungraded_points"])
        if pending:
            self.log.warning("%d of %d totals in %s are provisional: answers wait for grading "
                             "by hand (column ungraded_points)", pending, len(table), dest)
        twins = sorted(same_ids(s.id for s in gradebook.students))
        if twins:
            self.log.warning("student ids %s are one id in another Unicode form or case: a "
                             "submission folder named otherwise than the roster was graded as a "
                             "new student (`qkv grade` named it); their rows are flagged",
                             ", ".join(map(ascii, twins)))
        flagged = sum(1 for row in table if row["flagged"])
        if flagged:
            self.log.warning("%d of %d rows in %s are flagged for review in formgrader (column "
                             "flagged; `qkv grade` says why): read them before using their "
                             "totals", flagged, len(table), dest)
