"""How to read back what a check's failure names: ``qkv progress`` and ``qkv report`` find
the known mistake (or an answer not written yet) in notebook outputs with
:func:`mistake_named` and :func:`not_written`."""

from __future__ import annotations

import re
from typing import Optional

NOT_WRITTEN = "is not written yet (it raises NotImplementedError): replace the `raise` line"
# The two ways the harness names a mistake: "...: the result matches
# a known mistake: <name>" and "...: it raised <error>, as '<name>' does". tests/test_report.py
# and tests/test_progress.py read real checks' messages back, so a new wording fails them.
KNOWN_MISTAKE = "the result matches a known mistake: "
_RAISED_AS = re.compile(r", as '(?P<name>.+)' does$")


# A call of the student's code that ran past the check's time budget (qkv.checks._budget):
# "<name>: your <name> took more than N s on <input> ...". qkv progress and report count it
# as a timeout, like a cell nbgrader interrupted.
_OVER_BUDGET = re.compile(r"^(?P<name>\w+): your (?P=name) took more than [\d.]+ s on ")


def over_budget(message: str) -> bool:
    """Whether a check's failure message says a call ran past the check's time budget."""
    return _OVER_BUDGET.match(message.strip()) is not None


def raised_as(error: str, mistake: str) -> str:
    """The harness's words for an error that a known mistake raises too."""
    return f"it raised {error}, as '{mistake}' does"


def mistake_named(message: str) -> Optional[str]:
    """The known mistake a check's failure message names, or ``None``.

    Args:
        message: the text of the ``AssertionError`` a check raised (its first line ends
            with the mistake's name; a ``Look at:`` line may follow).

    Returns:
        the mistake's name, e.g. ``"no scaling"``; ``None`` for any other failure.
    """
    lines = message.strip().splitlines()
    first = lines[0] if lines else ""
    if KNOWN_MISTAKE in first:
        return first.split(KNOWN_MISTAKE, 1)[1].strip() or None
    raised = _RAISED_AS.search(first)
    return raised.group("name") if raised else None


def not_written(message: str) -> bool:
    """Whether a check's failure message says the answer still raises NotImplementedError."""
    return NOT_WRITTEN in message
