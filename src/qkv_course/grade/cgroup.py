"""A share of the machine per job slot: a cgroup that caps the CPU and memory of its sandbox.

The resource limits of :mod:`.limits` are per process: a submission that starts many processes
can take every core (the others' wall-clock limits then run out while they wait) and many
times ``memory_mb``. Where the grader may write the cgroup hierarchy (root on a machine or a
privileged container), each slot's sandbox runs in a cgroup of its own:

- CPU: ``threads`` cores' worth of time (``cpu.max`` in cgroup v2, the CFS quota in v1), so a
  submission that spins up sixty busy processes slows only itself;
- memory: ``memory_mb`` for the submission, plus its ``/tmp`` (a tmpfs is charged to the group)
  and the zygote's own imports; past it the kernel ends a process of that slot only.

Where the hierarchy cannot be written (an ordinary user, most unprivileged containers),
:func:`slot_group` returns ``None`` with the reason and the slots share the machine as before:
the grade command says so.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from .limits import Limits

ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000
#: Memory a slot's zygote holds before any submission (Python, torch and qkv imported).
ZYGOTE_MB = 2048


class SlotGroup:
    """One slot's cgroup (one folder per controller in v1, one folder in v2)."""

    def __init__(self, folders: Sequence[Path], parent: Optional[Path] = None) -> None:
        self.folders = list(folders)
        self.parent = parent  # v2: this grader's folder above its slots'; the last one out removes it

    def wrap(self, argv: Sequence[str]) -> List[str]:
        """``argv`` started by a shell that first moves itself into the group: what it then
        runs (bwrap, and everything bwrap starts) is in the group from its first instruction."""
        script = ('while [ "$1" != -- ]; do echo $$ > "$1" || exit 70; shift; done; shift; '
                  'exec "$@"')
        procs = [str(f / "cgroup.procs") for f in self.folders]
        return ["/bin/sh", "-c", script, "sh", *procs, "--", *argv]

    def remove(self, wait_s: float = 5.0) -> None:
        """Remove the group's folders, once the kernel has ended what was left in them (the
        processes of a killed sandbox go a moment after it); a folder still busy then stays."""
        deadline = time.monotonic() + wait_s
        for folder in self.folders:
            while folder.exists():
                try:
                    folder.rmdir()
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.02)
        if self.parent is not None:
            try:
                self.parent.rmdir()
            except OSError:
                pass  # another slot's folder is still in it


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _v2(name: str, cpus: float, memory: int) -> SlotGroup:
    parent = ROOT / f"qkv-grade-{os.getpid()}"
    made = not parent.exists()
    parent.mkdir(exist_ok=True)
    folder = parent / name
    try:
        _write(ROOT / "cgroup.subtree_control", "+cpu +memory")
        _write(parent / "cgroup.subtree_control", "+cpu +memory")
        folder.mkdir()
        _write(folder / "cpu.max", f"{int(cpus * PERIOD_US)} {PERIOD_US}")
        _write(folder / "memory.max", str(memory))
        if (folder / "memory.swap.max").exists():
            _write(folder / "memory.swap.max", "0")
    except OSError:
        SlotGroup([folder] if folder.exists() else [], parent if made else None).remove()
        raise
    return SlotGroup([folder], parent)


def _v1(name: str, cpus: float, memory: int) -> SlotGroup:
    made: List[Path] = []
    try:
        for controller in ("cpu", "memory"):
            folder = ROOT / controller / f"qkv-grade-{os.getpid()}-{name}"
            folder.mkdir()
            made.append(folder)
        _write(made[0] / "cpu.cfs_period_us", str(PERIOD_US))
        _write(made[0] / "cpu.cfs_quota_us", str(int(cpus * PERIOD_US)))
        _write(made[1] / "memory.limit_in_bytes", str(memory))
    except OSError:
        SlotGroup(made).remove()
        raise
    return SlotGroup(made)


def slot_group(name: str, limits: Limits) -> Tuple[Optional[SlotGroup], str]:
    """A new cgroup for one slot, and ``""``; or ``None`` and why there is none.

    Args:
        name: unique among this grader's slots (``"slot-0"``).
        limits: ``threads`` is the slot's CPU share in cores; ``memory_mb`` and ``tmp_mb`` (plus
            :data:`ZYGOTE_MB`) its memory.
    """
    memory = (limits.memory_mb + limits.tmp_mb + ZYGOTE_MB) << 20
    if not os.access("/bin/sh", os.X_OK):
        return None, "no /bin/sh to enter the group with"
    try:
        if (ROOT / "cgroup.controllers").exists():
            return _v2(name, float(limits.threads), memory), ""
        if (ROOT / "cpu" / "cgroup.procs").exists() and (ROOT / "memory" / "cgroup.procs").exists():
            return _v1(name, float(limits.threads), memory), ""
        return None, f"no cgroup hierarchy with the cpu and memory controllers under {ROOT}"
    except OSError as e:
        return None, f"the cgroup hierarchy cannot be written here ({e.strerror or e})"
