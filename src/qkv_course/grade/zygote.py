"""The zygote: one per job slot, inside the sandbox; it forks a child per submission.

It imports torch, qkv and IPython's input transformer once (as an unprivileged uid: see
:func:`_drop`), makes itself non-dumpable (a child cannot ptrace it or read its memory) and a
child subreaper (a daemon's orphans come back to it), then waits on its control socket
(``SOCK_SEQPACKET``, JSON messages) for the trusted parent's orders:

- ``{"op": "fork", "limits": {...}}`` with a socket attached (``SCM_RIGHTS``): fork a child
  that runs one submission over that socket (:func:`.worker.serve`), answer ``{"pid": pid}``;
- ``{"op": "reset", "pid": pid, "grace_s": s}``: end every process in the sandbox but its init and the zygote
  (``kill(-1, SIGKILL)`` until none is left: a daemon cannot leave the PID namespace), empty
  ``/tmp``, remove System V IPC objects, and answer ``{"status": how the child ended,
  "tainted": ""}``. A child runs as the zygote's user, so it may lower the zygote's limits
  (``prlimit``) or priority, which every later child would inherit: ``tainted`` says what
  changed, and the zygote then exits (the parent starts a new sandbox).

Nothing a child does reaches the zygote's memory (fork copies it); what it can reach (files in
``/tmp``, processes, IPC objects) the reset removes. If the child kills the zygote, the parent
sees it and starts a new sandbox.
"""

from __future__ import annotations

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
from typing import Any, Dict, List, Optional, Sequence

from . import limits as _limits
from .protocol import Caps, Channel
from .worker import load_run_student, serve

_PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 4, 36
_run_student: Any = None


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
    state = _state()
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
            status = _end_all(order.get("pid"), config, order.get("grace_s") or 0)
            changed = _changed(state)
            ctl.send(json.dumps({"status": status, "tainted": changed}).encode())
            if changed:  # the next submission must not inherit it: the parent starts anew
                _end_all(None, config)
                os._exit(3)
        else:
            for fd in fds:
                os.close(fd)
            ctl.send(json.dumps({"error": f"unknown order {str(order)[:80]}"}).encode())


#: ioprio_get's system call number, where this knows it (x86_64, aarch64).
_IOPRIO_GET = {"x86_64": 252, "aarch64": 31}.get(os.uname().machine)


def _state() -> Dict[str, Any]:
    """What a child, running as the same user, can change in the zygote from outside and every
    later child would inherit: its resource limits (``prlimit``), nice value, CPUs, scheduling
    policy, I/O priority, OOM score and session keyring."""
    import resource
    state: Dict[str, Any] = {
        name: resource.getrlimit(getattr(resource, name))
        for name in sorted(dir(resource)) if name.startswith("RLIMIT_")}
    state.update(nice=os.getpriority(os.PRIO_PROCESS, 0), cpus=sorted(os.sched_getaffinity(0)),
                 policy=os.sched_getscheduler(0))
    with open("/proc/self/oom_score_adj") as f:
        state["oom_score_adj"] = f.read().strip()
    if _IOPRIO_GET is not None:
        state["ioprio"] = ctypes.CDLL(None, use_errno=True).syscall(_IOPRIO_GET, 1, 0)
    state["session_keyring"] = _session_keyring()
    return state


def _changed(before: Dict[str, Any]) -> str:
    """What of :func:`_state` differs from ``before`` (``""``: nothing)."""
    now = _state()
    return ", ".join(f"{k} {before.get(k)} -> {v}" for k, v in now.items()
                     if v != before.get(k))[:300]


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
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)  # no thread pool in the zygote: fork copies only one thread
        torch.ones(8, 8) @ torch.ones(8, 8)  # torch's lazy start-up, paid once here
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # no ptrace, no /proc/<pid>/mem from a child
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans (daemons) come back to us
    with open("/proc/self/status") as f:
        vm = next(line for line in f if line.startswith("VmSize:"))
    return int(vm.split()[1]) * 1024


def _end_all(pid: Optional[int], config: Dict[str, Any], grace_s: float = 0) -> str:
    """End the submission's processes, every one; empty the writable folder. How it ended.

    ``grace_s``: how long the child may take to finish exiting first (its socket closes before
    the kernel has made it a zombie, so one that was just killed by a limit may still show).
    """
    status = "gone"
    end = time.monotonic() + min(max(float(grace_s), 0), 2)
    while pid:
        try:
            done, code = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            break
        if done or time.monotonic() >= end:
            status = _describe(code) if done else "running"
            break
        time.sleep(0.005)
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
    _wipe(config["tmp"], keep=config.get("keep", ()) if config["sandboxed"] else ())
    if config["sandboxed"]:
        _wipe("/dev/shm")
        _remove_ipc()
        _clear_keyrings()
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


def _wipe(folder: str, keep: Sequence[str] = ()) -> None:
    """Delete everything in ``folder`` but ``keep`` (a submission may have made parts of it
    read-only; ``keep``: the read-only binds' own folders, which it cannot write)."""
    def unlock(func: Any, path: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(path), stat.S_IRWXU)
            os.chmod(path, stat.S_IRWXU)
        except OSError:
            pass
        try:
            func(path)
        except (OSError, TypeError):  # rmtree's os.open wants flags: remove the folder anew
            shutil.rmtree(path, ignore_errors=True)

    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        return
    for entry in os.scandir(folder):
        if entry.path in keep:
            continue
        try:  # a folder the submission made unreadable (mode 000) must not stop the reset
            if entry.is_dir(follow_symlinks=False):
                os.chmod(entry.path, stat.S_IRWXU)
                shutil.rmtree(entry.path, onerror=unlock)
            else:
                os.unlink(entry.path)
        except (OSError, TypeError):
            pass


# keyctl's system call number, by machine; KEYCTL_CLEAR; the uid's two keyrings.
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}
_KEYCTL_CLEAR, _USER_KEYRINGS = 7, (-4, -5)
_KEYCTL_GET_KEYRING_ID, _KEYCTL_GET_PERSISTENT = 0, 22
_KEY_SPEC_PROCESS, _KEY_SPEC_SESSION = -2, -3


def _clear_keyrings() -> None:
    """Empty the uid's user keyrings and its persistent keyring: they are the uid's, not the
    submission's, and would carry a key from one submission to the next (no error if the
    kernel has no keyrings)."""
    number = _SYS_KEYCTL.get(os.uname().machine)
    if number is not None:
        libc = ctypes.CDLL(None, use_errno=True)
        persistent = libc.syscall(number, _KEYCTL_GET_PERSISTENT, -1, _KEY_SPEC_PROCESS)
        for keyring in _USER_KEYRINGS + ((persistent,) if persistent > 0 else ()):
            libc.syscall(number, _KEYCTL_CLEAR, keyring)


def _session_keyring() -> int:
    """The zygote's session keyring (a child may hand it a new one: KEYCTL_SESSION_TO_PARENT,
    which every later child would inherit); 0 where the kernel has no keyrings."""
    number = _SYS_KEYCTL.get(os.uname().machine)
    if number is None:
        return 0
    return int(ctypes.CDLL(None, use_errno=True).syscall(number, _KEYCTL_GET_KEYRING_ID,
                                                          _KEY_SPEC_SESSION, 0))


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
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(int(order["limits"].get("threads", 1)))
    serve(Channel(socket.socket(fileno=fd), Caps(total_bytes=1 << 40, header_bytes=1 << 30,
                                                  nodes=1 << 30, text=1 << 30)), _run_student)
    os._exit(0)
