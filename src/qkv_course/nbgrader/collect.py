"""Collecting an LMS download with ``nbgrader zip_collect``: every file goes to a student, or it stops.

nbgrader's own collector reads the student id and the notebook with a regular expression, and
skips a file it cannot read (``zip_collect`` still exits 0, and the student gets a zero). Ids
with ``_`` in them break the usual pattern ``<id>_<notebook>.ipynb``: ``frank_li_masking.ipynb``
is read as student ``frank``. This collector instead knows the notebooks the assignment
released, so the id is whatever comes before ``_<notebook>``, however many ``_``, ``-`` or
``.`` it holds; and a file it cannot map to a student and a released notebook stops the
collection with an error that names the file and what was expected.

Submission times: an LMS download carries none that ``zip_collect`` can read, and a
``timestamp.txt`` written by hand into ``submitted/`` is deleted by the next ``zip_collect
--force`` (nbgrader clears a student's folder before copying the new files). So the times live
outside ``submitted/``, in ``downloaded/<assignment>/timestamps.csv`` (lines ``<student
id>,<time>``, e.g. ``erin,2026-03-02 08:15:00 UTC``; a header line ``student_id,timestamp``
is allowed): the collector gives each collected file its student's time, and ``zip_collect``
writes ``timestamp.txt`` again on every run.

Enable it in ``nbgrader_config.py``::

    c.ZipCollectApp.collector_plugin = "qkv_course.nbgrader.collect.StudentFileCollector"
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Dict, List, Optional

from nbgrader.plugins import FileNameCollectorPlugin

from . import timestamps

#: The questions' first answers, beside the notebook (:mod:`qkv.checks.questions.record`).
ANSWERS = "qkv_answers.json"
#: The submission times, in ``downloaded/<assignment>/`` (beside ``archive/``).
TIMESTAMPS = timestamps.NAME
# nbgrader makes a folder per student id: keep ids to characters that are safe in a path.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _student_of(name: str, released: List[str]) -> Optional[str]:
    """The student id of an extracted file's name: what comes before ``_<notebook>`` (the
    longest released notebook first: "a_masking.ipynb" must not win over
    "extra_masking.ipynb"; the questions' record, ``qkv_answers.json``, as a notebook), or
    None."""
    for notebook in sorted(released, key=len, reverse=True) + [ANSWERS]:
        if name.endswith("_" + notebook):
            return name[: -len(notebook) - 1]
    return None


class StudentFileCollector(FileNameCollectorPlugin):
    """Map ``.../<student id>_<released notebook>`` to that student; refuse anything else."""

    def _released(self) -> List[str]:
        app = self.parent
        folder = app.coursedir.format_path(app.coursedir.release_directory, ".", app.coursedir.assignment_id)
        names = sorted(n for n in os.listdir(folder) if n.endswith(".ipynb")) if os.path.isdir(folder) else []
        if not names:
            self._fail(f"no released notebooks in {folder}: run `python -m qkv_course generate` "
                       "(or nbgrader generate_assignment) before collecting")
        return names

    def _timestamps(self) -> Dict[str, str]:
        """``student id -> time`` from ``downloaded/<assignment>/timestamps.csv`` (none when
        the file is absent); read once per collection, when each line that names no collected
        student, and each collected student without a line, is logged as a warning."""
        if getattr(self, "_stamps", None) is None:
            app = self.parent
            path = os.path.join(os.path.dirname(app._format_collect_path(app.archive_directory)),
                                TIMESTAMPS)
            self._stamps: Optional[Dict[str, str]] = {}
            if os.path.isfile(path):
                stamps, bad = timestamps.parse(Path(path))
                for n, line in bad:
                    self._fail(f"{path}, line {n}: expected <student id>,<time> "
                               f"(erin,2026-03-02 08:15:00 UTC), not {line!r}")
                self._stamps = stamps
                app.log.info("Submission times from %s: %d student(s)", path, len(self._stamps))
                for line in timestamps.mismatches(stamps, self._collected(), path):
                    app.log.warning("%s", line)
        return self._stamps

    def _collected(self) -> List[str]:
        """The student id of every file extracted for this collection (those it can map)."""
        app = self.parent
        released = self._released()
        found = set()
        for _, _, files in os.walk(app._format_collect_path(app.extracted_directory)):
            for name in files:
                student = _student_of(name, released)
                if student is not None and _ID.fullmatch(student):
                    found.add(student)
        return sorted(found)

    def _fail(self, message: str) -> None:
        self.parent.fail("zip_collect: " + message)

    def collect(self, submitted_file: str) -> Optional[dict]:
        """The student id and notebook of one extracted file (stops the collection when there are none)."""
        name = os.path.basename(submitted_file)
        released = self._released()
        # The longest notebook name first, and the questions' record (qkv_answers.json, handed
        # in beside the notebook: the first answers are the graded ones) as a notebook is.
        student = _student_of(name, released)
        if student is not None:
            if not _ID.fullmatch(student):
                self._fail(f"{submitted_file}: {student!r} is not a usable student id (letters, "
                           "digits, '.', '_' and '-', starting with a letter or digit); "
                           + self._how_to_rename())
            found = {"student_id": student, "file_id": name[len(student) + 1:]}
            stamp = self._timestamps().get(student)
            if stamp:  # zip_collect writes it to submitted/<student>/<assignment>/timestamp.txt
                found["timestamp"] = stamp
            return found
        self._fail(f"{submitted_file} cannot be mapped to a student: expected <student id>_<notebook>, "
                   f"where <notebook> is one of {', '.join(released)} (or {ANSWERS}); "
                   + self._how_to_rename())
        return None

    def _how_to_rename(self) -> str:
        """What works: zip_collect extracts the archive again on every run (with --force; without,
        it stops at the folder it extracted before), so a rename in the extracted folder is undone."""
        app = self.parent
        archive = app._format_collect_path(app.archive_directory)
        return (f"rename or remove it in {archive}, not in the extracted folder (each run extracts "
                f"the archive again): unzip the archive there (`cd {archive} && unzip <file>.zip "
                "&& mv <file>.zip ..`), rename or remove the file, and run `nbgrader zip_collect "
                f"--force {app.coursedir.assignment_id}`; or leave it out of the archive and copy "
                f"it by hand to submitted/<student id>/{app.coursedir.assignment_id}/<notebook>")
