"""Refuse, before allocating, tensors and modules that could never fit in memory.

Without these checks a call with long sequences asks the allocator for terabytes and
fails deep inside torch, or worse, fits the machine but not what is free and makes
the kernel swap or be killed. Part of the rule book of :mod:`qkv._validate`.
"""

from __future__ import annotations

import math
import os
from typing import Optional, Sequence

import torch

def memory_limit(device: torch.device) -> int:
    """Bytes of memory available on ``device``: free GPU memory on CUDA, available RAM otherwise.

    Available, not total: an allocation that fits the machine but not what is free
    makes the system swap or kill the process (often a whole Jupyter kernel).
    """
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
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


#: Below this many bytes an allocation is not worth asking the system about: reading
#: /proc/meminfo on every call would cost time, and the checks forbid opening files while a
#: student's function (which may call the reference) runs.
SMALL = 256 * 2**20

CHUNKED_HINT = (
    "use qkv.chunked_attention, which never holds all L x S weights at once, or shorter inputs"
)


def require_fits(
    what: str, shape: Sequence[int], dtype: torch.dtype, device: torch.device, hint: str = CHUNKED_HINT
) -> None:
    """Raise ``ValueError`` before allocating a tensor of ``shape`` that could never fit.

    Without this a call with long sequences asks the allocator for terabytes and
    fails deep inside torch (or swaps the machine to a halt). ``what`` names the
    tensor in the message ("the (L, S) scores"); ``hint`` says what to do instead.
    """
    elements = math.prod(int(d) for d in shape)
    needed = elements * dtype.itemsize
    if needed <= SMALL:
        return  # the common case: no need to ask the system (which means reading a file)
    limit = memory_limit(torch.device(device))
    if needed > limit:
        raise ValueError(
            f"{what} of shape {tuple(int(d) for d in shape)} would need {_bytes(needed)}, more than "
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
