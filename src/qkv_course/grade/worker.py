"""The grader's worker: runs inside the sandbox, never in the grader's process.

One worker per job slot is a *zygote*: it imports torch, qkv and IPython's input transformer
once, then waits on its control socket (``SOCK_SEQPACKET``, JSON messages) for the trusted
parent's orders:

- ``{"op": "fork", "limits": {...}}`` with a socket attached (``SCM_RIGHTS``): fork a child
  that runs one submission over that socket (:func:`serve`) and answer ``{"pid": pid}``;
- ``{"op": "reset", "pid": pid}``: end every process in the sandbox but its init and the zygote
  (``kill(-1, SIGKILL)`` until none is left; a daemon cannot leave the PID namespace), empty
  ``/tmp``, remove System V IPC objects, and answer ``{"status": how the child ended}``.

The child speaks :mod:`.protocol` with the parent directly: it receives the code cells, runs
them in one namespace and answers ``call`` and ``value`` requests until ``bye``. Nothing here
is trusted by the parent; a submission can change anything in its own child, which is why the
parent judges what comes back and the child is thrown away after one submission.
"""

from __future__ import annotations

import builtins
import ctypes
import importlib
import json
import os
import shutil
import signal
import socket
import stat
import sys
import time
import traceback
from typing import Any, Dict, List, Optional

from . import limits as _limits
from .protocol import Caps, Channel, NotEncodable, encode

_PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 4, 36
MESSAGE_CHARS = 2000  # of an exception's message sent back
_run_student: Any = None


def _fallback_run_student(check: Any, obj: Any, args: tuple, kwargs: dict, **options: Any) -> Any:
    """Stand-in until ``qkv.checks.grading`` exists: call the student's object."""
    return obj(*args, **kwargs)


def load_run_student() -> Any:
    """``qkv.checks.grading.run_student``, or the stand-in where that module does not exist yet."""
    try:
        from qkv.checks.grading import run_student  # type: ignore[import-not-found]
    except ModuleNotFoundError as e:
        if e.name not in ("qkv.checks.grading", "qkv.checks"):
            raise
        return _fallback_run_student
    return run_student


# ---------------------------------------------------------------- the zygote
def main() -> None:
    """Entry point: ``python -I -B -c '...; main()' CONFIG`` (the parent writes CONFIG, JSON)."""
    config = json.loads(sys.argv[1])
    ctl = socket.socket(fileno=config["ctl_fd"])
    try:
        if config.get("uid") is not None:
            _drop(int(config["uid"]))
        base = _prepare(config)
    except BaseException:  # the parent shows this to the instructor: the sandbox cannot start
        ctl.send(json.dumps({"error": traceback.format_exc()[-4000:]}).encode())
        raise SystemExit(1)
    ctl.send(json.dumps({"ready": True, "pid": os.getpid(), "base": base}).encode())
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(ctl, 1 << 16, 1)
        except ConnectionResetError:
            data, fds = b"", []
        if not data:  # the parent is gone
            _end_all(None, config)
            return
        order = json.loads(data)
        if order.get("op") == "fork" and len(fds) == 1:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                try:
                    _child(ctl, fds[0], order, base, config)
                finally:
                    os._exit(70)
            os.close(fds[0])
            ctl.send(json.dumps({"pid": pid}).encode())
        elif order.get("op") == "reset":
            status = _end_all(order.get("pid"), config)
            ctl.send(json.dumps({"status": status}).encode())
        else:
            for fd in fds:
                os.close(fd)
            ctl.send(json.dumps({"error": f"unknown order {str(order)[:80]}"}).encode())


def _drop(uid: int) -> None:
    """Become ``uid`` (bwrap started us as root with CAP_SETUID/SETGID only): no capability left."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    with open("/proc/self/status") as f:
        caps = {k: v.strip() for k, v in (line.split(":", 1) for line in f if line.startswith("Cap"))}
    if int(caps["CapEff"], 16) or int(caps["CapPrm"], 16) or os.getuid() != uid:
        raise RuntimeError(f"could not drop privileges: {caps}")


def _prepare(config: Dict[str, Any]) -> int:
    """Import what every submission needs, once; return the address space mapped by then."""
    global _run_student
    sys.path.extend(p for p in config.get("sys_path", []) if p not in sys.path)
    for name in config.get("preload", []):
        importlib.import_module(name)
    _run_student = load_run_student()
    import torch
    torch.set_num_threads(1)
    torch.ones(8, 8) @ torch.ones(8, 8)  # torch's lazy start-up, paid once here
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # no ptrace, no /proc/<pid>/mem from a child
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans (daemons) come back to us
    with open("/proc/self/status") as f:
        vm = next(line for line in f if line.startswith("VmSize:"))
    return int(vm.split()[1]) * 1024


def _end_all(pid: Optional[int], config: Dict[str, Any]) -> str:
    """End the submission's processes, every one; empty the writable folder. How it ended."""
    status = "gone"
    if pid:
        try:
            done, code = os.waitpid(pid, os.WNOHANG)
            status = _describe(code) if done else "running"
        except ChildProcessError:
            pass
    me = os.getpid()
    for _ in range(100_000):
        if config["sandboxed"]:
            try:  # every process we may signal in this PID namespace but init and ourselves
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
        else:  # no namespace (unsafe): only our own descendants, found through /proc
            for other in _descendants(me):
                try:
                    os.kill(other, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        _reap()
        if not (_alive(me) if config["sandboxed"] else _descendants(me)):
            break
        time.sleep(0.001)
    _wipe(config["tmp"])
    if config["sandboxed"]:
        _wipe("/dev/shm")
        _remove_ipc()
    return status


def _describe(code: int) -> str:
    if os.WIFSIGNALED(code):
        sig = os.WTERMSIG(code)
        return f"killed by {signal.Signals(sig).name}" if sig in signal.Signals._value2member_map_ \
            else f"killed by signal {sig}"
    return f"exited with status {os.WEXITSTATUS(code)}"


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _procs() -> Dict[int, tuple]:
    """Every process we can see: pid -> (state, parent pid)."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[int(entry)] = (fields[0], int(fields[1]))
    return out


def _alive(me: int) -> List[int]:
    return [p for p, (state, _) in _procs().items() if p not in (1, me) and state not in "ZX"]


def _descendants(me: int) -> List[int]:
    procs = _procs()
    found, frontier = set(), {me}
    while frontier:
        frontier = {p for p, (state, ppid) in procs.items() if ppid in frontier and p not in found}
        found |= frontier
    return [p for p in found if procs[p][0] not in "ZX"]


def _wipe(folder: str) -> None:
    """Delete everything in ``folder`` (a submission may have made parts of it read-only)."""
    def unlock(func: Any, path: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(path), stat.S_IRWXU)
            os.chmod(path, stat.S_IRWXU)
        except OSError:
            pass
        try:
            func(path)
        except OSError:
            pass

    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        return
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, onerror=unlock)
        else:
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def _remove_ipc() -> None:
    """System V shared memory, queues and semaphores left in the sandbox's IPC namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    for kind, remove in (("shm", lambda i: libc.shmctl(i, 0, None)),
                         ("msg", lambda i: libc.msgctl(i, 0, None)),
                         ("sem", lambda i: libc.semctl(i, 0, 0))):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                ids = [int(line.split()[1]) for line in list(f)[1:] if line.split()]
        except OSError:
            continue
        for ident in ids:
            remove(ident)


# ---------------------------------------------------------------- one submission (the child)
def _child(ctl: socket.socket, fd: int, order: Dict[str, Any], base: int,
           config: Dict[str, Any]) -> None:
    """In the forked child: cut it off from the zygote, set its limits, serve one submission."""
    ctl.close()
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):  # the submission's output goes nowhere, never to the parent
        os.dup2(null, target)
    for other in map(int, os.listdir("/proc/self/fd")):
        if other > 2 and other != fd:
            try:
                os.close(other)
            except OSError:
                pass
    work = os.path.join(config["tmp"], "submission")
    os.makedirs(work, exist_ok=True)
    os.chdir(work)
    os.environ.update(HOME=work, TMPDIR=work)
    import tempfile
    tempfile.tempdir = None
    _limits.apply(order["limits"], base)
    import torch
    torch.set_num_threads(int(order["limits"].get("threads", 1)))
    serve(Channel(socket.socket(fileno=fd), Caps(total_bytes=1 << 40, header_bytes=1 << 30,
                                                  nodes=1 << 30, text=1 << 30)))
    os._exit(0)


def serve(channel: Channel) -> None:
    """Run the cells the parent sends, then answer its requests until ``bye``."""
    header, cells = channel.recv()
    namespace: Dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    shell = _Shell(namespace)
    namespace.update(get_ipython=lambda: shell, display=lambda *a, **k: None)
    for index, source in enumerate(cells):
        raised = run_cell(namespace, index, source)
        channel.send({"op": "cell", "index": index, "raised": raised})
    channel.send({"op": "cells", "count": len(cells)})
    while True:
        header, value = channel.recv()
        op, rid = header.get("op"), header.get("id")
        if op == "bye":
            return
        if op == "call":
            reply, data = _call(namespace, header, value)
        elif op == "value":
            name = header.get("name")
            reply, data = ({"kind": "missing"}, None) if name not in namespace else (
                {"kind": "value"}, namespace[name])
        else:
            reply, data = {"kind": "error", "message": f"unknown op {op!r}"}, None
        reply.update(op="reply", id=rid)
        try:
            chunks = encode(reply, data)
        except NotEncodable as e:
            chunks = encode({"op": "reply", "id": rid, "kind": "notdata", "type": str(e)[:200]})
        except Exception as e:  # a tensor subclass whose methods raise, say: still not data
            chunks = encode({"op": "reply", "id": rid, "kind": "notdata",
                             "type": f"{type(data).__name__} ({type(e).__name__})"[:200]})
        channel.write(chunks)


def _call(namespace: Dict[str, Any], header: Dict[str, Any], value: Any) -> tuple:
    name = header.get("name")
    if name not in namespace:
        return {"kind": "raised", "raised": {
            "type": "NameError", "message": f"{name} is not written: the notebook defines no "
                                            f"{name!r}", "line": None}}, None
    args, kwargs, options = value
    try:
        result = _run_student(header.get("check"), namespace[name], tuple(args), dict(kwargs),
                              **dict(options))
    except BaseException as e:  # NotImplementedError, SystemExit... all are the student's
        return {"kind": "raised", "raised": _raised(e)}, None
    return {"kind": "value"}, result


def run_cell(namespace: Dict[str, Any], index: int, source: str) -> Optional[Dict[str, Any]]:
    """Run one code cell (IPython syntax) in ``namespace``; ``None``, or what it raised."""
    try:
        code = compile(_transform(source), f"<cell {index}>", "exec")
        exec(code, namespace)
    except BaseException as e:  # SystemExit and KeyboardInterrupt end the cell, not the worker
        return _raised(e)
    return None


def _transform(source: str) -> str:
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # plain Python cells still run
        return source
    return TransformerManager().transform_cell(source)


def _raised(e: BaseException) -> Dict[str, Any]:
    """An exception as data: type name, message (capped), line in the cell where it was raised."""
    line = e.lineno if isinstance(e, SyntaxError) and str(e.filename).startswith("<cell ") else None
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith("<cell "):
            line = tb.tb_lineno
        tb = tb.tb_next
    try:
        message = str(e)[:MESSAGE_CHARS]
    except BaseException:  # a message that raises is still an answer
        message = "(its message could not be read)"
    return {"type": type(e).__name__[:200], "message": message, "line": line}


class _Shell:
    """``get_ipython()`` in the sandbox: shell commands and most magics do nothing.

    ``%time``/``%timeit`` and ``%%time``/``%%timeit``/``%%capture`` run their code once (a cell
    under them defines names the grader needs); every other magic is a no-op.
    """

    _RUNS = ("time", "timeit", "capture", "prun")

    def __init__(self, namespace: Dict[str, Any]) -> None:
        self._ns = namespace

    def run_line_magic(self, name: str, line: str, *args: Any, **kwargs: Any) -> Any:
        if name in self._RUNS and line.strip():
            try:
                return eval(compile(_transform(line), "<cell magic>", "eval"), self._ns)
            except SyntaxError:
                exec(compile(_transform(line), "<cell magic>", "exec"), self._ns)
        return None

    def run_cell_magic(self, name: str, line: str, cell: str, *args: Any, **kwargs: Any) -> None:
        if name in self._RUNS:
            exec(compile(_transform(cell), "<cell magic>", "exec"), self._ns)

    def system(self, *args: Any, **kwargs: Any) -> None:
        return None

    def getoutput(self, *args: Any, **kwargs: Any) -> List[str]:
        return []

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None
