"""The record of a grading run: one JSON result file per submission, written whole or not at all.

``<course>/qkv-grades/<student>/<assignment>/<notebook>.json`` is what ``qkv grade`` decided
for one submitted notebook (every test's verdict and message, the written answers' text for
formgrader, the flags for a person). It is written by the trusted parent only, after the
submission's sandbox has ended, atomically (a temporary file renamed into place), so an
interrupted run leaves every file complete or absent. It is THE record: the gradebook and the
autograded notebooks are written from these files (:mod:`.gradebook`), a run grades only the
submissions whose file is missing or stale (the submission or the instructor's plan changed
since), ``--force`` grades everything again, and each shard writes only its own students'.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

FOLDER = "qkv-grades"
#: The questions' first answers, recorded beside the notebook by ``check_question``
#: (:mod:`qkv.checks.questions.record`): part of what is graded.
ANSWERS_FILE = "qkv_answers.json"
#: The result files' format: a file of another is stale (format 2 keeps the student's markdown).
FORMAT = 2


def path_of(course: Path, student: str, assignment: str, notebook: str) -> Path:
    """Where a submission's result file lives."""
    return course / FOLDER / student / assignment / f"{notebook}.json"


def answers_path(folder: Path) -> Path:
    """The questions' record in a submission's folder: ``qkv_answers.json``, or the one file
    named like it when that name is missing (a browser's second download is
    ``qkv_answers (1).json``)."""
    if not (folder / ANSWERS_FILE).exists():
        others = sorted(folder.glob("qkv_answers*.json"))
        if len(others) == 1:
            return others[0]
    return folder / ANSWERS_FILE


def submission_sha(notebook: Path) -> str:
    """What a result file is the result of: the notebook's SHA-256, and the questions' record
    beside it when there is one (the first answers are graded from it)."""
    answers = answers_path(notebook.parent)
    regular = answers.is_file() and not answers.is_symlink()  # as the grader reads it
    return sha256(notebook) + (f"+{sha256(answers)}" if regular else "")


def sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes ("" when it cannot be read)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return ""
    return h.hexdigest()


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def write(path: Path, record: Dict[str, Any]) -> None:
    """Write a result file atomically: complete, or not there at all (and fsync'ed first, so
    a crash of the machine leaves no empty file under the final name)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"format": FORMAT, **record}, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def read(path: Path) -> Optional[Dict[str, Any]]:
    """A result file's record; None when it is missing, partial or from another format."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return None
    return record


#: The start of the flag of a submission whose questions' record went away since it was graded.
ANSWERS_GONE = f"{ANSWERS_FILE}, which this submission's last grading read"


def answers_gone(previous: Optional[Dict[str, Any]], record: Dict[str, Any]) -> Optional[str]:
    """The flag's detail when the questions' record graded last time (``previous``: the result
    file before this grading) is gone now: a re-collect (``zip_collect --force``) clears the
    student's folder, and the first answers are then judged on the notebook. None otherwise
    (said again on a regrade while it is still gone)."""
    if previous is None or "+" in str(record.get("submission_sha256", "")):
        return None
    had = "+" in str(previous.get("submission_sha256", ""))
    said = any(str(f.get("detail", "")).startswith(ANSWERS_GONE)
               for f in previous.get("flags", []) if isinstance(f, dict))
    if not (had or said):
        return None
    return (f"{ANSWERS_GONE} (the questions' first answers), is gone from the submission's "
            "folder: its questions were judged on the notebook's answers. A re-collect "
            "(`nbgrader zip_collect --force`) deletes it when the new download lacks it: copy "
            "it back from the earlier download and grade again")


def current(path: Path, submission_sha: str, plan_digest: str) -> bool:
    """Whether a result file records this very submission, graded under this plan."""
    record = read(path)
    return (record is not None and record.get("submission_sha256") == submission_sha
            and record.get("plan") == plan_digest)


def all_results(course: Path, assignment: str) -> Iterator[Tuple[str, str, Dict[str, Any]]]:
    """Every readable result of an assignment: ``(student, notebook, record)``, sorted."""
    for path in sorted((course / FOLDER).glob(f"*/{assignment}/*.json")):
        record = read(path)
        if record is not None and not path.name.startswith("."):
            yield path.parent.parent.name, path.stem, record


def orphans(course: Path, assignment: str) -> Iterator[Tuple[str, str]]:
    """``(student, notebook)`` of each result file whose submission folder
    (``submitted/<student>/<assignment>/``) is gone: a folder renamed to the registered id, or
    removed. Its result is no submission's now, and is not written to the gradebook (written,
    it brought back a student removed from it with ``nbgrader db student remove``)."""
    for path in sorted((course / FOLDER).glob(f"*/{assignment}/*.json")):
        student = path.parent.parent.name
        if not path.name.startswith(".") and \
                not (course / "submitted" / student / assignment).is_dir():
            yield student, path.stem
