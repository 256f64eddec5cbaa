"""The numbers a chapter glues into its text, recorded by the book build for the Colab copy.

A chapter's prose cites numbers its code computed (``glue("acc", ...)`` in a code cell,
``{glue:text}`acc:.2f``` in the text). The page gets them when the book is built; the Colab
copy (``qkv_course.generate.colab``) writes the same numbers into its Markdown, from a record the build
leaves next to the chapter: ``book/_glue/<chapter>.json``, committed with the chapter.

The build (``qkv_course.sphinx.notebooks``) writes a record only when the chapter's code has
changed since the record was made, or its glued names have: rebuilding an unchanged chapter
leaves the record alone, so timings do not churn. ``python -m qkv_course generate --check``
reads the records and never needs a build; it reports a chapter whose record is missing or was
made from other code.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Dict, Mapping, Optional

import jupytext

NOTE = ("Written by the book build (qkv_course.sphinx.notebooks) from the chapter's executed "
        "notebook, for its Colab copy; do not edit")


def record_path(md: Path) -> Path:
    """Where the record of a chapter ``book/NN-name.md`` lives: ``book/_glue/NN-name.json``."""
    return md.parent / "_glue" / f"{md.stem}.json"


def code_digest(md: Path) -> str:
    """A digest of the chapter's code cells: a record is valid for exactly this code."""
    nb = jupytext.reads(md.read_text(), fmt="md:myst")
    code = "\n\0\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
    return hashlib.sha256(code.encode()).hexdigest()[:16]


def read_record(md: Path) -> Optional[dict]:
    """The chapter's record (``{"code": digest, "values": {name: text/plain}}``), or None."""
    path = record_path(md)
    return json.loads(path.read_text()) if path.is_file() else None


def values_from_build(glue_json: Path) -> Dict[str, str]:
    """The ``text/plain`` of every value in myst-nb's ``<chapter>.glue.json``."""
    data = json.loads(glue_json.read_text())
    return {name: out.get("data", {}).get("text/plain", "") for name, out in sorted(data.items())}


def update_record(md: Path, values: Mapping[str, str]) -> bool:
    """Write the chapter's record unless it already holds these names for this code.

    Args:
        md: the chapter.
        values: each glued name's ``text/plain``, from this build.

    Returns:
        True when the record was written.
    """
    digest, old = code_digest(md), read_record(md)
    if old is not None and old.get("code") == digest and set(old.get("values", {})) == set(values):
        return False
    record = {"note": NOTE, "code": digest, "values": dict(sorted(values.items()))}
    path = record_path(md)
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return True


def problem(md: Path, names: set) -> Optional[str]:
    """Why the chapter's record cannot serve its text (None when it can).

    Args:
        md: the chapter.
        names: the glued names its text refers to.
    """
    if not names:
        return None
    record = read_record(md)
    rel = record_path(md).relative_to(md.parent.parent)
    fix = "build the book (make book), which rewrites it, and commit it"
    if record is None:
        return f"{rel} is missing: {fix}"
    if record.get("code") != code_digest(md):
        return f"{rel} was recorded from other code than {md.name} has now: {fix}"
    lacking = sorted(names - set(record.get("values", {})))
    if lacking:
        return f"{rel} has no value for {', '.join(lacking)}: {fix}"
    return None
