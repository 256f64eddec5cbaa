"""Refuse, before allocating, tensors and modules that could never fit in memory.

Without these checks a call with long sequences asks the allocator for terabytes and
fails deep inside torch, or worse, fits the machine but not what is free and makes
the kernel swap or be killed. Part of the rule book of :mod:`qkv._validate`.
"""

from __future__ import annotations

import math
import os
from typing import List, Optional, Sequence

import torch

def memory_limit(device: torch.device) -> int:
    """Bytes of memory available on ``device``: free GPU memory on CUDA, available RAM otherwise.

    Available, not total: an allocation that fits the machine but not what is free
    makes the system swap or kill the process (often a whole Jupyter kernel). On the CPU
    the least of what the machine has free, what this process's control group may still
    take (a container's or a grader's limit, which ``/proc/meminfo`` does not show) and
    what its address-space limit (``ulimit -v``) leaves.
    """
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return min([_meminfo_available(), *_cgroup_room(), *_rlimit_room()])


def _meminfo_available() -> int:
    """``MemAvailable`` of ``/proc/meminfo``, or the physical memory where there is none."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: assume a large machine
        return 1 << 40


def _read_int(path: str) -> Optional[int]:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max" (cgroup v2) means no limit


def _cgroup_room() -> List[int]:
    """Bytes this process's memory control group (v2 or v1) may still take; [] without a limit."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    room = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: one unified hierarchy
            pairs = [(f"/sys/fs/cgroup{d}/memory.max", f"/sys/fs/cgroup{d}/memory.current")
                     for d in (path.rstrip("/"), "")]
        elif "memory" in controllers.split(","):  # v1; in a container the group is mounted at its root
            pairs = [(f"/sys/fs/cgroup/memory{d}/memory.limit_in_bytes",
                      f"/sys/fs/cgroup/memory{d}/memory.usage_in_bytes") for d in (path.rstrip("/"), "")]
        else:
            continue
        for limit_file, used_file in pairs:
            limit, used = _read_int(limit_file), _read_int(used_file)
            if limit is not None and used is not None and limit < 1 << 60:  # v1 writes ~2**63 for none
                room.append(max(limit - used, 0))
                break
    return room


def _rlimit_room() -> List[int]:
    """Bytes the address-space and data limits (``ulimit -v``, ``-d``) leave; [] without limits."""
    try:
        import resource
    except ImportError:  # not POSIX
        return []
    room = []
    for limit, field in ((resource.RLIMIT_AS, "VmSize:"), (resource.RLIMIT_DATA, "VmData:")):
        soft = resource.getrlimit(limit)[0]
        if soft == resource.RLIM_INFINITY:
            continue
        used = 0
        try:
            with open("/proc/self/status") as f:
                used = next((int(ln.split()[1]) * 1024 for ln in f if ln.startswith(field)), 0)
        except OSError:
            pass
        room.append(max(soft - used, 0))
    return room


#: Below this many bytes an allocation is not worth asking the system about: reading
#: /proc/meminfo on every call would cost time, and the checks forbid opening files while a
#: student's function (which may call the reference) runs.
SMALL = 256 * 2**20

CHUNKED_HINT = (
    "use qkv.chunked_attention, which never holds all L x S weights at once, or shorter inputs"
)


def require_fits(
    what: str, shape: Sequence[int], dtype: torch.dtype, device: torch.device, hint: str = CHUNKED_HINT,
    copies: int = 1,
) -> None:
    """Raise ``ValueError`` before allocating a tensor of ``shape`` that could never fit.

    Without this a call with long sequences asks the allocator for terabytes and
    fails deep inside torch (or swaps the machine to a halt). ``what`` names the
    tensor in the message ("the (L, S) scores"); ``hint`` says what to do instead;
    ``copies`` counts the tensors of that shape held at once.
    """
    elements = math.prod(int(d) for d in shape)
    needed = copies * elements * dtype.itemsize
    if needed <= SMALL:
        return  # the common case: no need to ask the system (which means reading a file)
    limit = memory_limit(torch.device(device))
    if needed > limit:
        raise ValueError(
            f"{what} of shape {tuple(int(d) for d in shape)} would need {_bytes(needed)}"
            f"{f' ({copies} of them at once)' if copies > 1 else ''}, more than "
            f"the {_bytes(limit)} of memory available on {torch.device(device).type}; {hint}"
        )


def require_weights_fit(owner: str, sizes: dict, count: int, dtype: Optional[torch.dtype] = None,
                        device: Optional[torch.device] = None) -> None:
    """Refuse a module whose ``count`` parameters could never fit, naming the sizes that were asked.

    ``sizes`` are the constructor's size arguments (``{"embed_dim": 10**7}``), for the message.
    """
    args = ", ".join(f"{k}={n}" for k, n in sizes.items())
    dtype = dtype or torch.get_default_dtype()
    require_fits(f"the weights of {owner}({args})", (count,), dtype, torch.device(device or "cpu"),
                 hint="check the sizes: they are widths and counts, not numbers of tokens")


def _bytes(n: float) -> str:
    """``n`` bytes written for people: ``4.0 TB``."""
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n} B"  # unreachable
