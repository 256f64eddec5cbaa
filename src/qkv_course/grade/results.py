"""What the grader gets back from a submission, besides plain data.

:class:`Raised` (its code raised), :class:`Failed` (no answer: crash, time-out, memory,
protocol violation), :class:`NotData` (a value that cannot cross), :data:`Missing` (a name the
notebook does not define) and :class:`CellOutcome` (one code cell ran to its end, or raised).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Raised:
    """The submission's code raised: the exception's type name, its message, the line in the cell."""

    type: str
    message: str
    line: Optional[int] = None


@dataclass(frozen=True)
class Failed:
    """No answer: the worker crashed, ran out of time or memory, or broke the protocol."""

    reason: str


@dataclass(frozen=True)
class NotData:
    """The value exists but is not data that may cross (a module, a function, an object...)."""

    type: str


class _MissingType:
    """The name is not defined in the submission's namespace."""

    _instance: Optional["_MissingType"] = None

    def __new__(cls) -> "_MissingType":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "Missing"

    def __bool__(self) -> bool:
        return False


Missing = _MissingType()


@dataclass(frozen=True)
class CellOutcome:
    """One code cell of the submission: ``raised`` is ``None`` when it ran to its end;
    ``time_limit`` the parent's own words when the cell ran for its whole limit and was
    interrupted there (the sandbox reports the interruption, but only the parent's clock
    says it happened: a submission can raise an exception of that name itself)."""

    index: int
    raised: Optional[Raised] = None
    time_limit: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.raised is None
