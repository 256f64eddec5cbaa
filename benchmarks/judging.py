"""How long ``qkv grade``'s trusted side takes to judge a right answer, check by check: torch on
its default pool of threads against one thread (as :mod:`qkv.checks.grading` judges), side by
side in one run.

For each check, the reference's own outputs on the check's inputs (seed 0) are judged as if a
student had sent them back, ``--repeat`` times each way; the fastest of each is printed with
their ratio. ``qkv grade`` judges while its sandboxes run students' code on every core, so the
timings run beside ``--busy`` processes that keep a core each busy (default: one per core; 0
for an idle machine, where the two ways take about as long). A check's tensors are tiny: on a
pool, each op wakes threads that must wait for a busy core, which costs far more than the op.

Run from the repository root: ``python benchmarks/judging.py [--repeat 3] [--busy N] [CHECK ...]``
(default: the experiments and the capstone's checks that have one reference).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Any, List, Optional

import torch

from qkv.checks import grading
from qkv.checks.harness import one_thread


def _reference(check: Any) -> Optional[Any]:
    """The right answer a check can be judged on: an experiment's reference, or the reference
    of a check of one exercise; ``None`` for the others (pairs, options, the ablation)."""
    if hasattr(check, "exp"):
        return check.exp.reference
    exercises = getattr(check, "exercises", None)
    if exercises is None or getattr(check, "items", None):
        return None
    found = exercises()
    return found[0].reference if len(found) == 1 else None


def _outcomes(name: str, reference: Any) -> List[Any]:
    return [grading.run_student(name, reference, args, kwargs)
            for args, kwargs in grading.calls(name, 0)]


def _fastest(judge: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        judge()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checks", nargs="*", help="check names (default: see above)")
    parser.add_argument("--repeat", type=int, default=3, help="timings per way (the fastest)")
    parser.add_argument("--busy", type=int, default=os.cpu_count() or 1,
                        help="processes keeping a core busy meanwhile (default: one per core)")
    args = parser.parse_args(argv)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.busy)]
    try:
        return _run(args)
    finally:
        for process in busy:
            process.kill()


def _run(args: argparse.Namespace) -> int:
    names = args.checks or sorted(
        n for n, c in grading.CHECKS.items() if hasattr(c, "exp") or n in (
            "check_attention_forward", "check_block_forward", "check_dropout_block_forward",
            "check_swiglu_mlp"))
    print(f"torch {torch.__version__}, default threads {torch.get_num_threads()}, "
          f"{args.busy} busy processes beside")
    print(f"{'check':34} {'pool (s)':>9} {'one (s)':>9} {'ratio':>7}")
    for name in names:
        check = grading.CHECKS[name]
        reference = _reference(check)
        if reference is None:
            print(f"{name:34} (no single reference: skipped)")
            continue
        with one_thread():
            grading.prepare(name)
            try:
                outcomes = _outcomes(name, reference)
            except Exception:  # not called as the check calls an answer (the model first)
                print(f"{name:34} (its reference is no student's answer here: skipped)")
                continue
        verdict = check.judge(0, outcomes)
        if not verdict.passed:
            print(f"{name:34} (the reference did not pass: {verdict.what}; skipped)")
            continue
        pool = _fastest(lambda: check.judge(0, outcomes), args.repeat)
        with one_thread():
            one = _fastest(lambda: check.judge(0, outcomes), args.repeat)
        print(f"{name:34} {pool:9.3f} {one:9.3f} {pool / one:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
