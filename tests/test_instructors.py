"""book/instructors.md's grading path (nbgrader, with ``qkv grade`` in place of ``nbgrader
autograde``) works as written: every command, in order, on a fresh clone.

The commands are read from the page (the ``bash`` blocks between its two ``nbgrader-path``
markers, step by step under their ``###`` headings), not copied here: a command changed on the
page is the command tested. They run in a temporary copy of what a fresh clone holds (the files
``git ls-files`` lists), with this Python's environment, on a class of four:

- alice hands in the model answers, and her written answer is graded by hand (full points) at
  the page's hand-grading step, as formgrader saves a score;
- carol forgets the scale in ``attention_scores`` (a named mistake) and nobody has graded her
  written answer yet: her feedback must say so, and her exported total is provisional;
- frank_li (an id with ``_``) hands in the blank exercise with a test cell edited: the one
  "edited the locked cell" note of ``qkv grade``'s summary;
- bob is registered and submits nothing: a row with zero in the exported grades.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List, Tuple

import nbformat
import pytest

import scaling_submissions as class_
from qkv_course.config import ROOT

PAGE = ROOT / "book" / "instructors.md"
BEGIN, END = "<!-- nbgrader-path: begin", "<!-- nbgrader-path: end -->"
# What each step of the path must be about, in this order (a word of its heading).
STEPS = ["set up", "release", "collect", "autograde", "by hand", "feedback", "export", "mistakes"]
SUBMISSIONS = {"alice": "model", "carol": "unscaled", "frank_li": "edited_test"}
EDITED = re.compile(r"^(\S+) 04-scaling/scaling: .*edited the locked cell (\S+)", re.MULTILINE)


def path_steps(text: str) -> List[Tuple[str, List[str]]]:
    """The page's nbgrader path: (heading, commands) per ``###`` step, in the page's order.

    Commands are the lines of the step's ``bash`` blocks, a line ending in ``\\`` joined with
    the next, blank lines and comment lines left out.
    """
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "the path's markers, once each"
    region = text.split(BEGIN, 1)[1].split(END, 1)[0]
    fences = re.findall(r"^```(\S*)", region, flags=re.MULTILINE)
    assert all(lang == "bash" for lang in fences[::2]), f"only bash blocks on the path: {fences}"
    steps = []
    for chunk in re.split(r"^### ", region, flags=re.MULTILINE)[1:]:
        heading, body = chunk.split("\n", 1)
        commands = []
        for block in re.findall(r"^```bash\n(.*?)^```", body, flags=re.MULTILINE | re.DOTALL):
            for line in block.replace("\\\n", " ").splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    commands.append(line.strip())
        steps.append((heading.strip(), commands))
    return steps


def test_the_path_is_marked_and_in_the_right_order():
    steps = path_steps(PAGE.read_text())
    headings = [heading.lower() for heading, _ in steps]
    assert len(headings) == len(STEPS), headings
    for heading, word in zip(headings, STEPS):
        assert word in heading, f"step {heading!r} should be about {word!r}: {headings}"
    commands = " ; ".join(c for _, cs in steps for c in cs)
    for needed in ("generate_assignment", "zip_collect", "qkv grade 04-scaling",
                   "generate_feedback 04-scaling --force", "nbgrader export", "qkv report"):
        assert needed in commands, f"{needed!r} is not on the path: {commands}"
    assert "nbgrader autograde" not in commands  # qkv grade takes its place
    assert commands.index("generate_assignment") < commands.index("qkv grade")


def _fresh_clone(dest: Path) -> Path:
    """What a fresh clone of the repository holds: the tracked files, copied."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"needs a git checkout to know what a clone holds ({e})")
    for name in listed.stdout.decode().split("\0"):
        source = ROOT / name
        if name and source.is_file() and not source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def _lms_download(course: Path) -> None:
    """The class's submissions as an LMS's bulk download, saved where the page says."""
    with zipfile.ZipFile(course / "submissions.zip", "w") as zf:
        for student, kind in SUBMISSIONS.items():
            zf.writestr(f"download/{student}_{class_.NOTEBOOK}", nbformat.writes(class_.submission(kind)))


def _tasks() -> Dict[str, float]:
    """The assignment's tasks graded by hand against a rubric (grade id -> points): nbgrader
    counts them in the total and leaves each for a person, whatever the student wrote."""
    nb = nbformat.read(str(class_.SOLUTION), as_version=4)
    return {class_.grade_id(c): float(c.metadata["nbgrader"]["points"])
            for c in nb.cells if c.metadata.get("nbgrader", {}).get("task")}


def _grade_by_hand(course: Path, student: str, scores: Dict[str, float]) -> None:
    """What formgrader does when a grader saves a score for each hand-graded answer."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for grade_id, points in scores.items():
            grade = gb.find_grade(grade_id, Path(class_.NOTEBOOK).stem, class_.ASSIGNMENT, student)
            grade.manual_score = points
            grade.needs_manual_grade = False
        gb.db.commit()


def _environment(course: Path) -> Dict[str, str]:
    # The clone's environment: this Python's bin first (nbgrader runs alembic), the clone's
    # packages (as `make venv` installs them), no user-level Jupyter configuration.
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(course / "src"), "JUPYTER_CONFIG_DIR": str(course.parent / "jupyter"),
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg"}


def _run_path(course: Path) -> Dict[str, str]:
    """Every command of the page's path, in order, in ``course``; each must exit 0."""
    env = _environment(course)
    if shutil.which("qkv", path=env["PATH"]) is None:
        pytest.fail("the `qkv` command is not installed in this environment (pip install -e .)")
    logs = {}
    for heading, commands in path_steps(PAGE.read_text()):
        if "by hand" in heading.lower():  # full points for alice; carol's answer is left for later
            _grade_by_hand(course, "alice", {class_.WRITTEN: class_.points()[class_.WRITTEN],
                                             **_tasks()})
        for command in commands:
            proc = subprocess.run(["bash", "-c", command], cwd=course, env=env,
                                  capture_output=True, text=True, timeout=900)
            logs[command] = proc.stdout + proc.stderr
            assert proc.returncode == 0, f"{heading}: `{command}` exited {proc.returncode}:\n{logs[command][-4000:]}"
    return logs


@pytest.fixture(scope="module")
def term(tmp_path_factory) -> Tuple[Path, Dict[str, str]]:
    course = _fresh_clone(tmp_path_factory.mktemp("term") / "qkv")
    _lms_download(course)
    return course, _run_path(course)


@pytest.mark.slow
def test_release_rewrites_the_committed_exercises_unchanged(term):
    course, _ = term
    for path in (course / "exercises" / class_.ASSIGNMENT).iterdir():
        assert path.read_bytes() == (ROOT / "exercises" / class_.ASSIGNMENT / path.name).read_bytes(), path


@pytest.mark.slow
def test_the_summary_names_only_the_real_edit(term):
    _, logs = term
    log = next(text for command, text in logs.items() if command.startswith("qkv grade"))
    assert EDITED.findall(log) == [("frank_li", class_.EDITED_TEST)], log[-4000:]
    assert len(re.findall(r"^\S+ 04-scaling/scaling: ", log, re.MULTILINE)) == 3, log[-4000:]


@pytest.mark.slow
def test_grades_csv_has_every_student_and_marks_provisional_totals(term):
    course, _ = term
    with open(course / "grades.csv", newline="") as fh:
        rows = {row["student_id"]: row for row in csv.DictReader(fh)}
    got = {s: (float(r["score"]), r["needs_manual_grading"], float(r["ungraded_points"]))
           for s, r in rows.items()}
    written, tasks = class_.points()[class_.WRITTEN], sum(_tasks().values())
    assert tasks > 0, "04-scaling's tasks graded by hand are part of this test"
    assert got == {"alice": (class_.expected("model")[0] + written + tasks, "False", 0.0),  # by hand
                   "carol": (class_.expected("unscaled")[0], "True", written + tasks),  # waits
                   # a blank written answer scores 0 at once; the tasks wait for a person
                   "frank_li": (0.0, "True", tasks),
                   "bob": (0.0, "False", 0.0)}  # registered, submitted nothing
    assert {float(r["max_score"]) for r in rows.values()} == {sum(class_.points().values()) + tasks}


@pytest.mark.slow
def test_feedback_says_not_graded_yet_instead_of_zero(term):
    course, _ = term
    pages = {s: (course / "feedback" / s / class_.ASSIGNMENT / "scaling.html").read_text()
             for s in SUBMISSIONS}
    points = class_.points()[class_.WRITTEN]
    written = re.compile(rf"Written response</a> \(Score: ([\d.]+) / {points}\)")
    assert written.findall(pages["alice"]) == [str(points)] and "Not graded yet" not in pages["alice"]
    assert written.findall(pages["carol"]) == []  # no "0.0 / 2.0" for an answer nobody graded
    # Nor for a task, in the contents at the top of the page.
    tasks = re.findall(r'href="#(task_[a-z_]+)">Task</a> \(([^)]*)\)', pages["carol"])
    assert tasks and all(said.startswith("not graded yet: ") for _, said in tasks), tasks
    assert f"Not graded yet ({points} points, graded by hand)" in pages["carol"]
    assert f'href="#comment-{class_.WRITTEN}">{class_.WRITTEN}</a> ({points} points)' in pages["carol"]
    # A blank written answer is scored 0 at once: nothing waits for a person.
    assert written.findall(pages["frank_li"]) == ["0.0"]
    assert f'href="#comment-{class_.WRITTEN}">{class_.WRITTEN}</a> ({points} points)' \
        not in pages["frank_li"]  # its written answer is not among those still to grade


@pytest.mark.slow
def test_report_counts_the_class_mistake(term):
    course, _ = term
    with open(course / "report" / "mistakes.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    counts = {(r["test"], r["mistake"]): r["students"] for r in rows}
    # carol's one mistake, named in the one test it costs (attention is graded on the
    # reference's scores: points follow the mistake); frank_li wrote nothing.
    assert counts[("test_attention_scores", "no scaling")] == "1", rows
    assert ("test_scaled_dot_product_attention", "no scaling") not in counts, rows
    assert counts[("test_attention_with_temperature", "not written yet")] == "1", rows
    assert (course / "report" / "report.html").is_file()
