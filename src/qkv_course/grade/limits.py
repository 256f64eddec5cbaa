"""What one submission may spend: :class:`Limits`, and how the worker applies them.

The wall-clock limits are the parent's (it stops waiting and ends the process); the others
are the kernel's resource limits (``setrlimit``), set in the submission's process before its
first cell runs and inherited by every process it starts. They are per process: a submission
that starts ``nproc`` processes may use ``nproc`` times ``memory_mb`` and ``cpu_s``; the
wall-clock limit ends them all. Where cgroups can be written, the slot's cgroup
(:mod:`.cgroup`) caps them together: ``threads`` cores and ``memory_mb`` (plus ``/tmp`` and the
zygote) for the whole sandbox.
"""

from __future__ import annotations

import resource
from dataclasses import asdict, dataclass, fields
from typing import Any, Dict


@dataclass(frozen=True)
class Limits:
    """Caps on one submission.

    Attributes:
        cpu_s: CPU seconds (``RLIMIT_CPU``); past it the process gets SIGXCPU, then SIGKILL.
        cell_s: wall-clock seconds one code cell may run before the worker interrupts it and
            goes on with the next (as a notebook's kernel interrupted on a time-out).
        wall_s: wall-clock seconds for the submission's whole life: its cells and every request
            (a request's own ``timeout_s`` can only shorten it).
        memory_mb: address space a process may add to what the worker had mapped before the
            submission started (``RLIMIT_AS``): an allocation past it raises ``MemoryError``
            (Python) or ``RuntimeError`` (torch) in the submission.
        nproc: processes and threads in the sandbox at once (``RLIMIT_NPROC``; the sandbox's
            own two processes count): a fork bomb gets ``EAGAIN``.
        nofile: open file descriptors per process (``RLIMIT_NOFILE``).
        fsize_mb: largest file the submission may write (``RLIMIT_FSIZE``).
        tmp_mb: size of the sandbox's private ``/tmp``, the only place it can write.
        threads: torch, OpenMP and BLAS threads (set this and ``Pool(jobs=...)`` to share the cores).
        reply_mb: most tensor data one reply may carry back to the grader.
        start_s: seconds a sandbox may take to start (Python, torch and qkv imported once per
            job slot with the zygote, once per submission without).
    """

    cpu_s: float = 60
    cell_s: float = 60
    wall_s: float = 120
    memory_mb: int = 4096
    nproc: int = 64
    nofile: int = 256
    fsize_mb: int = 64
    tmp_mb: int = 512
    threads: int = 1
    reply_mb: int = 64
    start_s: float = 120

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Limits.{f.name} must be a positive number, not {value!r}")
        if self.nproc < 8:
            raise ValueError("Limits.nproc must be at least 8: the sandbox itself needs a few")

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def apply(limits: Dict[str, Any], base_address_space: int) -> None:
    """Set the resource limits in this process (the submission's), for it and its children.

    Args:
        limits: :meth:`Limits.as_dict` (it crosses to the worker as JSON).
        base_address_space: bytes mapped before the submission (Python, torch, qkv), on top of
            which ``memory_mb`` is allowed.
    """
    cpu = max(1, int(limits["cpu_s"]))
    mb = 1 << 20
    caps = {
        resource.RLIMIT_CPU: (cpu, cpu + 2),  # SIGXCPU first; SIGKILL 2 s later if it ignores it
        resource.RLIMIT_AS: (base_address_space + int(limits["memory_mb"]) * mb,) * 2,
        resource.RLIMIT_NPROC: (int(limits["nproc"]),) * 2,
        resource.RLIMIT_NOFILE: (int(limits["nofile"]),) * 2,
        resource.RLIMIT_FSIZE: (int(limits["fsize_mb"]) * mb,) * 2,
        resource.RLIMIT_CORE: (0, 0),
        # No POSIX message queue: one would outlive the submission in the slot's IPC namespace
        # (the reset removes System V objects only), a channel to the next one.
        resource.RLIMIT_MSGQUEUE: (0, 0),
    }
    for which, (soft, hard) in caps.items():
        _, old_hard = resource.getrlimit(which)
        if old_hard != resource.RLIM_INFINITY:  # a limit can only be lowered here
            soft, hard = min(soft, old_hard), min(hard, old_hard)
        resource.setrlimit(which, (soft, hard))
