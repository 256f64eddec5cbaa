"""The regrade's child: one submission's answer cells, graded in a fresh process.

:mod:`._regrade_run` starts this module in a new interpreter (``python -I``, a temporary
working folder, an environment without the course's paths, limits on time and memory) and
writes one JSON line on its standard input: the assignment's set-up cell (from the
instructor's source), the student's answer cells, the tests (grade id, check, answer) and a
nonce. The child runs the set-up cell, then each answer cell, then calls each test's check
on the student's answer with fresh inputs (``seed=None``), with the checks' own guard on as
in a notebook. It reports on the file descriptor it was given, one JSON line per step, each
carrying the nonce; it never sends anything else (no pickles, no tensors):

- ``{"event": "cell", "answer": id}`` before an answer cell runs, and
  ``{"event": "defined", "answer": id, "flags": [[keyword, detail], ...], "error": str}``
  after (``flags``: what the cell's own code did, seen by an audit hook);
- ``{"event": "start", "test": id}`` before a check, and
  ``{"event": "result", "test": id, "passed": bool, "message": str, "flags": [...]}``
  after (``flags``: what the checks' guard refused, read from the failure);
- ``{"event": "done"}`` at the end.

The parent gives a step that does not finish (the process died or ran out of time) zero
points and runs the remaining steps in a new child.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import types
from typing import Any, Callable, Dict, List, Optional, Tuple

Flag = Tuple[str, str]
MESSAGE_LIMIT = 2000  # characters of a failure message sent back (a pipe write stays small)
ANSWER_FILE = "<answer {}>"  # the file name an answer cell's code is compiled under

# Audit events an answer cell's code may raise only to reach around the checks.
_EVENTS = {
    "sys._getframe": "frames", "sys._current_frames": "frames",
    "gc.get_objects": "gc", "gc.get_referrers": "gc", "gc.get_referents": "gc",
    "sys.settrace": "tracing", "sys.setprofile": "tracing", "sys.addaudithook": "tracing",
    "os.system": "subprocess", "os.exec": "subprocess", "os.posix_spawn": "subprocess",
    "os.spawn": "subprocess", "os.fork": "subprocess", "subprocess.Popen": "subprocess",
    "os.kill": "exit", "exec": "exec", "compile": "exec", "open": "files",
    "os.listdir": "files", "os.scandir": "files",
}
_MODULE_FILES = (".py", ".pyc", ".so", ".pth", ".pyd")
# What the checks' guard says when it refuses something (see qkv/checks/_calls.py, _audit.py,
# _guard.py, _compare.py), most specific first; a refusal not listed here is flagged "guard".
_REFUSALS = (
    ("write it yourself", "delegates"), ("reads the call stack", "frames"),
    ("reads a frame", "frames"), ("garbage collector", "gc"), ("opens the file", "files"),
    ("uses ctypes", "ctypes"), ("starts a process", "subprocess"), ("trace function", "tracing"),
    ("audit hook", "tracing"), ("checks' watch", "tracing"), ("torch's modes", "modes"),
    ("TorchScript", "exec"), ("compiles code", "exec"), ("while the check ran", "tampers"),
    ("built to pass comparisons", "subclass"),
)
_GUARD_WORDS = ("do not allow it", "the checks refuse", "write it yourself")
_HEALED = "had changed the checks"  # the checks' note when they undo a notebook's changes


class Watch:
    """An audit hook that records what an answer cell's own code does while the cell runs.

    Only events raised directly by the cell's code count (its frame is the caller): a
    library doing its own work (``dataclasses`` compiling, ``warnings`` reading frames) is
    not the student's doing. It is on only while a cell runs, never during a check, where
    the checks' guard refuses the same events (and would take this hook's own look at the
    stack for the student's).
    """

    def __init__(self) -> None:
        self.cell: Optional[str] = None
        self.flags: List[Flag] = []
        self._busy = False

    def __call__(self, event: str, args: tuple) -> None:
        if self.cell is None or self._busy:
            return
        keyword = _EVENTS.get(event) or ("ctypes" if event.startswith("ctypes.") else None)
        if keyword == "files" and args and isinstance(args[0], str) and args[0].endswith(
                _MODULE_FILES):
            keyword = None  # the import system reading a module
        if keyword is None:
            return
        self._busy = True
        try:
            frame = sys._getframe(1)
            if event == "subprocess.Popen":  # raised in subprocess.py, on behalf of its caller
                while frame is not None and frame.f_code.co_filename.endswith("subprocess.py"):
                    frame = frame.f_back
            if frame is not None and frame.f_code.co_filename.startswith("<answer "):
                named = event in ("open", "os.listdir") and args
                what = f"{event}({args[0]!r})" if named else event
                self.flags.append((keyword, f"{self.cell} ran {what[:120]}"))
        finally:
            self._busy = False


def refusal_flags(message: str) -> List[Flag]:
    """The flags a check's failure message raises: what the checks' guard refused, and a note
    that the checks had to undo changes to themselves."""
    flags = []
    first = message.strip().splitlines()[0] if message.strip() else ""
    for phrase, keyword in _REFUSALS:
        if phrase in message:
            flags.append((keyword, first[:200]))
            break
    else:
        if any(w in message for w in _GUARD_WORDS):
            flags.append(("guard", first[:200]))
    return flags


def _resolve(checks: Any, name: str) -> Optional[Callable[..., Any]]:
    """The check called ``name``; ``check_question:<id>`` asks question ``<id>`` (no inputs to draw)."""
    if name.startswith("check_question:"):
        qid = name.split(":", 1)[1]
        return lambda answer, seed=None: checks.check_question(qid, answer)
    return getattr(checks, name, None)


def _grade(check: Callable[..., Any], answer: Any, name: str) -> Tuple[bool, str, List[Flag]]:
    """Call ``check(answer, seed=None)``: passed, its failure's message, flags."""
    out = io.StringIO()
    passed, message, flags = False, "", []
    try:
        with contextlib.redirect_stdout(out):
            if answer is None:
                raise NameError(f"name {name!r} is not defined (no answer cell defines it)")
            check(answer, seed=None)
        passed = True
    except AssertionError as e:
        message = str(e)
    except BaseException as e:  # noqa: BLE001 (SystemExit, KeyboardInterrupt: the answer's)
        message = f"{type(e).__name__}: {e}"
        if isinstance(e, SystemExit):
            flags.append(("exit", f"{name} raised SystemExit"))
    flags = refusal_flags(message) + flags
    noted = [line for line in out.getvalue().splitlines() if _HEALED in line]
    if noted:
        flags.append(("tampers", noted[0][:200]))
    return passed, message[:MESSAGE_LIMIT], flags


def _define(watch: Watch, ns: Dict[str, Any], grade_id: str, source: str) -> str:
    """Run one answer cell in the notebook's namespace; the error it raised, if any."""
    watch.cell, watch.flags = grade_id, []
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(source, ANSWER_FILE.format(grade_id), "exec"), ns)  # noqa: S102
    except BaseException as e:  # noqa: BLE001 (a cell may raise anything, SystemExit included)
        if isinstance(e, SystemExit):
            watch.flags.append(("exit", f"{grade_id} raised SystemExit"))
        if type(e).__name__ == "Refused":  # the checks' audit hook refused a change to them
            watch.flags.append(("tampers", f"{grade_id}: {e}"[:200]))
        return f"{type(e).__name__}: {e}"[:MESSAGE_LIMIT]
    finally:
        watch.cell = None
    return ""


def limit_memory(extra: int) -> None:
    """Let the process grow by ``extra`` bytes of address space from here (torch is loaded:
    what its libraries map, which varies by build, is not the answers' to spend)."""
    import resource

    with open("/proc/self/statm") as f:
        now = int(f.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (now + extra, now + extra))


def main(fd: int) -> None:
    """Read the spec on stdin, grade, report on ``fd``; end the process without clean-up."""
    spec = json.loads(sys.stdin.readline())
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # nothing more to read: the spec (and its nonce) is gone from stdin
    nonce = spec.pop("nonce")

    def emit(**record: Any) -> None:
        os.write(fd, (json.dumps({"nonce": nonce, **record}) + "\n").encode())

    import torch

    torch.set_num_threads(1)
    notebook = types.ModuleType("__main__")  # a kernel runs cells in __main__
    sys.modules["__main__"] = notebook
    ns = vars(notebook)
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(spec["setup"], "<setup>", "exec"), ns)  # noqa: S102 (the instructor's cell)
    import qkv.checks

    checks = {c: _resolve(qkv.checks, c) for _, c, _ in spec["tests"]}
    limit_memory(spec["memory"])
    from ._regrade_sandbox import read_roots, restrict

    # From here on the answers run: the files, network and signals they may reach are
    # taken away for good (where the kernel has Landlock), before the first answer cell.
    restrict(os.getcwd(), read_roots())
    watch = Watch()
    sys.addaudithook(watch)
    for grade_id, source in spec["answers"]:
        emit(event="cell", answer=grade_id)
        error = _define(watch, ns, grade_id, source)
        emit(event="defined", answer=grade_id, flags=watch.flags, error=error)
    for test, check, answer in spec["tests"]:
        emit(event="start", test=test)
        if checks[check] is None:
            emit(event="result", test=test, passed=False, message=f"qkv.checks has no {check}",
                 flags=[])
            continue
        passed, message, flags = _grade(checks[check], ns.get(answer), answer)
        emit(event="result", test=test, passed=passed, message=message, flags=flags)
    emit(event="done")
    os._exit(0)  # no clean-up: an answer's threads or atexit handlers do not hold the child
