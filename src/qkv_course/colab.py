"""The Colab notebook of every chapter: ``book/NN-name.md`` -> ``book/NN-name.ipynb`` (a generator).

Chapters are written and edited as MyST Markdown notebooks (``book/*.md`` with a jupytext
header). The book's launch buttons (sphinx-book-theme) point Colab at the ``.ipynb`` with the
same name next to the ``.md`` when one exists in the repository, so every chapter has a paired
notebook, generated here and committed. The ``.md`` is the only source: never edit the
``.ipynb`` by hand; run ``python -m qkv_course generate`` after changing a chapter and commit both.

The generated notebook is the chapter's cells without outputs, plus one set-up cell (after the
title) that installs ``qkv`` from the repository address in ``_config.yml`` when it is missing,
as on Colab. The set-up cell is not part of the ``.md``, so the book build never runs it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Dict, List

import jupytext
import nbformat

from .config import ROOT, chapters, is_myst_notebook, repository_url
from .setup_cell import chapter_setup

SETUP_TAG = "qkv-setup"


def chapter_sources(root: Path = ROOT) -> List[Path]:
    """The ``.md`` of every chapter in ``_toc.yml`` that is a MyST notebook (one with code cells)."""
    return [page.source for page in chapters(root) if is_myst_notebook(page.source)]


def render(md: Path, url: str) -> str:
    """The ``.ipynb`` text for a chapter: its cells, no outputs, a set-up cell, stable ids.

    Args:
        md: the chapter's MyST Markdown notebook.
        url: the repository address the set-up cell installs ``qkv`` from.

    Returns:
        The notebook as nbformat 4 JSON, ending with a newline.
    """
    nb = jupytext.reads(md.read_text(), fmt="md:myst")
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    setup = nbformat.v4.new_code_cell(chapter_setup(code, url), metadata={"tags": [SETUP_TAG]})
    first = nb.cells[0] if nb.cells else None
    at = 1 if first is not None and first.cell_type == "markdown" and first.source.startswith("# ") else 0
    nb.cells.insert(at, setup)
    # Stable ids (jupytext makes random ones), so regenerating an unchanged chapter changes nothing.
    seen: Dict[str, int] = {}
    for cell in nb.cells:
        digest = hashlib.sha1(f"{cell.cell_type}\n{cell.source}".encode()).hexdigest()[:8]
        seen[digest] = seen.get(digest, 0) + 1
        cell.id = digest if seen[digest] == 1 else f"{digest}-{seen[digest]}"
    nb.metadata.pop("jupytext", None)
    nb.metadata["colab"] = {"provenance": []}
    nbformat.validate(nb)
    return nbformat.writes(nb, version=4) + "\n"


def targets(root: Path = ROOT) -> Dict[Path, str]:
    """Every chapter's Colab notebook and the text it must hold (the generator's contract).

    Args:
        root: the repository root.

    Returns:
        ``book/NN-name.ipynb`` path -> its text, for every chapter that is a MyST notebook.
    """
    url = repository_url(root)
    return {md.with_suffix(".ipynb"): render(md, url) for md in chapter_sources(root)}
