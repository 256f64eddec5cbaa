"""One submission, run in its own child of a slot's zygote (:class:`Submission`, what
:meth:`.client.Pool.submission` returns): its cells run, then the grader's requests, each a
call or a variable read, answered with data only (see :mod:`.client` for the whole picture).

A submission that crashes, breaks the protocol or overruns a limit gets :class:`Failed` for
that request and every later one.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from .limits import Limits
from .protocol import ChannelClosed, Deadline, ProtocolError
from .results import CellOutcome, Failed, Missing, NotData, Raised
from .slot import Slot

if TYPE_CHECKING:
    from .client import Pool

#: Seconds the parent waits past a request's own limit for the worker's "timelimit" answer.
LATE_S = 5.0
#: The part of its limit a cell must have run, by the parent's clock, to count as interrupted
#: at its limit (the worker's alarm and this clock start a little apart).
TIMED = 0.9


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
            started = time.monotonic()
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
                took, started = time.monotonic() - started, time.monotonic()
                raised = _raised(header.get("raised"))
                # The worker says "TimeLimit"; this clock says whether the cell ran its limit
                # (a cell can raise a class of that name at once, for the time or the note).
                hit = raised is not None and raised.type == "TimeLimit" and \
                    took >= limits.cell_s * TIMED
                self.cells.append(CellOutcome(len(self.cells), raised, (
                    f"it ran past its limit of {limits.cell_s:g} s" if hit else None)))
                if hit:
                    self._extend(min(took, limits.cell_s))
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
        asked = time.monotonic()
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
                self._extend(min(timeout_s, time.monotonic() - asked))  # the time it took
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
