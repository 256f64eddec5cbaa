"""The grader's side: :class:`Pool` of sandboxed job slots, one :class:`Submission` at a time each.

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
import time
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from importlib.util import find_spec
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .cgroup import SlotGroup, slot_group
from .limits import Limits
from .protocol import ChannelClosed, Deadline, ProtocolError
from .results import CellOutcome, Failed, Missing, NotData, Raised
from .sandbox import (SandboxUnavailable, hidden_roots, make_library, probe, visible_paths,
                      zygote_command)
from .slot import Slot, SlotBroken

#: Seconds the parent waits past a request's own limit for the worker's "timelimit" answer.
LATE_S = 5.0
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


class Submission:
    """One submission, run in its own child of a slot's zygote; a context manager.

    Attributes:
        cells: one :class:`CellOutcome` per cell that finished (all of them unless ``failed``).
        failed: ``None``, or why the submission has no more answers (it crashed, ran out of
            time, memory or CPU, or broke the protocol); every later request returns
            ``Failed(failed)``.
    """

    def __init__(self, pool: Pool, slot: Slot, cells: List[str], limits: Limits) -> None:
        self._pool, self._slot, self.limits = pool, slot, limits
        self.cells: List[CellOutcome] = []
        self.failed: Optional[str] = None
        self._ids = 0
        self._done = False
        self._pid, self._channel = pool._fork(slot, limits)
        self._deadline = time.monotonic() + limits.wall_s
        # Each cell or call the worker interrupts gives the submission back the time it took,
        # up to wall_s more in all: one loop reached by two demonstration cells and a test
        # (three interrupts) must not eat the time of the tests after it.
        self._allowance = limits.wall_s
        cell_deadline = self._deadline
        try:
            self._channel.send({"op": "start", "cell_s": limits.cell_s}, cells, self._deadline)
            while True:
                # The worker interrupts a cell at cell_s; one that cannot be interrupted (its
                # code catches BaseException, or ignores the alarm) ends the submission a little
                # later, not when the whole budget is spent. The first cell also imports IPython.
                slack = LATE_S * (1 if self.cells else 2)
                cell_deadline = min(self._deadline, time.monotonic() + limits.cell_s + slack)
                header, _ = self._channel.recv(cell_deadline)
                if header.get("op") == "cells" and header.get("count") == len(cells) == len(
                        self.cells):
                    break
                if header.get("op") != "cell" or header.get("index") != len(self.cells) or \
                        len(self.cells) >= len(cells):
                    raise ProtocolError("expected the next cell's outcome")
                self.cells.append(CellOutcome(len(self.cells), _raised(header.get("raised"))))
                if self.cells[-1].raised is not None and self.cells[-1].raised.type == "TimeLimit":
                    self._extend(limits.cell_s)
        except ProtocolError as e:
            cell = f"cell {len(self.cells)}"
            if isinstance(e, Deadline) and cell_deadline < self._deadline:
                self._fail(e, cell, f"the cell's limit ({limits.cell_s:g} s, and it could not be "
                                    "interrupted)")
            else:
                self._fail(e, cell)

    def call(self, check: Any, name: str, args: Sequence[Any] = (),
             kwargs: Optional[Dict[str, Any]] = None, options: Optional[Dict[str, Any]] = None,
             timeout_s: Optional[float] = None) -> Any:
        """Call the submission's ``name`` through ``run_student(check, obj, args, kwargs, **options)``.

        Args:
            check: which check's grading rules apply (passed through, JSON data).
            name: the function or class in the submission's namespace.
            args, kwargs, options: data (tensors, numbers, strings, tuples, lists, dicts).
            timeout_s: this request's wall-clock limit (also bounded by ``limits.wall_s``).

        Returns:
            the value returned (tensors come back as plain CPU tensors), :class:`Raised` (the
            submission raised, ``NameError`` "not written" when ``name`` is missing),
            :class:`NotData` (it returned something that cannot cross) or :class:`Failed`.
        """
        return self._request({"op": "call", "check": check, "name": name},
                             (tuple(args), dict(kwargs or {}), dict(options or {})), timeout_s)

    def value(self, name: str, timeout_s: Optional[float] = None) -> Any:
        """The submission's variable ``name``: data, :data:`Missing`, :class:`NotData` or :class:`Failed`."""
        return self._request({"op": "value", "name": name}, None, timeout_s)

    def close(self) -> None:
        """End every process of the submission and give the slot back (idempotent)."""
        if self._done:
            return
        self._done = True
        if self.failed is None:
            try:
                self._channel.send({"op": "bye"}, None, time.monotonic() + 1)
            except ProtocolError:
                pass
        self._channel.close()
        self._status = self._pool._give_back(self._slot, self._pid, 0.2)

    def __enter__(self) -> "Submission":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- requests
    def _request(self, header: Dict[str, Any], value: Any, timeout_s: Optional[float]) -> Any:
        if self.failed is not None:
            return Failed(self.failed)
        if self._done:
            raise RuntimeError("this submission is closed")
        # The worker interrupts the call at timeout_s (and answers "timelimit"); the parent
        # waits a little longer, and ends the submission only if no answer comes even then.
        deadline = self._deadline if timeout_s is None else min(
            self._deadline, time.monotonic() + timeout_s + LATE_S)
        self._ids += 1
        try:
            limit = {} if timeout_s is None else {"limit_s": timeout_s}
            self._channel.send({**header, **limit, "id": self._ids}, value, deadline)
            reply, data = self._channel.recv(deadline)
            if reply.get("op") != "reply" or reply.get("id") != self._ids:
                raise ProtocolError("the reply does not answer the request")
            kind = reply.get("kind")
            if kind == "value":
                return data
            if kind == "timelimit" and timeout_s is not None:  # the submission goes on
                self._extend(timeout_s)
                return Failed(f"{header['op']} {str(header.get('name'))[:80]} did not finish "
                              f"within the request's limit ({timeout_s:g} s)")
            if kind == "raised":
                return _raised(reply.get("raised"))
            if kind == "missing" and header["op"] == "value":
                return Missing
            if kind == "notdata" and isinstance(reply.get("type"), str):
                return NotData(reply["type"][:200])
            raise ProtocolError(f"unknown reply kind {str(kind)[:40]!r}")
        except ProtocolError as e:
            what = f"{header['op']} {str(header.get('name'))[:80]}"
            if timeout_s is not None and isinstance(e, Deadline) and deadline < self._deadline:
                return Failed(self._fail(e, what, f"the request's limit ({timeout_s:g} s, and "
                                                  "it could not be interrupted)"))
            return Failed(self._fail(e, what))

    def _extend(self, seconds: float) -> None:
        """Move the submission's deadline ``seconds`` later, within what is left to give."""
        grant = max(0.0, min(seconds, self._allowance))
        self._allowance -= grant
        self._deadline += grant

    def _fail(self, error: ProtocolError, what: str, limit: Optional[str] = None) -> str:
        """Record why this submission has no more answers; end its processes now."""
        self._done = True
        self._channel.close()
        # a closed connection: the child is probably exiting; give it a moment to say how
        status = self._pool._give_back(self._slot, self._pid,
                                       0.5 if isinstance(error, ChannelClosed) else 0)
        if isinstance(error, Deadline):
            limit = limit or f"the submission's wall-clock limit ({self.limits.wall_s:g} s)"
            reason = f"{what} did not finish within {limit}"
        elif isinstance(error, ChannelClosed):
            reason = f"the submission's process ended during {what}: {_ended(status, self.limits)}"
        else:
            reason = f"the submission broke the grading protocol during {what}: {error}"
        self.failed = reason
        return reason


def _ended(status: str, limits: Limits) -> str:
    if status == "running":
        return "it closed its connection to the grader"
    if "SIGXCPU" in status:
        return f"{status} (its CPU-time limit of {limits.cpu_s:g} s)"
    if "SIGKILL" in status:
        return f"{status} (a CPU, memory or process limit, or it killed itself)"
    return status


def _raised(data: Any) -> Optional[Raised]:
    """A :class:`Raised` from hostile data (``None`` stays ``None``)."""
    if data is None:
        return None
    if not (isinstance(data, dict) and isinstance(data.get("type"), str)
            and isinstance(data.get("message"), str)
            and (data.get("line") is None or type(data.get("line")) is int)):
        raise ProtocolError("an exception's description is not (type, message, line)")
    return Raised(data["type"][:200], data["message"][:4000], data.get("line"))


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
