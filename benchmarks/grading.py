"""``qkv grade`` against ``nbgrader autograde``, side by side, on the same class, in one run.

Builds one synthetic class of 04-scaling (``tests/scaling_submissions.py``: of every five
students, three hand in the model answers, one a named mistake, one the blank exercise), copies
it into two course folders (the repository's ``nbgrader_config.py``, the gradebook made by
``nbgrader generate_assignment``), then times, one after the other on the same machine:

- ``nbgrader autograde 04-scaling`` (the course's configuration: one kernel per notebook);
- ``qkv grade 04-scaling --jobs J`` (each submission in a fresh sandbox, judged outside it).

Each is one command, as an instructor runs it, timed from its start to its exit. It prints the
notebooks per second of each and their ratio, and checks that both gave every student the
points their kind must get (and so the same points as each other).

``qkv grade`` pays a fixed start (the parent and each job slot import torch: seconds on two
cores) and then little per notebook, so its ratio grows with the class. To say what a whole
class costs, it is also timed on one student of the same class (the start); the rest divided by
the other notebooks is its rate once started, and 1,000 students x 9 notebooks is projected
from the two.

Run from the repository root, with the course's environment (nbgrader's ``bin`` on PATH):
``python benchmarks/grading.py --students 20 --jobs 2``
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict

from qkv_course.config import ROOT

sys.path.insert(0, str(ROOT / "tests"))
import grade_class as gc  # noqa: E402  (test material, shared with tests/test_grade.py)
import scaling_submissions as class_  # noqa: E402

PATTERN = ("model", "model", "unscaled", "model", "blank")


def build(course: Path, students: int) -> Dict[str, str]:
    """A course folder with ``students`` submissions; student -> kind."""
    gc.make_course(course)
    kinds = {f"s{i:03d}": PATTERN[i % len(PATTERN)] for i in range(students)}
    for student, kind in kinds.items():
        gc.submit(course, student, class_.submission(kind))
    return kinds


def timed(command: list, course: Path) -> float:
    """Run one command in the course folder; its wall-clock seconds (it must exit 0)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "MPLBACKEND": "Agg"}
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=course, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {proc.returncode}:\n"
                         f"{(proc.stdout + proc.stderr)[-3000:]}")
    return seconds


def check(course: Path, kinds: Dict[str, str], who: str) -> None:
    """Every student's autograded points are those of their kind."""
    got = gc.scores(course)
    wrong = {s: (got.get(s, {}).get("score"), class_.expected(k)[0]) for s, k in kinds.items()
             if got.get(s, {}).get("score") != class_.expected(k)[0]}
    if wrong:
        raise SystemExit(f"{who} gave unexpected points (got, expected): {wrong}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=20, help="submissions (default 20)")
    parser.add_argument("--jobs", type=int, default=2, help="qkv grade --jobs (default 2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="qkv-grading-bench-") as tmp:
        nbgrader_course = Path(tmp) / "nbgrader"
        kinds = build(nbgrader_course, args.students)
        qkv_course = Path(tmp) / "qkv"
        shutil.copytree(nbgrader_course, qkv_course)
        n = len(kinds)
        t_nb = timed([sys.executable, "-m", "nbgrader", "autograde", class_.ASSIGNMENT],
                     nbgrader_course)
        check(nbgrader_course, kinds, "nbgrader autograde")
        grade = [sys.executable, "-m", "qkv_course.cli", "grade", class_.ASSIGNMENT,
                 "--jobs", str(args.jobs)]
        t_qkv = timed(grade, qkv_course)
        check(qkv_course, kinds, "qkv grade")
        # The start and one notebook, timed after the class (so on a warmer machine: if
        # anything, the start looks shorter and the rate once started lower than they are).
        t_start = timed(grade + ["--student", sorted(kinds)[0], "--force"], qkv_course)
    load = os.getloadavg()[0]
    print(f"class: {n} submissions of {class_.ASSIGNMENT} (3 in 5 model, 1 in 5 a named "
          f"mistake, 1 in 5 blank); {os.cpu_count()} CPUs, load average {load:.1f}")
    print(f"nbgrader autograde:        {t_nb:7.1f} s  {n / t_nb:6.3f} notebooks/s")
    print(f"qkv grade --jobs {args.jobs}:        {t_qkv:7.1f} s  {n / t_qkv:6.3f} notebooks/s")
    print(f"ratio (qkv grade / nbgrader autograde, notebooks per second): {t_nb / t_qkv:.2f}x")
    if n > 1 and t_qkv > t_start:
        rate = (n - 1) / (t_qkv - t_start)
        hours = (9 * (t_start - 1 / rate) + 9000 / rate) / 3600
        print(f"qkv grade, once started: {t_start:.1f} s for the start and one notebook, then "
              f"{rate:.2f} notebooks/s ({rate * t_nb / n:.1f}x nbgrader's rate); 1,000 students "
              f"x 9 notebooks like these: about {hours:.2f} h (9 runs, one per assignment)")
    print("both gave every student the points of their kind")


if __name__ == "__main__":
    main()
