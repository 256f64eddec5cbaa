"""Whether a check can trust the kernel it runs in: :func:`refusal`.

The guard (torch's modes, the call watch) covers the thread that runs the check. A thread
that a notebook started earlier runs beside it, unguarded: it can compute the answer for
the student's function (which hands it the inputs through a queue), or change the checks
between the moment they heal themselves and the moment they compare. So a check does not
run while a thread of the notebook's is alive:

- any thread whose stack holds code that is not an installed library's (the notebook's
  own functions, also when they wait in a library call);
- a thread started since :mod:`qkv.checks` was imported (the set-up cell) that runs
  whatever it is handed: a pool's worker (``ThreadPoolExecutor``, ``ThreadPool``) or a
  target that is not a library's Python function (a built-in looping in C, say).

The kernel's own threads (started before the set-up cell) and library threads that run
library code only (``tqdm``'s monitor) are left alone. Nor does a check run on a torch
whose dispatcher holds a kernel of the notebook's (:mod:`._dispatcher`).
"""

from __future__ import annotations

import sys
import threading
from typing import Optional

from . import _dispatcher
from ._calls import from_library
from ._integrity import _BUSY, _QKV_DIR

# Threads alive when the checks were imported: the kernel's own.
_BEFORE = frozenset(t.ident for t in threading.enumerate())
# Library loops that run what they are handed: a notebook's pool is a worker of its own.
_POOLS = {("concurrent.futures.thread", "_worker"), ("multiprocessing.pool", "worker")}


def _notebook_frame(frame) -> Optional[str]:
    """The first frame of a thread's stack that runs code of the notebook's, in words."""
    while frame is not None:
        code = frame.f_code
        if not from_library(frame) and not code.co_filename.startswith(_QKV_DIR):
            return f"{code.co_qualname} ({code.co_filename}, line {frame.f_lineno})"
        frame = frame.f_back
    return None


def _runs_anything(thread: threading.Thread) -> Optional[str]:
    """Why a thread started since the set-up cell could run the notebook's code, or None."""
    target = getattr(thread, "_target", None)
    if target is None:
        return None  # a Thread subclass: what runs is its run(), seen in its frames
    code = getattr(target, "__code__", None)
    if code is None:
        return f"{getattr(target, '__qualname__', type(target).__name__)} (not Python code)"
    module = getattr(target, "__module__", "")
    if (module, code.co_name) in _POOLS:
        return f"a worker of a pool ({module})"
    return None


def _thread_refusal() -> Optional[str]:
    _BUSY[0] = True  # the checks' audit hook sees sys._current_frames
    try:
        frames = sys._current_frames()
    finally:
        _BUSY[0] = False
    me = threading.get_ident()
    for ident, frame in frames.items():
        where = _notebook_frame(frame) if ident != me else None
        if where:
            return f"a thread this notebook started is running {where}"
    for thread in threading.enumerate():
        if thread.ident == me or thread.ident in _BEFORE:
            continue
        what = _runs_anything(thread)
        if what:
            return f"a thread this notebook started runs {what}"
    return None


def refusal() -> Optional[str]:
    """Why a check must not run in this kernel, or None (see the module's docstring)."""
    op = _dispatcher.tampered()
    if op:
        return (f"torch's dispatcher holds a kernel this notebook registered for {op} "
                f"(torch.library), which changes what the checks compute")
    return _thread_refusal()
