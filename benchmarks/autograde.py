"""Autograding a class on one machine: notebooks per minute, and the ratio to the floor.

In a temporary course directory (the repository's ``nbgrader_config.py``), a synthetic class of
``--students`` submissions of 04-scaling (``tests/scaling_submissions.py``: 3 in 5 hand in the
model answers, 1 in 5 a named mistake, 1 in 5 the blank exercise) is autograded with one
``nbgrader autograde 04-scaling`` command, as an instructor runs it; ``--floor`` submissions of a
notebook that holds only the assignments' set-up cell (kernel start, ``import torch`` and
``qkv.checks``: what every notebook pays, whatever it holds) are autograded the same way, in the
same run. It prints, per configuration, seconds per notebook, notebooks per minute and the ratio
of the class to the floor, and checks every grade against the one its kind must get.

``--compare`` also runs nbgrader's default for each setting the course changes to cut the floor
(``Execute.shutdown_kernel``: "graceful" waits for the kernel's Python to exit after every
notebook, "immediate" stops it as soon as the notebook has run), alternating the two
configurations chunk by chunk (``--chunk`` students per command, the order flipped from one
chunk to the next) so that both see the same machine load.

Run from the repository root, with the course's environment (nbgrader's ``bin`` on PATH):
``python benchmarks/autograde.py --students 50 --floor 10 --compare``
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

import nbformat

from qkv_course.config import ROOT
from qkv_course.generate import assignments
from qkv_course.nbgrader.api import nbgrader_api, nbgrader_environment

sys.path.insert(0, str(ROOT / "tests"))
import scaling_submissions as class_  # noqa: E402  (test material, shared with test_instructors)

# The floor, written as an assignment source is (see qkv_course.generate.assignments): the set-up cell
# every assignment starts with, and one test cell with nothing to do.
FLOOR = """# Floor

```{code-cell} python
:setup:
```

```{code-cell} python
:tests: nothing
:points: 1

pass
```
"""
MIX = ["model", "model", "unscaled", "model", "blank"]  # the class: 3 in 5 model answers
# Configurations: extra nbgrader arguments over the course's nbgrader_config.py.
CONFIGS = {"course": [], "nbgrader default": ["--Execute.shutdown_kernel=graceful"]}


def _course(tmp: Path) -> Path:
    """A course directory with 04-scaling and the floor in its gradebook."""
    course = tmp / "course"
    (course / "solutions").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "solutions" / class_.ASSIGNMENT, course / "solutions" / class_.ASSIGNMENT)
    floor = course / "solutions" / "floor" / "floor.md"
    floor.parent.mkdir()
    floor.write_text(FLOOR)
    floor.with_suffix(".ipynb").write_text(assignments.text(assignments.notebook(floor)))
    api = nbgrader_api(course)
    for assignment in (class_.ASSIGNMENT, "floor"):
        if not api.generate_assignment(assignment, force=True, create=True)["success"]:
            raise RuntimeError(f"could not generate {assignment}")
    return course


def _submit(course: Path, assignment: str, notebooks: Dict[str, nbformat.NotebookNode]) -> None:
    shutil.rmtree(course / "submitted", ignore_errors=True)  # one assignment's class at a time
    for student, nb in notebooks.items():
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True)
        name = class_.NOTEBOOK if assignment == class_.ASSIGNMENT else "floor.ipynb"
        nbformat.write(nb, str(folder / name))


def _autograde(course: Path, assignment: str, extra: List[str], students: str = "*") -> float:
    """Seconds for one ``nbgrader autograde`` of the submissions of ``students`` (a glob), with --force."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", assignment, "--force",
                           f"--student={students}", *extra], cwd=course, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader autograde {assignment} failed:\n{proc.stderr[-3000:]}")
    return elapsed


def _check_grades(course: Path, kinds: Dict[str, str]) -> None:
    """Every student got the autograded points their kind must get."""
    with nbgrader_api(course).gradebook as gb:
        for student, kind in kinds.items():
            sub = gb.find_submission(class_.ASSIGNMENT, student)
            points, waits = class_.expected(kind)
            assert (sub.code_score, bool(sub.needs_manual_grade)) == (points, waits), (
                f"{student} ({kind}): {sub.code_score} points, needs manual grade "
                f"{sub.needs_manual_grade}; expected {points}, {waits}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=50, help="submissions in the class")
    parser.add_argument("--floor", type=int, default=10, help="floor notebooks per measurement")
    parser.add_argument("--compare", action="store_true",
                        help="also run nbgrader's defaults for the settings the course changes")
    parser.add_argument("--chunk", type=int, default=10,
                        help="with --compare: students graded by one command, in turn by each configuration")
    args = parser.parse_args()
    configs = CONFIGS if args.compare else {"course": CONFIGS["course"]}
    # Ids g<chunk>-<n>: with --compare each chunk of --chunk students is graded by every
    # configuration in turn (the order flipped from one chunk to the next), so that all
    # configurations see the same machine load; without it, one command grades everyone.
    chunk = args.chunk if args.compare else max(args.students, args.floor)
    kinds = {f"g{i // chunk}-{i:03d}": MIX[i % len(MIX)] for i in range(args.students)}
    seconds: Dict[str, Dict[str, float]] = {n: {"floor": 0.0, "class": 0.0} for n in configs}
    with tempfile.TemporaryDirectory() as tmp, nbgrader_environment():
        course = _course(Path(tmp))
        floor_nb = nbformat.read(str(course / "exercises" / "floor" / "floor.ipynb"), 4)
        for what, assignment, count in (("floor", "floor", args.floor),
                                        ("class", class_.ASSIGNMENT, args.students)):
            if what == "floor":
                _submit(course, assignment, {f"g{i // chunk}-{i:03d}": floor_nb for i in range(count)})
            else:
                _submit(course, assignment, {s: class_.submission(k) for s, k in kinds.items()})
            for c in range((count + chunk - 1) // chunk):
                for name in (list(configs) if c % 2 == 0 else list(configs)[::-1]):
                    seconds[name][what] += _autograde(course, assignment, configs[name], f"g{c}-*") / count
            if what == "class":
                _check_grades(course, kinds)

    print(f"class: {args.students} submissions of {class_.ASSIGNMENT} ({', '.join(MIX)}, ...); "
          f"floor: {args.floor} notebooks with only the set-up cell; {chunk} students per nbgrader command")
    for name, s in seconds.items():
        print(f"{name:>17}: floor {s['floor']:.2f} s/notebook, class {s['class']:.2f} s/notebook "
              f"= {60 / s['class']:.1f} notebooks/minute, ratio to the floor {s['class'] / s['floor']:.2f}")


if __name__ == "__main__":
    main()
