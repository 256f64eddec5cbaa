"""``qkv gradescope ASSIGNMENT --out DIR``: an autograder for Gradescope that grades with
``qkv grade``'s engine.

Made from the same source as the nbgrader version (``solutions/<NN-name>/<name>.md``, read by
:mod:`qkv_course.generate.assignments`), into ``DIR``:

- ``<name>.ipynb``, the notebook students fill in and upload: nbgrader's release of the
  source (the same cells as ``exercises/``, made here by nbgrader's own preprocessors);
- ``autograder.zip``, what Gradescope's "Configure Autograder" page takes (see
  :mod:`.autograder_zip` for what it holds and installs).

Each submission is graded by :mod:`.autograder`, the engine of ``qkv grade``: the
notebook is read as data, its code runs in bubblewrap's sandbox (or, where Gradescope's
container cannot make namespaces, unsandboxed, which ``results.json`` says: the container is
then the boundary), and the checks judge in the parent, with each test cell's own arguments
and the hidden inputs drawn from the zip's key. ``results.json`` holds one test per test cell,
by grade id, worth its nbgrader points. A written answer is not in it: its points go to a
manually graded question on Gradescope (the command lists them).

nbgrader is imported lazily, when the command runs.
"""

from __future__ import annotations

import argparse
import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Dict

from nbformat import NotebookNode

from .. import outdir
from ..config import ROOT
from ..generate import assignments
from ..usage import UsageError


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
    from .autograder_zip import autograder_zip

    solution = assignments.notebook(source, root)
    assignments.stamp(solution, _relative(source, root))
    released = release(solution)
    assignment = source.parent.name
    course_files = {f"solutions/{assignment}/{source.stem}.ipynb": assignments.text(solution),
                    f"exercises/{assignment}/{source.stem}.ipynb": assignments.text(released)}
    out.mkdir(parents=True, exist_ok=True)
    notebook = out / f"{source.stem}.ipynb"
    zip_path = out / "autograder.zip"
    # Written whole or not at all, and recorded as this command's (see qkv_course.outdir).
    outdir.write_text(notebook, assignments.text(released))
    with outdir.atomic(zip_path) as tmp:
        autograder_zip(assignment, course_files, tmp, root)
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
