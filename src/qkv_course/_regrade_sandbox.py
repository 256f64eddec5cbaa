"""The regrade child's sandbox: Linux Landlock, applied before the first answer cell runs.

Resource limits bound what an answer spends; they do not stop it from writing into the course
folder (its path is in the regrade's command line, ``/proc/<ppid>/cwd`` leads there, the
instructor's processes are all readable), from rewriting ``regrade.csv`` later from a process
it left behind, or from signalling the regrade itself. Landlock, an unprivileged Linux
security module (kernel 5.13+), takes those away from the child and everything it starts,
for good: after :func:`restrict` the process may read only the folders Python and torch are
loaded from, write only its own temporary folder, open no TCP connection (Landlock ABI 4+),
and signal no process outside its sandbox (ABI 6+, kernel 6.12).

Where Landlock is missing (another OS, an old kernel) :func:`restrict` returns 0 and the
regrade says so in its summary: the grading process then runs with the instructor's rights.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Iterable, List

_CREATE, _ADD_RULE, _RESTRICT = 444, 445, 446  # the same number on every Linux architecture
_VERSION = 1  # LANDLOCK_CREATE_RULESET_VERSION: ask for the ABI
_PATH_BENEATH = 1
_NO_NEW_PRIVS = 38
_READ = (1 << 0) | (1 << 2) | (1 << 3)  # execute, read a file, read a folder
_WRITE_DEV = 1 << 1  # write a file (/dev/null)
_FS_RIGHTS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1}  # by ABI; 5+: (1 << 16) - 1
_NET_ALL = (1 << 0) | (1 << 1)  # bind, connect (TCP)
_SCOPE_ALL = (1 << 0) | (1 << 1)  # abstract unix sockets, signals


# What torch reads about the machine when an operator first runs (cpuinfo): the process's own
# /proc entry, never another's (those would give the regrade's command line: the course path).
_SYSTEM = ("/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/sys/devices/system/cpu",
           "/sys/devices/system/node")


class _Ruleset(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _Beneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        version = _libc().syscall(_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def read_roots() -> List[str]:
    """What the child must still read: where Python, its libraries, torch and qkv come from."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, "/usr", "/lib", "/lib64", "/etc",
             "/dev", f"/proc/{os.getpid()}", *_SYSTEM}
    roots.update(p for p in sys.path if p and os.path.isdir(p))
    return sorted(r for r in roots if os.path.exists(r))


def restrict(writable: str, readable: Iterable[str]) -> int:
    """Sandbox this process (and every process it starts) for good.

    Args:
        writable: the one folder it may write (its temporary working folder).
        readable: folders it may read and execute from.

    Returns:
        the Landlock ABI applied; 0 when Landlock is not available (nothing changed).
    """
    version = abi()
    if version < 1:
        return 0
    libc = _libc()
    fs = _FS_RIGHTS.get(version, (1 << 16) - 1)
    attr = _Ruleset(fs, _NET_ALL if version >= 4 else 0, _SCOPE_ALL if version >= 6 else 0)
    size = 8 if version < 4 else 16 if version < 6 else 24
    ruleset = libc.syscall(_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return 0
    try:
        rules = [(r, _READ) for r in readable] + [(writable, fs), ("/dev/null", _WRITE_DEV | (
            1 << 2))]
        for path, rights in rules:
            _allow(libc, ruleset, path, rights & fs)
        if libc.prctl(_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.syscall(
                _RESTRICT, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return version


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    """Let the sandbox use ``rights`` beneath ``path`` (a file gets only a file's rights)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone: nothing to allow
    try:
        if not os.path.isdir(path):
            rights &= (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)
        rule = _Beneath(rights, fd)
        if libc.syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_PATH_BENEATH),
                        ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(fd)
