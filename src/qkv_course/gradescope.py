"""``qkv gradescope ASSIGNMENT --out DIR``: an Otter-Grader autograder for Gradescope.

Made from the same source as the nbgrader version (``solutions/<NN-name>/<name>.md``, read by
:mod:`.assignments`), into ``DIR``:

- ``<name>.ipynb``, the notebook students fill in and upload: nbgrader's release of the
  source (the same cells as ``exercises/``, made here by nbgrader's own preprocessors), with
  Otter's cell metadata added (below);
- ``autograder.zip``, what Gradescope's "Configure Autograder" page takes (see
  :mod:`.gradescope_zip` for what it installs).

Scores are nbgrader's. Each test cell becomes one Otter test file, named by its grade id and
worth its points, with two cases run in the notebook's namespace: *visible* (the cell as
students see it, worth nothing: the public result Gradescope shows at once) and *hidden* (the
whole cell, hidden tests included, as ``nbgrader autograde`` runs it: all the points). As with
nbgrader, a case fails when it raises or writes to stderr, and one that runs past the
per-cell time limit of ``nbgrader_config.py`` is stopped and fails. In the student's notebook
the test cell is marked for Otter to skip, and the cell before it asks Otter to run the test
there: so the test runs where nbgrader would run it, and an edited or deleted test cell
changes nothing (without the metadata, Otter runs every test at the end). A written answer
is not in the autograder: its points go to a manually graded question on Gradescope.

Otter and nbgrader are imported lazily, when the command runs.
"""

from __future__ import annotations

import argparse
import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Dict

from nbformat import NotebookNode

from . import assignments, outdir
from .config import ROOT
from .graded import UsageError

SKIP = {"ignore": True}  # Otter's cell metadata (key "otter"): not run when grading

TEST_FILE = '''"""{name}, worth {points} points: generated from {source} by `qkv gradescope`; do not edit.

Otter runs both cases in the notebook's namespace, in order: "visible" is the test cell as
students see it (no points), "hidden" the whole cell as nbgrader runs it (all the points).
"""

import contextlib
import io
import signal
import threading

from otter.test_files import test_case

OK_FORMAT = False
name = {name!r}
points = [0, {points!r}]
TIME_LIMIT = {time_limit!r}  # seconds per case: Execute.timeout of nbgrader_config.py

VISIBLE = "\\n".join([
{visible}
])

WHOLE = "\\n".join([
{whole}
])


class _OutOfTime(BaseException):
    """Raised by the alarm; not an Exception, so that no check mistakes it for the answer's."""


def _alarm(signum, frame):
    raise _OutOfTime()


def _run(source, env):
    """Run a test cell's code in the notebook's namespace, scored as nbgrader scores a cell."""
    timed = threading.current_thread() is threading.main_thread()
    if timed:
        before = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT)
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            exec(compile(source, name, "exec"), env)
    except _OutOfTime:
        raise AssertionError(f"the test ran past its time limit of {{TIME_LIMIT}} s and was "
                             "stopped (an endless loop?)") from None
    finally:
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, before)
    assert not stderr.getvalue(), ("the test wrote to stderr, which the autograder scores as a "
                                   "failure:\\n" + stderr.getvalue())


_visible_failed = []  # the whole cell holds every visible line: it would fail again


@test_case(name="visible", hidden=False)
def visible(env):
    try:
        _run(VISIBLE, env)
    except BaseException:
        _visible_failed.append(True)
        raise


@test_case(name="hidden", hidden=True)
def hidden(env):
    assert not _visible_failed, "the visible tests failed (see above)"
    _run(WHOLE, env)
'''


@dataclass(frozen=True)
class Autograder:
    """What ``qkv gradescope`` made for one assignment.

    Args:
        notebook: the students' notebook.
        zip: the autograder, for Gradescope.
        tests: grade id -> points, of every autograded test.
        written: grade id -> points, of every answer graded by hand (not in the zip).
    """

    notebook: Path
    zip: Path
    tests: Dict[str, float]
    written: Dict[str, float]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``qkv gradescope``."""
    parser.add_argument("assignment", metavar="ASSIGNMENT",
                        help="an assignment (e.g. 06-masking), its folder, or its .md source")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="where to write autograder.zip and the students' notebook")
    outdir.add_force_argument(parser)


def run(args: argparse.Namespace) -> int:
    """Write the autograder and the notebook, and say what to set up on Gradescope."""
    try:
        source = assignments.source(args.assignment)
        outdir.prepare(Path(args.out), ("autograder.zip", f"{source.stem}.ipynb"), args.force)
        made = write(source, Path(args.out))
    except (FileNotFoundError, assignments.SourceError) as e:
        raise UsageError(str(e)) from None
    except OSError as e:
        raise UsageError(f"cannot write to {args.out}: {e.strerror or e}") from None
    autograded = sum(made.tests.values())
    print(f"{made.zip}: the autograder ({len(made.tests)} tests, {autograded:g} points)")
    print(f"{made.notebook}: the notebook students fill in and submit")
    for grade_id, points in made.written.items():
        print(f"graded by hand: {grade_id} ({points:g} points): on Gradescope, enable manual "
              "grading and add a question for it")
    return 0


def write(source: Path, out: Path, root: Path = ROOT) -> Autograder:
    """Make the students' notebook and the autograder zip of one assignment.

    Args:
        source: the assignment's source (``solutions/<NN-name>/<name>.md``).
        out: the folder to write into (created if needed).
        root: the repository root (its ``nbgrader_config.py``, its package for the zip).

    Returns:
        What was written, and the points it holds.

    Raises:
        assignments.SourceError: the source breaks the convention.
    """
    from .gradescope_zip import autograder_zip  # Otter: only when a zip is made

    solution = assignments.notebook(source, root)
    shown = _relative(source, root)
    assignments.stamp(solution, shown)
    released = release(solution)
    limit = cell_time_limit(root)
    tests = {grade_id: otter_test(solution, released, grade_id, shown, limit)
             for grade_id in _grade_ids(solution, written=False)}
    out.mkdir(parents=True, exist_ok=True)
    notebook = out / f"{source.stem}.ipynb"
    zip_path = out / "autograder.zip"
    # Written whole or not at all, and recorded as this command's (see qkv_course.outdir).
    outdir.write_text(notebook, assignments.text(student_notebook(released)))
    with outdir.atomic(zip_path) as tmp:
        autograder_zip(tests, tmp, root)
    outdir.record(out, (notebook.name, zip_path.name))
    return Autograder(notebook, zip_path, _grade_ids(solution, written=False),
                      _grade_ids(solution, written=True))


def release(solution: NotebookNode) -> NotebookNode:
    """nbgrader's release of a solution notebook (what ``generate_assignment`` writes).

    The preprocessors of nbgrader's ``generate_assignment``, run here on one notebook, less
    those that need a course folder and its gradebook (header and footer, saving cells): the
    result is the notebook of ``exercises/`` (a test compares them).
    """
    from nbgrader import preprocessors as p

    nb, resources = copy.deepcopy(solution), {}
    for step in (p.LockCells, p.ClearSolutions, p.ClearOutput, p.CheckCellMetadata,
                 p.ComputeChecksums, p.ClearHiddenTests, p.ClearMarkScheme, p.ComputeChecksums,
                 p.CheckCellMetadata):
        nb, resources = step().preprocess(nb, resources)
    return nb


def student_notebook(released: NotebookNode) -> NotebookNode:
    """The release with Otter's cell metadata: each test runs in its test cell's place.

    The test cell itself is skipped when grading (``otter: ignore``): Otter runs the test
    file instead, after the nearest earlier cell that is not a test cell, which lists it
    (``otter: tests``).
    """
    nb = copy.deepcopy(released)
    host = None
    for cell in nb.cells:
        if _is_test(cell):
            cell.metadata["otter"] = dict(SKIP)
            if host is not None:
                host.metadata.setdefault("otter", {}).setdefault("tests", []).append(
                    _meta(cell)["grade_id"])
        else:
            host = cell
    return nb


def otter_test(solution: NotebookNode, released: NotebookNode, grade_id: str, source: str,
               time_limit: float) -> str:
    """The Otter test file of one test cell (see :data:`TEST_FILE`).

    Args:
        solution: the solution notebook (its test cells whole).
        released: nbgrader's release of it (the test cells as students see them).
        grade_id: the test cell's grade id, which names the test.
        source: the assignment's source, as the file's docstring names it.
        time_limit: seconds each case may run.

    Returns:
        The text of the file.
    """
    def lines(nb: NotebookNode) -> str:
        cell = next(c for c in nb.cells if _meta(c).get("grade_id") == grade_id)
        return "\n".join(f"    {line!r}," for line in cell.source.split("\n"))

    points = _meta(next(c for c in solution.cells if _meta(c).get("grade_id") == grade_id))["points"]
    return TEST_FILE.format(name=grade_id, points=points, source=source, time_limit=time_limit,
                            visible=lines(released), whole=lines(solution))


def cell_time_limit(root: Path = ROOT) -> float:
    """``Execute.timeout`` of the course's ``nbgrader_config.py``: the limit of one test cell."""
    from traitlets.config.loader import PyFileConfigLoader

    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    return float(cfg.Execute.timeout)


def _meta(cell: NotebookNode) -> dict:
    return cell.metadata.get("nbgrader", {})


def _is_test(cell: NotebookNode) -> bool:
    meta = _meta(cell)
    return cell.cell_type == "code" and bool(meta.get("grade")) and not meta.get("solution")


def _grade_ids(nb: NotebookNode, *, written: bool) -> Dict[str, float]:
    """Graded cells -> points: the autograded tests, or the answers and tasks graded by hand."""
    return {_meta(c)["grade_id"]: _meta(c)["points"] for c in nb.cells
            if (_meta(c).get("grade") or _meta(c).get("task")) and _is_test(c) != written}


def _relative(source: Path, root: Path) -> str:
    try:
        return source.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return source.as_posix()
