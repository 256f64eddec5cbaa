"""The grader's side: :class:`Pool` of sandboxed job slots, one :class:`~.child.Submission` at a
time each (the submission itself, its cells and requests, is :mod:`.child`).

Typical use (the trusted grader decides what to call; only data comes back)::

    with Pool(jobs=2, hide=[course_folder]) as pool:
        with pool.submission(code_cells) as sub:
            if sub.failed: ...                       # the cells crashed or ran out of time
            sub.cells                                # [CellOutcome(index, raised), ...]
            out = sub.call("softmax", "softmax", (x,), {"dim": -1}, {}, timeout_s=20)
            # out: the value (tensors, tuples, ...) | Raised | NotData | Failed
            n = sub.value("n_heads", timeout_s=5)    # data | Missing | NotData | Failed

Each ``submission`` takes a free slot (waiting for one while all ``jobs`` are busy), forks a
fresh child from the slot's zygote, and runs the cells; leaving the ``with`` block ends every
process the submission started and empties its ``/tmp``. A submission that crashes, breaks the
protocol or overruns a limit gets :class:`Failed` for that request and every later one; the
slot is restarted if its zygote was harmed; the next submission does not notice.

Threads: a pool may be driven from up to ``jobs`` threads at once (one submission per thread;
a :class:`Submission` itself is not shared between threads). From a process pool, give each
process its own ``Pool(jobs=1)``.
"""

from __future__ import annotations

import functools
import queue
import shutil
import subprocess
import tempfile
import threading
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from importlib.util import find_spec
from typing import Any, List, Optional, Sequence, Tuple

from .cgroup import SlotGroup, slot_group
from .child import Submission
from .limits import Limits
from .sandbox import (SandboxUnavailable, hidden_roots, make_library, probe, visible_paths,
                      zygote_command)
from .slot import Slot, SlotBroken

PRELOAD = ("numpy", "torch", "qkv", "IPython.core.inputtransformer2", "matplotlib.pyplot")
UNSAFE_WARNING = ("grading WITHOUT a sandbox (unsafe): submissions run with your rights and can "
                  "read and change the course folder, the gradebook and the network")


class Pool:
    """Sandboxed job slots for grading; a context manager.

    Args:
        jobs: slots, i.e. submissions run at once (each slot holds one sandbox with torch loaded).
        limits: what each submission may spend (:class:`~.limits.Limits`).
        unsafe: run without bwrap (the rlimits still apply; no boundary): warns.
        qkv_path: the ``qkv`` package folder the sandbox gets a read-only copy of (default: the
            one Python imports).
        hide: folders that must stay invisible even if under a folder the sandbox needs (the
            course folder; the working folder and ``qkv``'s repository are always added).
        zygote: fork each submission from a warm zygote (fast); ``False`` starts a fresh sandbox
            per submission (torch imported every time; for comparison).
        preload: modules the zygote imports once (those not installed are skipped).

    Raises:
        SandboxUnavailable: bwrap is missing or cannot create namespaces (not with ``unsafe``).
    """

    def __init__(self, jobs: int = 1, limits: Limits = Limits(), unsafe: bool = False,
                 qkv_path: Optional[str] = None, *, hide: Sequence[str] = (),
                 zygote: bool = True, preload: Sequence[str] = PRELOAD) -> None:
        if jobs < 1:
            raise ValueError(f"jobs must be at least 1, not {jobs}")
        self.limits, self.unsafe, self.zygote = limits, unsafe, zygote
        if unsafe:
            warnings.warn(UNSAFE_WARNING, RuntimeWarning, stacklevel=2)
            self._bwrap = ""
        else:
            self._bwrap = probe()
        self._binds, self._covers = visible_paths(hidden_roots(qkv_path, hide))
        self._preload = [m for m in preload if find_spec(m.split(".")[0]) is not None]
        self._lib = make_library(qkv_path)
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix="qkv-grade-start")
        self._temps: List[str] = []
        # what starts a zygote holds no reference to the pool, so that an unclosed pool is
        # still collected (and its finalizer ends the sandboxes)
        launch = functools.partial(_launch, self._spawner, self._temps, self._bwrap, self._lib,
                                   limits, self._binds, self._covers, self._preload, unsafe)
        # Each slot's share of the CPU and memory, where cgroups can be written (see .cgroup).
        made = [slot_group(f"slot-{i}", limits) for i in range(jobs)]
        self._groups = [g for g, _ in made if g is not None]
        #: Why the slots share the machine without caps ("" when each has its cgroup).
        self.shared = next((why for g, why in made if g is None), "")
        self._slots = [Slot(functools.partial(launch, group=g), limits, unsafe) for g, _ in made]
        # last in, first out: the warm slot just given back serves next; the others start only
        # when that many submissions run at once
        self._free: "queue.LifoQueue[Slot]" = queue.LifoQueue()
        for slot in self._slots:
            self._free.put(slot)
        self._closed = threading.Event()
        self._finalizer = weakref.finalize(self, _close, self._slots, self._spawner, self._lib,
                                           self._temps, self._groups)

    def submission(self, cells: Sequence[str], limits: Optional[Limits] = None) -> "Submission":
        """Run ``cells`` (code cells' sources, in order) in a fresh child; see :class:`Submission`.

        Args:
            cells: the submission's code cells, as the instructor's source selects them.
            limits: this submission's limits instead of the pool's (``tmp_mb``, ``threads`` and
                ``start_s`` are the sandbox's, fixed when it starts: the pool's apply).

        Blocks while every slot is busy. Raises :class:`SandboxUnavailable` if a slot's sandbox
        cannot be started.
        """
        if self._closed.is_set():
            raise RuntimeError("this Pool is closed")
        if not all(isinstance(c, str) for c in cells):
            raise TypeError("cells must be a list of source strings")
        slot = self._free.get()
        try:
            return Submission(self, slot, list(cells), limits or self.limits)
        except BaseException:
            self._give_back(slot, None)
            raise

    def close(self) -> None:
        """End every sandbox and remove the library copy."""
        self._closed.set()
        self._finalizer()

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- slots
    def _fork(self, slot: Slot, limits: Limits) -> Tuple[int, Any]:
        """A child from ``slot``, (re)starting its sandbox once if it is not running or broken."""
        for attempt in (0, 1):
            if not slot.alive:
                slot.start()
            try:
                return slot.fork(limits)
            except SlotBroken as e:
                detail = slot.output()
                slot.kill()
                if attempt:
                    raise SandboxUnavailable(f"the sandbox could not start a submission: {e}; "
                                             f"{detail}") from None
        raise AssertionError("unreachable")

    def _give_back(self, slot: Slot, pid: Optional[int], grace_s: float = 0) -> str:
        """End the submission's processes and return the slot; how its child ended."""
        status = "gone"
        try:
            if slot.alive:
                status = slot.reset(pid, grace_s=grace_s)
            if not self.zygote:
                slot.kill()
        except SlotBroken:
            slot.kill()
        finally:
            self._free.put(slot)
        return status


def _launch(spawner: ThreadPoolExecutor, temps: List[str], bwrap: str, lib: str, limits: Limits,
            binds: Sequence[str], covers: Sequence[str], preload: Sequence[str], unsafe: bool,
            ctl_fd: int, group: Optional[SlotGroup] = None
            ) -> Tuple["subprocess.Popen[bytes]", Any]:
    """Start a zygote from the pool's one long-lived thread (see :class:`~.slot.Slot`), in
    the slot's cgroup when it has one."""
    log = tempfile.TemporaryFile()
    tmp = None
    if unsafe:
        tmp = tempfile.mkdtemp(prefix="qkv-grade-unsafe-")
        temps.append(tmp)
    argv, kwargs = zygote_command(bwrap, lib, limits, binds, covers, preload, ctl_fd,
                                  unsafe_tmp=tmp)
    if group is not None:
        argv = group.wrap(argv)
    future = spawner.submit(subprocess.Popen, argv, pass_fds=[ctl_fd], stdin=subprocess.DEVNULL,
                            stdout=log, stderr=log, start_new_session=True, **kwargs)
    return future.result(), log


def _close(slots: List[Slot], spawner: ThreadPoolExecutor, lib: str, temps: List[str],
           groups: Sequence[SlotGroup] = ()) -> None:
    for slot in slots:
        slot.kill()
    for group in groups:
        group.remove()
    spawner.shutdown(wait=False)
    for folder in (lib, *temps):
        shutil.rmtree(folder, ignore_errors=True)
