"""Autograding time per notebook: the scaling solution against a floor notebook.

Autogrades N copies of ``solutions/04-scaling/scaling.ipynb`` and N copies of a notebook
that only imports torch and qkv (the floor: kernel start and imports, which every
notebook pays), in a temporary course directory, one submission at a time, and prints
the median seconds per notebook of each and their ratio. Goal: ratio at most 1.5.

Run from the repository root, with the course's environment:
``python benchmarks/autograde.py --copies 5``
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from qkv_course import assignments
from qkv_course.config import ROOT
from qkv_course.exercises import nbgrader_api, nbgrader_environment

# The floor, written as an assignment source is (see qkv_course.assignments): one test cell.
FLOOR = """```{code-cell} python
:tests: imports
:points: 1

import torch

import qkv
```
"""


def _floor_notebook(path: Path) -> None:
    path.parent.mkdir(parents=True)
    source = path.with_suffix(".md")
    source.write_text(FLOOR)
    path.write_text(assignments.text(assignments.notebook(source)))


def _time_autograde(api, course: Path, assignment: str, notebook: Path, student: str) -> float:
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True)
    shutil.copy(notebook, folder / notebook.name)
    start = time.perf_counter()
    result = api.autograde(assignment, student, force=True, create=True)
    elapsed = time.perf_counter() - start
    if not result["success"]:
        raise RuntimeError(result.get("error") or result.get("log"))
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--copies", type=int, default=5, help="notebooks of each kind")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, nbgrader_environment():
        course = Path(tmp)
        shutil.copy(ROOT / "nbgrader_config.py", course)
        shutil.copytree(ROOT / "solutions" / "04-scaling", course / "solutions" / "04-scaling")
        _floor_notebook(course / "solutions" / "floor" / "floor.ipynb")
        api = nbgrader_api(course)
        for assignment in ("04-scaling", "floor"):
            if not api.generate_assignment(assignment, force=True, create=True)["success"]:
                raise RuntimeError(f"could not generate {assignment}")
        kinds = {
            "floor": ("floor", course / "solutions" / "floor" / "floor.ipynb"),
            "solution": ("04-scaling", course / "solutions" / "04-scaling" / "scaling.ipynb"),
        }
        times = {kind: [] for kind in kinds}
        for i in range(args.copies):
            # Interleaved, and each kind goes first every other time: both see the same
            # machine load and the same share of warm caches.
            order = ["floor", "solution"] if i % 2 == 0 else ["solution", "floor"]
            for kind in order:
                assignment, notebook = kinds[kind]
                times[kind].append(_time_autograde(api, course, assignment, notebook, f"s{i}"))
        floor, solution = times["floor"], times["solution"]
        with api.gradebook as gb:
            for i in range(args.copies):
                sub = gb.find_submission("04-scaling", f"s{i}")
                # Written answers wait for a person; every autograded point must be earned.
                assert sub.code_score == sub.max_code_score, (
                    f"copy {i} scored {sub.code_score}/{sub.max_code_score} autograded points"
                )

    f, s = statistics.median(floor), statistics.median(solution)
    print(f"notebooks of each kind: {args.copies}")
    print(f"floor (imports torch and qkv): median {f:.2f} s per notebook")
    print(f"04-scaling solution:          median {s:.2f} s per notebook")
    print(f"ratio: {s / f:.2f} (goal: at most 1.5)")


if __name__ == "__main__":
    main()
