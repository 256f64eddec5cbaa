"""A job slot: one sandbox whose zygote forks a child per submission (the parent's side).

The parent talks to the zygote over a ``SOCK_SEQPACKET`` socket (JSON orders, see
:mod:`.zygote`) with a time limit on every answer; a zygote that does not answer in time, or
answers nonsense, or has exited, is a :class:`SlotBroken`: the slot kills the whole sandbox
and the pool starts a new one for the next submission.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from .limits import Limits
from .protocol import Caps, Channel
from .sandbox import SandboxUnavailable


class SlotBroken(Exception):
    """A slot's zygote stopped answering or answered nonsense: kill it and start a new one."""


class Slot:
    """One job slot: a sandbox whose zygote forks a child per submission.

    Args:
        start: ``start(ctl_fd) -> (Popen, log file)`` (the pool starts every slot from one
            long-lived thread, since ``--die-with-parent`` follows the thread that started bwrap).
        limits: the submissions' limits (also the time the sandbox may take to start).
        unsafe: the zygote runs without bwrap: ending the slot first asks it to end its
            descendants, since no namespace ends them.
    """

    def __init__(self, start: Callable[[int], Tuple["subprocess.Popen[bytes]", Any]],
                 limits: Limits, unsafe: bool = False) -> None:
        self._start = start
        self.limits = limits
        self.unsafe = unsafe
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.ctl: Optional[socket.socket] = None
        self.log: Any = None
        self.base = 0

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """Start the sandbox and wait until its zygote has imported everything."""
        self.kill()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc, self.log = self._start(theirs.fileno())
        finally:
            theirs.close()
        self.ctl = mine
        try:
            ready = self._answer(self.limits.start_s)
        except SlotBroken as e:
            detail = self.output()
            self.kill()
            raise SandboxUnavailable(f"the sandbox did not start ({e}): {detail}") from None
        if "error" in ready or not ready.get("ready"):
            self.kill()
            raise SandboxUnavailable(f"the sandbox's worker failed to start: "
                                     f"{str(ready.get('error'))[-2000:]}")
        self.base = int(ready["base"])

    def fork(self, limits: Limits) -> Tuple[int, Channel]:
        """A child for one submission: its pid in the sandbox and the parent's end of its socket."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._order({"op": "fork", "limits": limits.as_dict()}, [theirs.fileno()])
            answer = self._answer(10)
        finally:
            theirs.close()
        if type(answer.get("pid")) is not int:
            mine.close()
            raise SlotBroken(f"the zygote answered {str(answer)[:100]}")
        caps = Caps(total_bytes=limits.reply_mb << 20)
        return answer["pid"], Channel(mine, caps)

    def reset(self, pid: Optional[int], timeout_s: float = 30, grace_s: float = 0) -> str:
        """End everything the last submission started; how its child ended (``"running"``...)."""
        self._order({"op": "reset", "pid": pid, "grace_s": grace_s})
        answer = self._answer(timeout_s)
        status = answer.get("status")
        if not isinstance(status, str):
            raise SlotBroken("the zygote did not say how the submission ended")
        if answer.get("tainted"):  # the zygote changed under it, and has exited: start anew
            self.kill()
        return status

    def kill(self) -> None:
        """End the whole sandbox (bwrap's init dies with it, and the kernel ends the rest)."""
        if self.unsafe and self.alive and self.ctl is not None:
            try:
                self.reset(None, 5)
            except SlotBroken:
                pass
        if self.ctl is not None:
            self.ctl.close()
            self.ctl = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None

    def output(self) -> str:
        """The last lines bwrap and the zygote wrote (for error messages)."""
        if self.log is None:
            return ""
        self.log.seek(0, os.SEEK_END)
        self.log.seek(max(0, self.log.tell() - 2000))
        return self.log.read().decode(errors="replace").strip()

    def _order(self, order: Dict[str, Any], fds: Sequence[int] = ()) -> None:
        if self.ctl is None:
            raise SlotBroken("the sandbox is not running")
        try:
            self.ctl.settimeout(10)
            socket.send_fds(self.ctl, [json.dumps(order).encode()], list(fds))
        except OSError as e:
            raise SlotBroken(f"the zygote does not listen ({e})") from None

    def _answer(self, timeout_s: float) -> Dict[str, Any]:
        if self.ctl is None:
            raise SlotBroken("the sandbox is not running")
        end = time.monotonic() + timeout_s
        while True:  # poll in short steps, so that a sandbox that exits is seen at once
            self.ctl.settimeout(min(0.5, max(0.01, end - time.monotonic())))
            try:
                data = self.ctl.recv(1 << 16)
                break
            except socket.timeout:
                if self.proc is None or self.proc.poll() is not None:
                    raise SlotBroken("the sandbox exited") from None
                if time.monotonic() >= end:
                    raise SlotBroken(f"the zygote did not answer within {timeout_s:g} s") from None
            except OSError as e:
                raise SlotBroken(f"the zygote's socket failed ({e})") from None
        if not data:
            raise SlotBroken("the zygote is gone")
        try:
            answer = json.loads(data)
        except ValueError:
            raise SlotBroken("the zygote's answer is not JSON") from None
        if not isinstance(answer, dict):
            raise SlotBroken("the zygote's answer is not an object")
        return answer
