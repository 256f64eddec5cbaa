"""``nbgrader zip_collect`` with the course's collector: ids with _ - . work, strays stop it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from qkv_course.config import ROOT

ASSIGNMENT = "06-masking"
NOTEBOOK = "masking.ipynb"


def _course(tmp_path: Path, files: list[str]) -> Path:
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    shutil.copytree(ROOT / "exercises" / ASSIGNMENT, tmp_path / "exercises" / ASSIGNMENT)
    archive = tmp_path / "downloaded" / ASSIGNMENT / "archive"
    archive.mkdir(parents=True)
    released = (ROOT / "exercises" / ASSIGNMENT / NOTEBOOK).read_bytes()
    with zipfile.ZipFile(archive / "download.zip", "w") as zf:
        for name in files:
            zf.writestr(f"submissions/{name}", released)
    return tmp_path


def _zip_collect(course: Path) -> subprocess.CompletedProcess:
    # nbgrader runs alembic: this Python's bin goes first on PATH.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([sys.executable, "-m", "nbgrader", "zip_collect", ASSIGNMENT, "--force"],
                          cwd=course, capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.slow
def test_ids_with_underscores_dashes_and_dots_reach_their_student(tmp_path):
    ids = ["frank_li", "anne-marie", "j.doe", "x_y_z-1.2"]
    course = _course(tmp_path, [f"{i}_{NOTEBOOK}" for i in ids])
    proc = _zip_collect(course)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for i in ids:
        assert (course / "submitted" / i / ASSIGNMENT / NOTEBOOK).is_file(), (i, proc.stderr)
    assert sorted(p.name for p in (course / "submitted").iterdir()) == sorted(ids)


@pytest.mark.slow
def test_the_questions_record_goes_with_its_notebook(tmp_path):
    """The notebook tells students to hand in qkv_answers.json (their first answers, the graded
    ones) beside it: it is collected to the same folder."""
    course = _course(tmp_path, [f"frank_li_{NOTEBOOK}", "frank_li_qkv_answers.json"])
    proc = _zip_collect(course)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    folder = course / "submitted" / "frank_li" / ASSIGNMENT
    assert sorted(p.name for p in folder.iterdir() if p.suffix != ".txt") == [
        NOTEBOOK, "qkv_answers.json"]


@pytest.mark.slow
@pytest.mark.parametrize("stray", ["frank_li_masking_v2.ipynb", "notes.txt", "_masking.ipynb"])
def test_a_file_that_maps_to_no_student_stops_the_collection(tmp_path, stray):
    course = _course(tmp_path, [f"alice_{NOTEBOOK}", stray])
    proc = _zip_collect(course)
    assert proc.returncode != 0
    assert stray in proc.stderr and "zip_collect:" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_the_error_says_where_a_rename_works_and_doing_so_collects_the_file(tmp_path):
    """instr8: the error said "rename or remove the file" at its extracted path, where a rename
    is undone (each run extracts the archive again, and without --force stops at the folder).
    It names the archive folder; doing what it says collects the file."""
    stray = f"frank_{NOTEBOOK[:-6]} (1).ipynb"
    course = _course(tmp_path, [f"alice_{NOTEBOOK}", stray])
    proc = _zip_collect(course)
    archive = course / "downloaded" / ASSIGNMENT / "archive"
    assert proc.returncode != 0 and stray in proc.stderr
    assert f"rename or remove it in {archive}, not in the extracted folder" in proc.stderr
    assert f"nbgrader zip_collect --force {ASSIGNMENT}" in proc.stderr
    with zipfile.ZipFile(archive / "download.zip") as zf:  # as it says: unzip there, rename
        zf.extractall(archive)
    (archive / "download.zip").rename(archive.parent / "download.zip")
    (archive / "submissions" / stray).rename(archive / "submissions" / f"frank_{NOTEBOOK}")
    proc = _zip_collect(course)
    assert proc.returncode == 0, proc.stderr
    assert (course / "submitted" / "frank" / ASSIGNMENT / NOTEBOOK).is_file()


@pytest.mark.slow
def test_submission_times_outside_submitted_survive_a_second_collect(tmp_path):
    """instr11: a timestamp.txt written by hand into submitted/ was deleted by the next
    `zip_collect --force` (nbgrader clears the student's folder). The times kept in
    downloaded/<assignment>/timestamps.csv are written again by every collect."""
    course = _course(tmp_path, [f"erin_{NOTEBOOK}", "erin_qkv_answers.json", f"bob_{NOTEBOOK}"])
    (course / "downloaded" / ASSIGNMENT / "timestamps.csv").write_text(
        "student_id,timestamp\nerin,2026-03-02 08:15:00 UTC\n")
    folder = course / "submitted" / "erin" / ASSIGNMENT
    for _ in range(2):  # the second download: collected again with --force
        proc = _zip_collect(course)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert (folder / "timestamp.txt").read_text().startswith("2026-03-02 08:15:00"), \
            proc.stderr
    assert not (course / "submitted" / "bob" / ASSIGNMENT / "timestamp.txt").exists()


@pytest.mark.slow
def test_a_time_that_reaches_no_one_and_a_student_without_one_are_said(tmp_path):
    """instr13: timestamps.csv still said `Frank` (the LMS list) for the file renamed to
    `frank`, and had no line for `gus`: both were collected without a time, graded as on time
    and exported with full marks, in silence. Each is a warning now; the collection goes on."""
    course = _course(tmp_path, [f"frank_{NOTEBOOK}", f"gus_{NOTEBOOK}", f"erin_{NOTEBOOK}"])
    (course / "downloaded" / ASSIGNMENT / "timestamps.csv").write_text(
        "student_id,timestamp\nFrank,2026-03-05 08:15:00 UTC\nerin,2026-03-02 08:15:00 UTC\n")
    proc = _zip_collect(course)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = proc.stdout + proc.stderr
    assert "'Frank': " in said and "gives a time (2026-03-05 08:15:00 UTC) to an id no " \
        "collected file belongs to: that time reaches no one (the file of 'frank', renamed? " \
        "then write 'frank' in its line too)" in said, said
    assert "'gus': NO TIME, " in said and "graded as on time" in said
    assert "'erin'" not in said
    assert (course / "submitted" / "erin" / ASSIGNMENT / "timestamp.txt").is_file()
