"""What a check found, as data: :class:`CheckResult`, and :class:`CheckFailed` that carries it.

Every tool reads the result object, never its text: the in-kernel checks raise
:class:`CheckFailed` with it and, in a Jupyter kernel, also put it in the cell's outputs as
data (:data:`MIME`, read back by :func:`results_in`: that is how ``qkv progress`` and
``qkv report`` read a notebook's results); :func:`qkv_course.progress.in_notebook` reads its
fields; ``qkv grade`` receives it from :func:`qkv.checks.grading.judge` and stores it as JSON
(:meth:`CheckResult.to_json`). :meth:`CheckResult.message` renders the text a student reads.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict, dataclass, fields
from typing import Any, Iterable, List, Optional

__all__ = ["CheckFailed", "CheckResult"]

#: The mimetype of a result in a notebook cell's outputs (with an empty text/plain, so a
#: notebook shows nothing for it).
MIME = "application/vnd.qkv.check-result+json"

#: What a failure whose answer still raises NotImplementedError says.
NOT_WRITTEN = "is not written yet (it raises NotImplementedError): replace the `raise` line"


def mistake_id(name: str) -> str:
    """A stable id for a known mistake, made from its name: ``"no scaling"`` -> ``"no-scaling"``.

    Args:
        name: the mistake's name in words.

    Returns:
        lower-case words joined by ``-`` (at most 60 characters).
    """
    words = re.findall(r"[a-z0-9]+", name.lower())
    return "-".join(words)[:60].rstrip("-")


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict on one answer.

    Attributes:
        exercise: the function or class checked, e.g. ``"softmax"``.
        passed: whether every input gave the reference's result.
        seed: the seed the inputs were drawn from (``None`` for a question).
        input: the failing input in words (``""`` when it passed).
        mistake_id: the known mistake's stable id (:func:`mistake_id`), ``""`` when none.
        mistake: the known mistake's name in words, ``""`` when none.
        hint: what to look at, ``""`` when there is nothing to add.
        what: what went wrong, in words (``""`` when it passed).
        notice: a forbidden call the answer made (``"you called torch.softmax; ..."``), ``""``
            when none. A notice teaches; it does not fail the check.
        kind: (default from ``passed``) ``"pass"``, ``"wrong"`` (a wrong result),
            ``"raised"`` (the answer raised), ``"not written"`` (NotImplementedError),
            ``"timeout"`` (slow, or never finished).
        note: a last line, e.g. how to draw the same random inputs again.
    """

    exercise: str
    passed: bool
    seed: Optional[int] = 0
    input: str = ""
    mistake_id: str = ""
    mistake: str = ""
    hint: str = ""
    what: str = ""
    notice: str = ""
    kind: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if not self.kind:  # by default: a pass, or a wrong result
            object.__setattr__(self, "kind", "pass" if self.passed else "wrong")

    def message(self) -> str:
        """The text a student reads: what failed on which input, the hint, the notice."""
        if self.passed:
            return f"{self.exercise}: pass" + (f"\nnote: {self.notice}" if self.notice else "")
        if self.kind == "not written" and not self.what:
            text = f"{self.exercise} {NOT_WRITTEN}"
        elif self.input:
            text = f"{self.exercise}: wrong on {self.input}: {self.what}"
        else:
            text = f"{self.exercise}: {self.what}"
        if self.hint:
            text += f"\nLook at: {self.hint}"
        if self.notice:
            text += f"\nnote: {self.notice}"
        if self.note:
            text += f"\n{self.note}"
        return text

    def to_json(self) -> str:
        """The result as one line of plain JSON (for files)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "CheckResult":
        """The result :meth:`to_json` wrote (unknown keys are ignored, for older readers).

        Raises:
            ValueError: the text is not a JSON object with ``exercise`` and ``passed``.
        """
        data: Any = json.loads(text)
        if not isinstance(data, dict) or "exercise" not in data or "passed" not in data:
            raise ValueError("a CheckResult is a JSON object with at least 'exercise' and "
                             f"'passed'; got {text[:80]!r}")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class CheckFailed(AssertionError):
    """A check's failure in the student's kernel; ``.result`` holds the :class:`CheckResult`.

    An ``AssertionError``, so nbgrader and pytest treat it as a failed test; its text is
    ``result.message()``.
    """

    def __init__(self, result: CheckResult) -> None:
        super().__init__(result.message())
        self.result = result


def show(result: CheckResult) -> None:
    """Put ``result`` in the running Jupyter cell's outputs as data (nothing elsewhere).

    Only when IPython is already running this code (a kernel): it is never imported here.
    """
    ipython = sys.modules.get("IPython")
    if ipython is None or getattr(ipython, "get_ipython", lambda: None)() is None:
        return
    try:
        from IPython.display import display
    except ImportError:  # pragma: no cover (IPython without its display module)
        return
    display({MIME: json.loads(result.to_json()), "text/plain": ""}, raw=True)


def results_in(outputs: Iterable[Any]) -> List[CheckResult]:
    """The results a notebook cell's outputs hold (see :func:`show`), in order.

    Args:
        outputs: the cell's ``outputs`` (nbformat dicts).
    """
    found = []
    for out in outputs:
        data = out.get("data", {}) if isinstance(out, dict) else {}
        value = data.get(MIME) if isinstance(data, dict) else None
        if value is None:
            continue
        try:
            found.append(CheckResult.from_json(value if isinstance(value, str)
                                               else json.dumps(value)))
        except (ValueError, TypeError):
            continue  # a hand-edited output: not a result
    return found
