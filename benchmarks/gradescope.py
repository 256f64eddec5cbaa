"""Grading on Gradescope's default limits: seconds and memory of the autograder per notebook.

Gradescope runs each submission in a container of about 768 MB and half a CPU. This script
makes the autograder of each assignment named (``qkv gradescope``), then grades notebooks
with the zip's own ``run_autograder`` (``qkv grade``'s engine: its process and the sandboxed
worker), in Gradescope's folder layout made in a temporary folder, with this Python, one at a
time, emulating those limits:

- half a CPU: the grading processes are pinned to one core (``sched_setaffinity``) and, in
  every 100 ms, stopped (SIGSTOP) for 50 ms and let run (SIGCONT) for 50 ms: a CPU quota of
  0.5, as a container's CFS quota gives it, enforced from outside;
- 768 MB: the memory of the grading processes (the engine, bubblewrap, the zygote and the
  worker it forks) is summed every 20 ms as PSS (shared pages split among their sharers, so
  each page counts once, as a container's memory cgroup charges it; ``--rss`` sums RSS
  instead, which counts torch's pages shared by the parent, zygote and worker once per
  process, an overestimate); a notebook that goes over the limit is stopped and reported. Nothing
  is limited by the kernel: an address-space limit (``RLIMIT_AS``) is no stand-in, since
  torch maps far more address space than it touches, and no cgroup is available here.

The zip's ``setup.sh`` uninstalls ``rfc3987-syntax`` from the image (see
``qkv_course.gradescope.autograder_zip``); here its import is refused to the grading processes in the
same way (a module of that name on ``PYTHONPATH`` that raises ImportError), unless
``--keep-rfc3987`` is given.

Per notebook it prints the wall-clock seconds under the limits, the CPU seconds used (which
no other load on the machine changes: half a CPU needs at least twice as long), the peak of
the summed PSS (sampled) and the largest single process's peak RSS (its VmHWM, which the
kernel keeps). Goal: under 60 s and under 500 MB per notebook.

Run from the repository root, with the course's environment:
``python benchmarks/gradescope.py [--assignments 04-scaling 06-masking] [--copies 2]``
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Tuple

import nbformat
import psutil

from qkv_course.config import ROOT
from qkv_course.generate import assignments
from qkv_course.gradescope import command as gradescope

PERIOD, SHARE = 0.100, 0.5  # seconds per period, and the share of it the processes may run
SAMPLE = 0.020  # seconds between memory samples
MB = 2 ** 20


def _tree(root: psutil.Process) -> List[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _signal_all(procs: List[psutil.Process], sig: int) -> None:
    for p in procs:
        try:
            p.send_signal(sig)
        except psutil.Error:
            pass  # it has just ended


USE_RSS = False  # --rss: sum RSS (shared pages counted once per process) instead of PSS


def _pss(pid: int) -> int:
    """A process's proportional set size: its shared pages split among their sharers, so a
    sum over processes counts each page once, as the container's memory cgroup charges it
    (the engine's parent, the zygote and the worker forked from it share torch's pages)."""
    text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    return int(text.split("\nPss:")[1].split()[0]) * 1024


def _memory(procs: List[psutil.Process], hwm: Dict[int, int]) -> int:
    """The summed PSS (or RSS) of ``procs`` now; records each one's peak RSS so far (VmHWM)
    in ``hwm``."""
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss if USE_RSS else _pss(p.pid)
            status = Path(f"/proc/{p.pid}/status").read_text()
            hwm[p.pid] = int(status.split("VmHWM:")[1].split()[0]) * 1024
        except (psutil.Error, OSError, IndexError):
            pass  # it has just ended
    return total


def _throttle(proc: subprocess.Popen, root: psutil.Process, hwm: Dict[int, int],
              limit_mb: float) -> Tuple[int, bool]:
    """Run ``proc``'s process tree at half a CPU until it ends, watching its memory.

    Returns:
        (peak summed PSS (or RSS) in bytes, whether it stayed under ``limit_mb``).
    """
    peak, within = 0, True
    while proc.poll() is None:
        period = time.perf_counter()
        while time.perf_counter() - period < PERIOD * SHARE and proc.poll() is None:
            peak = max(peak, _memory(_tree(root), hwm))
            if peak > limit_mb * MB:  # what the container's OOM killer would do
                within = False
                _signal_all(_tree(root), signal.SIGKILL)
            time.sleep(SAMPLE)
        procs = _tree(root)
        _signal_all(procs, signal.SIGSTOP)
        time.sleep(PERIOD * (1 - SHARE))
        _signal_all(procs, signal.SIGCONT)
    return peak, within


def grade(autograder: Path, notebook: Path, out: Path, limit_mb: float, core: int,
          env: Dict[str, str]) -> Tuple[float, float, float, float, bool]:
    """The zip's ``run_autograder`` on one notebook under the emulated limits (``out`` is
    Gradescope's ``/autograder``).

    Returns:
        (wall seconds, CPU seconds, peak summed PSS (or RSS) in MB, peak single-process RSS in MB,
        whether it stayed under the memory limit).
    """
    with zipfile.ZipFile(autograder) as z:
        z.extractall(out / "source")
    (out / "source" / "run_autograder").chmod(0o755)
    (out / "submission").mkdir()
    shutil.copy(notebook, out / "submission" / notebook.name)
    env = dict(env, QKV_AUTOGRADER=str(out), QKV_PYTHON=sys.executable)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [str(out / "source" / "run_autograder")], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, env=env, preexec_fn=lambda: os.sched_setaffinity(0, {core}))
    root, hwm = psutil.Process(proc.pid), {}
    try:
        peak, within = _throttle(proc, root, hwm, limit_mb)
    finally:
        if proc.poll() is None:  # interrupted: leave nothing stopped behind
            _signal_all(_tree(root), signal.SIGKILL)
            proc.wait()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if within and proc.returncode != 0:
        raise RuntimeError(f"run_autograder failed on {notebook} (exit status {proc.returncode})")
    return wall, cpu, peak / MB, max(hwm.values(), default=0) / MB, within


def _refusing_rfc3987(tmp: Path) -> Dict[str, str]:
    """This environment, with a module on ``PYTHONPATH`` that refuses ``import rfc3987_syntax``."""
    (tmp / "refused").mkdir()
    (tmp / "refused" / "rfc3987_syntax.py").write_text("raise ImportError('not in the image')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp / "refused"), *filter(None, [env.get("PYTHONPATH")])])
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--assignments", nargs="+", default=["04-scaling", "06-masking"])
    parser.add_argument("--copies", type=int, default=1, help="times each notebook is graded")
    parser.add_argument("--memory-mb", type=float, default=768, help="the memory limit")
    parser.add_argument("--keep-rfc3987", action="store_true",
                        help="let the grading processes import rfc3987-syntax (unlike the image)")
    parser.add_argument("--rss", action="store_true",
                        help="sum RSS (shared pages once per process) instead of PSS")
    args = parser.parse_args()
    global USE_RSS
    USE_RSS = args.rss
    core = max(os.sched_getaffinity(0))
    print(f"limits: half a CPU (core {core}, {SHARE:.0%} of every {PERIOD * 1000:.0f} ms), "
          f"{args.memory_mb:.0f} MB ({'RSS' if USE_RSS else 'PSS'} of the engine and its sandbox, summed every "
          f"{SAMPLE * 1000:.0f} ms)")
    print(f"{'notebook':28} {'wall s':>7} {'CPU s':>6} {'2 x CPU s':>9} {'peak MB':>8} "
          f"{'1 proc MB':>9}")
    worst = [0.0, 0.0]
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ) if args.keep_rfc3987 else _refusing_rfc3987(Path(tmp))
        print("rfc3987-syntax:", "imported" if args.keep_rfc3987 else "refused, as in the image")
        for assignment in args.assignments:
            source = assignments.source(assignment)
            made = gradescope.write(source, Path(tmp) / assignment)
            solution = assignments.notebook(source)
            # The model answers (the engine puts the locked test cells back anyway).
            answered = Path(tmp) / assignment / "answered" / made.notebook.name
            answered.parent.mkdir()
            nbformat.write(solution, str(answered))
            for kind, notebook in (("solution", answered), ("blank", made.notebook)):
                for i in range(args.copies):
                    out = Path(tmp) / "results"
                    shutil.rmtree(out, ignore_errors=True)
                    out.mkdir()
                    wall, cpu, peak, single, within = grade(made.zip, notebook, out,
                                                            args.memory_mb, core, env)
                    note = "" if within else "  OVER THE MEMORY LIMIT: stopped"
                    print(f"{assignment + ' ' + kind + f' #{i + 1}':28} {wall:7.1f} {cpu:6.1f} "
                          f"{2 * cpu:9.1f} {peak:8.0f} {single:9.0f}{note}", flush=True)
                    worst = [max(worst[0], wall), max(worst[1], peak)]
    print(f"worst: {worst[0]:.1f} s (goal under 60), {worst[1]:.0f} MB (goal under 500)")


if __name__ == "__main__":
    main()
