"""The grader's sandbox: seconds per submission, with the zygote and without.

A trivial notebook (the assignments' kind of set-up cell, one answer, nothing slow) is run
through :class:`qkv_course.grade.Pool` as ``qkv grade`` does: cells run, one function called
with a tensor, one variable read, every process ended. Three configurations:

- ``zygote``: one bubblewrap sandbox per job slot whose worker imported torch and qkv once;
  each submission is a forked child (the default);
- ``zygote, N threads``: the same with ``--jobs`` slots driven from as many threads;
- ``fresh sandbox``: a new sandbox per submission (Python, torch and qkv imported every time),
  with the default preload (matplotlib's pyplot too) and with only what the notebook needs.

The first submission of a pool (which starts the sandbox) is timed apart from the rest.
For nbgrader's autograde of the same kind of notebook, run ``benchmarks/autograde.py`` (its
"floor") on the same machine, close in time.

    PYTHONPATH=src python benchmarks/grade_sandbox.py [--submissions 40] [--fresh 4] [--jobs 2]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from qkv_course.grade import Pool

LEAN = ("numpy", "torch", "qkv", "IPython.core.inputtransformer2")  # what this notebook needs

NOTEBOOK = [
    "import torch\nimport torch.nn.functional as F\nimport qkv\ntorch.manual_seed(0)",
    "def softmax(x, dim=-1):\n    e = torch.exp(x - x.amax(dim, keepdim=True))\n"
    "    return e / e.sum(dim, keepdim=True)",
    "answer = 42",
]


def one(pool: Pool) -> None:
    x = torch.randn(2, 3, 5)
    with pool.submission(NOTEBOOK) as sub:
        out = sub.call("softmax", "softmax", (x,), {"dim": -1}, timeout_s=30)
        assert torch.allclose(out, torch.softmax(x, -1)) and sub.value("answer") == 42, sub.failed


def timed(pool: Pool, n: int, threads: int = 1) -> tuple:
    """(seconds for the first submission, seconds per submission for the next ``n``)."""
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as ex:  # start every slot
        list(ex.map(lambda _: one(pool), range(threads)))
    first = time.perf_counter() - start
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(lambda _: one(pool), range(n)))
    return first, (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--submissions", type=int, default=40)
    parser.add_argument("--fresh", type=int, default=4, help="submissions without the zygote")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    rows = []
    with Pool(jobs=1) as pool:
        rows.append(("zygote", *timed(pool, args.submissions)))
    with Pool(jobs=args.jobs) as pool:
        rows.append((f"zygote, {args.jobs} threads", *timed(pool, args.submissions, args.jobs)))
    with Pool(jobs=1, zygote=False) as pool:
        rows.append(("fresh sandbox", *timed(pool, args.fresh)))
    with Pool(jobs=1, zygote=False, preload=LEAN) as pool:
        rows.append(("fresh, no matplotlib", *timed(pool, args.fresh)))
    print(f"{'configuration':<22} {'start (s)':>10} {'s/submission':>13} {'submissions/s':>14}")
    for name, first, each in rows:
        print(f"{name:<22} {first:>10.2f} {each:>13.3f} {1 / each:>14.1f}")


if __name__ == "__main__":
    main()
