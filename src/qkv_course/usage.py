"""Bad usage of a command: one clear line for the user, never a traceback.

Every ``qkv`` subcommand and ``python -m qkv_course generate`` raise :class:`UsageError` for
what they were given wrongly; :mod:`qkv_course.cli` prints it as one line and exits with 2.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Iterable


class UsageError(Exception):
    """A problem with what the command was given; shown as one line, without a traceback."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``" (did you mean 06-masking?)"`` for the known names closest to a mistyped one, else ``""``."""
    close = difflib.get_close_matches(name, sorted(set(known)), n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def require_folder(path: str, what: str) -> Path:
    """The folder a command was given as ``what`` (e.g. ``COURSE_DIR``); a ``UsageError`` otherwise."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{what} {folder} is a file, not a folder; give the folder that holds it")
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder")
    return folder
