"""The regrade's parent side: run one submission's answers in guarded children, read their reports.

One child per submission (:mod:`._regrade_child`): a child imports torch and the checks once
(seconds), then grades every test. A step that does not finish (an answer cell or a check that
ends the process, loops past the time limit or runs out of memory) costs only that step: the
child is killed and a new one runs what is left, without that answer cell (a cell that ended
the process while being defined) or that test (one whose check did). So an answer that kills
its kernel loses its own test's points, and every other test is graded.

Each child runs as ``python -I`` (no user site, no ``PYTHON*`` variables), in a temporary
folder outside the course, with an environment that names none of the course's paths, in its
own session (killed as a group), under ``resource`` limits on memory, CPU time and file size,
on the CPU only.
Before the first answer runs, the child sandboxes itself (:mod:`._regrade_sandbox`: no course
files, no signals to the regrade, no network).
It reports JSON lines carrying a nonce on a pipe of its own; everything else it might write is
ignored, and a line that is not a valid report, or comes out of order, is a ``protocol`` flag
that ends the child. The nonce only keeps out what is not the child: an answer runs in the
child's own process and can, with enough effort, read the nonce and write reports in order.
What makes that visible is the static scan, which runs here, out of the student's reach
(:mod:`._regrade_scan_strict`: every way to reach the nonce is flagged).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import resource
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

Flag = Tuple[str, str]
STARTUP = 180  # seconds a child may take to import torch and the checks (a busy machine is slow)
FILE_LIMIT = 64 << 20  # bytes a child may write to any file (its stderr)
CHILD = "qkv_course._regrade_child"  # the module a child runs (tests put a stand-in here)
LINE_LIMIT = 1 << 16  # bytes of one report line (a message is cut to 2000 characters)
_KEYWORD = re.compile(r"[a-z][a-z._-]{0,30}")


@dataclass(frozen=True)
class Job:
    """What one submission's child runs.

    Args:
        setup: the set-up cell (the instructor's, from the assignment's source).
        answers: ``(grade id, source)`` of each of the student's answer cells, in order.
        tests: ``(grade id, check, answer)``: the test, the ``qkv.checks`` function its cell
            calls, and the answer's name it passes.
    """

    setup: str
    answers: List[Tuple[str, str]]
    tests: List[Tuple[str, str, str]]


@dataclass
class Result:
    """One test, graded afresh: whether the check passed, its message, flags."""

    passed: bool
    message: str = ""
    flags: List[Flag] = field(default_factory=list)


@dataclass
class Graded:
    """A submission's regrade: results per test, flags per answer cell, flags of the whole."""

    results: Dict[str, Result] = field(default_factory=dict)
    cell_flags: Dict[str, List[Flag]] = field(default_factory=dict)
    flags: List[Flag] = field(default_factory=list)


def _limits(cpu: int) -> None:
    """In the child before it starts: CPU seconds, file size, no core file. (Its memory limit
    is set by the child itself once torch is loaded: see :func:`._regrade_child.limit_memory`.)"""
    for limit, value in ((resource.RLIMIT_CPU, cpu), (resource.RLIMIT_FSIZE, FILE_LIMIT),
                         (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(limit, (value, value))


def _paths() -> List[str]:
    """Where this Python finds ``qkv`` and ``qkv_course`` (found without importing ``qkv``)."""
    spec = importlib.util.find_spec("qkv")
    found = [str(Path(__file__).resolve().parents[1])]
    if spec is not None and spec.origin:
        found.append(str(Path(spec.origin).resolve().parents[1]))
    return list(dict.fromkeys(found))


def _start(job: Job, nonce: str, folder: str, memory: int, cpu: int) -> Tuple[Any, int]:
    """Start a child on ``job``; the process and the read end of its report pipe."""
    read, write = os.pipe()
    boot = (f"import sys; sys.path[:0] = {_paths()!r}; "
            f"from {CHILD} import main; main({write})")
    env = {"PATH": "/usr/bin:/bin", "HOME": folder, "TMPDIR": folder, "LANG": "C.UTF-8",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg",
           "NBGRADER_EXECUTION": "autograde",  # the set-up cell then installs nothing
           "CUDA_VISIBLE_DEVICES": ""}  # graded on the CPU, the same on every grading machine
    with open(os.path.join(folder, "stderr"), "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", boot], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=err, cwd=folder, env=env, pass_fds=(write,),
            start_new_session=True, preexec_fn=lambda: _limits(cpu))
    os.close(write)
    spec = {"nonce": nonce, "setup": job.setup, "answers": job.answers, "tests": job.tests,
            "memory": memory}
    try:
        proc.stdin.write((json.dumps(spec) + "\n").encode())
        proc.stdin.close()
    except OSError:
        pass  # it died already: reported as a crash
    return proc, read


def _flags(value: Any) -> Optional[List[Flag]]:
    """A report's flags, if they are a list of ``[keyword, detail]`` string pairs."""
    if not isinstance(value, list) or not all(
            isinstance(f, list) and len(f) == 2 and all(isinstance(x, str) for x in f)
            and _KEYWORD.fullmatch(f[0]) for f in value):
        return None
    return [(k, d[:300]) for k, d in value]


def _valid(line: bytes, nonce: str, job: Job) -> Optional[Dict[str, Any]]:
    """A report line, checked against the job; None for anything else."""
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if not isinstance(rec, dict) or rec.get("nonce") != nonce:
        return None
    event = rec.get("event")
    answers, tests = {a for a, _ in job.answers}, {t for t, _, _ in job.tests}
    ok = {"cell": lambda: rec.get("answer") in answers,
          "defined": lambda: rec.get("answer") in answers and _flags(rec.get("flags")) is not None,
          "start": lambda: rec.get("test") in tests,
          "result": lambda: rec.get("test") in tests and isinstance(rec.get("passed"), bool)
          and isinstance(rec.get("message"), str) and _flags(rec.get("flags")) is not None,
          "done": lambda: True}.get(event)
    return rec if ok is not None and ok() else None


def _why(proc: Any, folder: str, timed_out: bool, timeout: float) -> Flag:
    """How a child that did not finish ended: ``timeout`` or ``crashed``, with a detail."""
    if timed_out:
        return "timeout", f"ran past the {timeout:g} s limit and was stopped"
    code = proc.returncode
    how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
           else f"exited with status {code}")
    try:
        with open(os.path.join(folder, "stderr"), "rb") as f:
            last = f.read()[-4000:].decode(errors="replace").strip().splitlines()
    except OSError:
        last = []
    return "crashed", how + (f" ({last[-1][:200]})" if last else "")


def _expected(job: Job) -> List[Tuple[str, str]]:
    """The reports an honest child sends, in order: ``(event, id)``."""
    steps = [(e, a) for a, _ in job.answers for e in ("cell", "defined")]
    return steps + [(e, t) for t, _, _ in job.tests for e in ("start", "result")] + [("done", "")]


def _one_child(job: Job, graded: Graded, timeout: float, memory: int) -> Optional[Tuple[str, str]]:
    """Run one child until it reports ``done`` or stops; record what it reported.

    The child must report every step in order (:func:`_expected`); a line out of order, too
    long or not a report at all is a ``protocol`` flag that ends the child: its answers are
    running code that writes on the report pipe, so nothing more it says counts. The whole
    child runs under a deadline of its own (every step's time added up), so a child cannot
    keep itself alive by reporting.

    Returns:
        None when it finished; otherwise the step it did not finish, ``("cell", id)``,
        ``("test", id)``, ``("start", "")`` (before any step) or ``("protocol", "")``,
        after recording the failure.
    """
    nonce = secrets.token_hex(16)
    expected = _expected(job)
    with tempfile.TemporaryDirectory(prefix="qkv-regrade-") as folder:
        proc, read = _start(job, nonce, folder, memory, int(STARTUP + timeout * len(expected)) + 10)
        current, buf, done, broken = ("start", ""), b"", False, False
        overall = time.monotonic() + STARTUP + timeout * len(expected)
        deadline = min(overall, time.monotonic() + STARTUP + timeout)
        try:
            while not done and not broken and time.monotonic() < deadline:
                if not select.select([read], [], [], max(0.0, deadline - time.monotonic()))[0]:
                    continue
                chunk = os.read(read, 1 << 16)
                if not chunk:
                    break  # the child is gone
                buf += chunk
                if b"\n" not in buf and len(buf) > LINE_LIMIT:
                    broken = _broken(graded, f"a report line longer than {LINE_LIMIT} bytes")
                while b"\n" in buf and not done and not broken:
                    line, buf = buf.split(b"\n", 1)
                    rec = _valid(line, nonce, job)
                    step = expected.pop(0) if expected else ("", "")
                    if rec is None or (rec["event"], rec.get("answer") or rec.get("test") or "") != step:
                        broken = _broken(graded, f"{'an out-of-order' if rec else 'an invalid'} "
                                         f"report line: {line[:80]!r}")
                        break
                    event = rec["event"]
                    if event in ("cell", "start"):
                        current = ("cell" if event == "cell" else "test", step[1])
                        deadline = min(overall, time.monotonic() + timeout)
                    elif event == "defined":
                        graded.cell_flags.setdefault(step[1], []).extend(_flags(rec["flags"]))
                        current = ("between", "")
                    elif event == "result":
                        graded.results[step[1]] = Result(rec["passed"], rec["message"],
                                                         _flags(rec["flags"]))
                        current = ("between", "")
                    done = event == "done"
        finally:
            timed_out = not done and not broken and time.monotonic() >= deadline
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            os.close(read)
        if done:
            return None
        if broken:
            return "protocol", ""
        flag = _why(proc, folder, timed_out, timeout)
    kind, name = current
    if kind == "test":
        graded.results[name] = Result(False, flag[1], [flag])
    elif kind == "cell":
        graded.cell_flags.setdefault(name, []).append((flag[0], f"answer cell {name} {flag[1]}"))
    else:
        graded.flags.append((flag[0], f"the regrade's process {flag[1]}"))
    return current


def _broken(graded: Graded, detail: str) -> bool:
    graded.flags.append(("protocol", detail))
    return True


def grade(job: Job, timeout: float, memory: int) -> Graded:
    """Grade every test of ``job``, starting a new child after each one that did not finish.

    Args:
        job: the submission's set-up, answer cells and tests.
        timeout: seconds each answer cell and each check may take.
        memory: bytes of address space each child may add to what torch and the checks take.

    Returns:
        a result for every test (a test whose child died or timed out: failed, flagged).
    """
    graded = Graded()
    skipped: Set[str] = set()
    while True:
        left = [t for t in job.tests if t[0] not in graded.results]
        if not left:
            return graded
        before = (len(graded.results), len(skipped))
        stopped = _one_child(Job(job.setup, [a for a in job.answers if a[0] not in skipped], left),
                             graded, timeout, memory)
        if stopped is None:
            return graded
        if stopped[0] == "protocol":  # its answers write reports: no new child would be honest
            for test, _, _ in left:
                graded.results.setdefault(test, Result(False, "not graded: the regrade's process "
                                                       "sent a forged report", []))
            return graded
        if stopped[0] == "cell":
            skipped.add(stopped[1])
        if (len(graded.results), len(skipped)) == before:  # no progress: the rest is lost
            why = graded.flags[-1] if graded.flags else ("crashed", "the regrade's process died")
            for test, _, _ in left:
                graded.results.setdefault(test, Result(False, why[1], [why]))
            return graded
