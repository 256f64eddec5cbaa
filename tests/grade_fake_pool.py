"""An in-process stand-in for the sandbox's ``Pool``, for tests of the trusted parent only.

It runs a submission's cells with ``exec`` in this very process (no isolation at all) and
speaks the sandbox's client API (``Pool`` -> ``submission(cells)`` -> ``call`` / ``value`` /
``cells`` / ``failed``), so the parent's planning, judging, result files, gradebook and shards
can be tested quickly and without bubblewrap. The attack tests use the real sandbox.
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List

from qkv.checks import grading


from qkv_course.grade.limits import Limits
from qkv_course.grade.results import CellOutcome, Missing, NotData, Raised


class _Submission:
    def __init__(self, cells: List[str]) -> None:
        self.ns: Dict[str, Any] = {"__name__": "__main__"}
        self.cells: List[CellOutcome] = []
        self.failed = None
        for i, source in enumerate(cells):
            if "os._exit(" in source:  # as the real sandbox says a process that died
                self.failed = f"the submission's process ended during cell {i}: exit status 3"
                return
            try:
                # (no redirect_stdout: sys.stdout is shared by the parent's threads)
                exec(compile(source, "<cell>", "exec"), self.ns)  # noqa: S102
                self.cells.append(CellOutcome(i))
            except BaseException as e:  # noqa: BLE001
                tb, line = e.__traceback__, None
                while tb is not None:  # the line in the cell, as the real worker finds it
                    line = tb.tb_lineno if tb.tb_frame.f_code.co_filename == "<cell>" else line
                    tb = tb.tb_next
                self.cells.append(CellOutcome(i, Raised(type(e).__name__, str(e), line)))

    def call(self, check: str, name: str, args: tuple, kwargs: dict, options: dict,
             timeout_s: float) -> Any:
        if name not in self.ns:  # as the real worker says it
            return grading.Raised("NameError", f"{name} is not written: the notebook defines "
                                               f"no {name!r}")
        try:
            return grading.run_student(check, self.ns[name], args, kwargs, **options)
        except Exception as e:  # noqa: BLE001
            return grading.Raised.of(e)

    def value(self, name: str, timeout_s: float) -> Any:
        if name not in self.ns:
            return Missing
        v = self.ns[name]
        return v if isinstance(v, (int, float, str, bool)) else NotData(type(v).__name__)


class Pool:
    """``Pool(jobs, unsafe=...)``: submissions run in this process, one after another."""


    #: The limits each submission with code was given, in order (not the empty ones that
    #: start the sandboxes early).
    seen: List[Limits] = []

    def __init__(self, jobs: int, limits: Any = None, unsafe: bool = False, **kwargs: Any) -> None:
        self.jobs = jobs
        self.limits = limits or Limits()
        self.shared = ""  # one process: nothing to share

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    @contextlib.contextmanager
    def submission(self, cells: List[str], limits: Any = None) -> Iterator[_Submission]:
        if cells:
            Pool.seen.append(limits or self.limits)
        yield _Submission(cells)


class SandboxUnavailable(Exception):
    pass
