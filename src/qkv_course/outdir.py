"""The ``--out`` folder of the instructors' commands: nothing a user made is lost, nothing half written.

Every command that writes into ``--out`` (``report``, ``gradescope``) does so
through here:

- :func:`prepare` checks the folder before any work is done (minutes of grading): it must
  be a folder or not exist yet, and be writable; and a file the command would replace must
  be one this command wrote and nobody changed since (recorded in :data:`MANIFEST`, with
  its SHA-256), unless the user passes ``--force``. Rerunning a command into the same
  folder just works; a user's own ``mistakes.csv``, or one they edited, is never replaced
  without being asked.
- :func:`atomic` writes each file under a temporary name and renames it into place when
  complete, so Ctrl-C or a full disk never leaves a truncated file under the real name.
- :func:`record` notes what was written, for the next run's :func:`prepare`.

``python -m qkv_course generate`` keeps the same kind of record of the files it writes into the
repository (:func:`record` and :func:`recorded`, with its own file name).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Dict, Iterator, Sequence

from .usage import UsageError

#: The list of files a command wrote into ``--out``, with their SHA-256.
MANIFEST = ".qkv-outputs.json"


def add_force_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--force`` option, the same for every command that writes into ``--out``."""
    parser.add_argument("--force", action="store_true",
                        help="replace files in --out that this command did not write (or that "
                             "were edited since)")


def prepare(out: Path, names: Sequence[str], force: bool = False) -> Path:
    """Check ``out`` before any work: create it, and refuse to replace a user's files.

    Args:
        out: the ``--out`` folder.
        names: the files the command will write into it.
        force: replace files even if this command did not write them.

    Returns:
        ``out`` (created by the first :func:`atomic` write into it).

    Raises:
        UsageError: ``out`` is a file, cannot be created or written, or holds one of
            ``names`` that is not this command's unchanged output (and ``force`` is false).
    """
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder; give a folder (created if needed)")
    # Nothing is created yet (a run refused later must leave no empty folder): the folder, or
    # the nearest existing one above it, must be a folder we may write into.
    above = next(p for p in (out, *out.absolute().parents) if p.exists())
    if not above.is_dir():
        raise UsageError(f"cannot write to --out {out}: {above} is a file; choose another folder")
    if not os.access(above, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write to --out {out}: permission denied on {above}; "
                         f"choose another folder")
    ours = recorded(out)
    theirs = [n for n in names if (out / n).exists()
              and not ((out / n).is_file() and ours.get(n) == digest(out / n))]
    if theirs and not force:
        raise UsageError(
            f"--out {out} already holds {', '.join(theirs)}, which this command did not write (or "
            f"which was changed since); move {'them' if len(theirs) > 1 else 'it'} away, choose "
            f"another --out, or pass --force to replace {'them' if len(theirs) > 1 else 'it'}"
        )
    return out


@contextlib.contextmanager
def atomic(path: Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it to ``path`` once the block completes.

    On any exception (Ctrl-C included) the temporary file is removed and ``path`` is left as
    it was: an output is either complete or absent, never half written.
    """
    tmp = path.with_name(f".{path.stem}.partial-{os.getpid()}{path.suffix}")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()  # only our own temporary file; after os.replace it is gone already


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic`)."""
    with atomic(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def record(out: Path, names: Sequence[str], manifest: str = MANIFEST) -> None:
    """Note in ``out/manifest`` that this command wrote ``names`` into ``out`` as they are now.

    Args:
        out: the folder the names are relative to.
        names: files just written (a name that no longer exists is forgotten: it was removed).
        manifest: the record's file name in ``out``.
    """
    ours = recorded(out, manifest)
    for n in names:
        if (out / n).is_file():
            ours[n] = digest(out / n)
        else:
            ours.pop(n, None)
    write_text(out / manifest, json.dumps(ours, indent=1, sort_keys=True) + "\n")


def recorded(out: Path, manifest: str = MANIFEST) -> Dict[str, str]:
    """The record ``out/manifest``: each file's name (relative to ``out``) and its SHA-256 as written."""
    try:
        data = json.loads((out / manifest).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: then no file counts as ours (the safe side)
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def digest(path: Path) -> str:
    """The SHA-256 of a file's bytes, as :func:`record` notes it."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
