"""How a check's failure names what went wrong, and how to read that name back.

The harness writes these wordings; ``qkv progress`` and ``qkv report`` read them back from
notebook outputs (through :func:`mistake_named` and :func:`not_written`), so the format and
its parser live side by side here.
"""

from __future__ import annotations

import re
from typing import Optional

NOT_WRITTEN = "is not written yet (it raises NotImplementedError): replace the `raise` line"
_KNOWN_MISTAKE = "the result matches a known mistake: "
_RAISED_AS = re.compile(r", as '(?P<name>.+)' does$")


def known_mistake(name: str) -> str:
    """What a failure says when the result matches the known mistake ``name``."""
    return _KNOWN_MISTAKE + name


def raised_as(error_line: str, name: str) -> str:
    """What a failure says when the answer raised what the known mistake ``name`` raises."""
    return f"it raised {error_line}, as '{name}' does"


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
    if _KNOWN_MISTAKE in first:
        return first.split(_KNOWN_MISTAKE, 1)[1].strip() or None
    raised = _RAISED_AS.search(first)
    return raised.group("name") if raised else None


def not_written(message: str) -> bool:
    """Whether a check's failure message says the answer still raises NotImplementedError."""
    return NOT_WRITTEN in message
