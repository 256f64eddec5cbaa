"""A submitted file read as bytes, and those bytes as JSON: never through a link, never
past a size, never more containers than a notebook has; bytes that are not UTF-8 read as
U+FFFD and said. Also the questions' record beside it (``qkv_answers.json``), as untrusted as
the notebook. What the cells mean is :mod:`.submission`'s.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .records import answers_path

#: A notebook past this is refused before it is parsed (outputs never matter here): parsing
#: holds the interpreter's lock, so a file of short strings stalls every other grading
#: thread for seconds per 10 MiB and costs over ten times its size in memory. An honest
#: notebook is well under (the course's largest, with plots and a 60 MB output, is graded).
MAX_BYTES = 64 << 20
MAX_CELLS = 5000  # cells a notebook may have to be read
#: JSON objects and arrays a notebook may open (counted as its "{" and "[" before parsing, those
#: in strings too): parsed, each is a Python dict or list, and a file of empty ones ("[{},{},..."),
#: 3 bytes each, would take the trusted grader fifty times the file's size. A real notebook
#: opens a few per cell, and its code a few per line.
MAX_CONTAINERS = 1_000_000

class Unreadable(Exception):
    """The file is not a notebook this grader can read; the message says why, in one line."""


class NotRegular(OSError):
    """A submitted path that is not a regular file: a link, a FIFO, a device."""


def read_regular(path: Path, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of a regular file, never through a link.

    What a student hands in can be a symbolic link (a folder copied with ``cp -r`` or ``tar``
    keeps them) to a FIFO or ``/dev/stdin`` (reading would wait forever), ``/dev/zero``
    (memory without end) or a file of someone else's (the model solution, another student's
    notebook). So a path is opened without following a link and without blocking, and read
    only if it is a regular file.

    Raises:
        NotRegular: it is not a regular file.
        OSError: it cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise NotRegular(f"{path.name} is a link, not a file") from None
        raise
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegular(f"{path.name} is not a regular file")
        return f.read(limit + 1)


#: How a problem with the file's encoding starts (a flag for a person: :func:`load`).
NOT_UTF8 = "the notebook is not all UTF-8"


def _decoded(raw: bytes, problems: Optional[List[str]]) -> str:
    """The file's text: UTF-8, or (an editor that saved it as Latin-1, say) UTF-8 with each
    byte that is not replaced by U+FFFD, as a person reading it would see it; then the
    problem, with where, is appended to ``problems`` (None: such a file is :class:`Unreadable`)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        if problems is None:
            raise
        text = raw.decode("utf-8", errors="replace")
        bad = text.count("\ufffd") - raw.count("\ufffd".encode())
        before = raw[max(0, e.start - 40):e.start].decode("utf-8", errors="replace")
        before = (before.splitlines() or [""])[-1].strip()
        more = f", and {bad - 1:,} more" if bad > 1 else ""
        problems.append(
            f"{NOT_UTF8}: byte 0x{raw[e.start]:02x} at byte {e.start:,}, after "
            f"{before[-30:]!r}{more}, is not UTF-8; read with \ufffd in its place and graded: "
            "check the code around it (the student's editor saved it in another encoding: "
            "saved as UTF-8 and handed in again, it is graded as written)")
        return text


def load(path: Path, problems: Optional[List[str]] = None) -> Any:
    """The file's JSON, or :class:`Unreadable` (too large, not JSON, too many cells, not a
    regular file; not UTF-8 when ``problems`` is None, else read as :func:`_decoded` says)."""
    try:
        raw = read_regular(path, MAX_BYTES)
        if len(raw) > MAX_BYTES:
            size = max(len(raw), path.stat().st_size)
            raise Unreadable(f"the file is {size / (1 << 20):.0f} MiB, over the limit of "
                             f"{MAX_BYTES >> 20} MiB (clear its outputs: Edit > Clear Outputs "
                             "of All Cells, save, and hand it in again)")
        if raw.count(b"{") + raw.count(b"[") > MAX_CONTAINERS:
            raise Unreadable(f"the file opens over {MAX_CONTAINERS:,} JSON objects and lists; a "
                             "notebook of this course opens a few thousand (hand in the "
                             "released notebook, filled in, with its outputs cleared)")
        text = _decoded(raw, problems)
        data = json.loads(text)
        cells = data.get("cells") if isinstance(data, dict) else None
        if isinstance(cells, list) and len(cells) > MAX_CELLS:
            raise Unreadable(f"the notebook has over {MAX_CELLS:,} cells; a notebook of this "
                             "course has about a hundred (hand in the released notebook, filled in)")
    except NotRegular as e:
        raise Unreadable(f"not a notebook: {e} (hand in the notebook itself)") from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise Unreadable(f"not a notebook ({type(e).__name__}: {str(e)[:120]}): hand in the "
                         "notebook as Jupyter saves it (File > Save), not a copy edited or cut "
                         "short") from None
    # It becomes U+FFFD (see no_lone_surrogates).
    return no_lone_surrogates(data) if _SURROGATE.search(text) else data


_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE = re.compile("[\ud800-\udfff]")


def no_lone_surrogates(x: Any) -> Any:
    """``x`` (JSON data) with each lone surrogate in its strings as U+FFFD.

    JSON may escape one (``"\\ud800"``), and a student's code may raise an error or return a
    string holding one: no UTF-8 file can, so a record or autograded notebook holding one
    could not be written, nor a summary line printed, on every run, for the whole class."""
    if isinstance(x, str):
        return _LONE.sub("\ufffd", x)
    if isinstance(x, (list, tuple)):
        return type(x)(no_lone_surrogates(v) for v in x)
    if isinstance(x, dict):
        return {no_lone_surrogates(k): no_lone_surrogates(v) for k, v in x.items()}
    return x


#: The most of the questions' record (:func:`.records.answers_path`) that is read.
ANSWERS_BYTES = 64 << 10


def first_answers(folder: Path) -> Tuple[Dict[str, Any], str]:
    """The first answers a submission's record holds (question id -> a letter, a number, or a
    per-student question's dict): what the notebook tells students is graded. Data only, as
    untrusted as the notebook: anything that is not such a record is no record (each question
    is then judged on the notebook's answer).

    Returns:
        ``(answers, problem)``: ``problem`` is "" when the record is absent or read whole, and
        otherwise says what was wrong with it, for a person to look at (a flag, never a
        deduction: the record may have been broken by hand, or by a copy).
    """
    path = answers_path(folder)
    where = f"{path.name} (the questions' first answers)"
    try:
        raw = read_regular(path, ANSWERS_BYTES)
    except FileNotFoundError:
        return {}, ""
    except OSError as e:
        return {}, f"{where} could not be read ({e}): its questions were judged on the notebook"
    try:
        if len(raw) > ANSWERS_BYTES:
            raise ValueError(f"more than {ANSWERS_BYTES >> 10} KiB")
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object")
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        return {}, (f"{where} is not a record ({str(e)[:120]}): its questions were judged on "
                    "the notebook's answers")
    kept = {k: v for k, v in data.items() if isinstance(k, str)
            and (type(v) in (str, int, float) or (isinstance(v, dict) and "answer" in v))}
    dropped = sorted(str(k)[:40] for k in data if k not in kept)[:5]
    problem = (f"{where}: entries that are not answers were ignored ({', '.join(dropped)}): "
               "those questions were judged on the notebook's answers") if dropped else ""
    return no_lone_surrogates(kept), no_lone_surrogates(problem)
