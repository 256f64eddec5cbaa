"""The Colab notebook of every chapter: ``book/NN-name.md`` -> ``book/NN-name.ipynb`` (a generator).

Chapters are written and edited as MyST Markdown notebooks (``book/*.md`` with a jupytext
header). The book's launch buttons (sphinx-book-theme) point Colab at the ``.ipynb`` with the
same name next to the ``.md`` when one exists in the repository, so every chapter has a paired
notebook, generated here and committed. The ``.md`` is the only source: never edit the
``.ipynb`` by hand; run ``python -m qkv_course generate`` after changing a chapter and commit both.

The generated notebook reads like the page (Colab renders no MyST):

- its Markdown is the chapter's, made plain by :mod:`qkv_course.render.plain_markdown`: listings
  inlined as code blocks, glued numbers written in from the build's record of them
  (:mod:`qkv_course.render.glued`; a missing or out-of-date record is an error naming the fix),
  admonitions quoted, no role, directive or target left;
- its code cells are the chapter's, without outputs; ``from myst_nb import glue`` becomes
  ``from qkv_course.render.glue import glue`` (no myst-nb or Sphinx needed to run it);
- one set-up cell (after the title) installs the release of ``qkv`` named by
  ``pyproject.toml``'s version, with the extras the chapter uses, when it is missing, and says
  what to do when the repository cannot be reached. It is not part of the ``.md``, so the book
  build never runs it; the build serves this notebook as the page's ``.ipynb`` download.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Dict, List

import jupytext
import nbformat

from ..config import ROOT, chapters, extras, is_myst_notebook, release_tag, repository_url
from ..render import glued
from ..render.plain_markdown import Context, MystError, glue_names, plain
from .setup_cell import chapter_setup

SETUP_TAG = "qkv-setup"
_MYST_GLUE = re.compile(r"^(\s*)from myst_nb import glue\b", re.M)
SHIM = "from qkv_course.render.glue import glue"


class ChapterError(ValueError):
    """A chapter cannot be made into its Colab copy (the message says why and what to do)."""


#: Said above the set-up cell: the text's numbers are the book's, the code's are the reader's.
BUILT_NUMBERS = ("*The numbers written in the text below were measured when the book was built; "
                 "the cells print what your own run measures, which may differ a little (timings "
                 "most of all).*")


def chapter_sources(root: Path = ROOT) -> List[Path]:
    """The ``.md`` of every chapter in ``_toc.yml`` that is a MyST notebook (one with code cells)."""
    return [page.source for page in chapters(root) if is_myst_notebook(page.source)]


def _plain_cells(nb: nbformat.NotebookNode, md: Path, root: Path) -> None:
    """Markdown made plain, glued numbers written in; code without outputs or myst_nb."""
    names = set().union(*(glue_names(c.source) for c in nb.cells if c.cell_type == "markdown"))
    trouble = glued.problem(md, names)
    if trouble:
        raise ChapterError(f"{md.name} glues numbers into its text, but {trouble}")
    record = glued.read_record(md) or {}
    ctx = Context(md, record.get("values", {}), root)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            try:
                cell.source = plain(cell.source, ctx)
            except MystError as error:
                raise ChapterError(str(error)) from None
        elif cell.cell_type == "code":
            cell.source = _MYST_GLUE.sub(lambda m: m.group(1) + SHIM, cell.source)
            cell.outputs = []
            cell.execution_count = None


def render(md: Path, url: str, root: Path = ROOT) -> str:
    """The ``.ipynb`` text for a chapter: plain Markdown, code without outputs, a set-up cell.

    Args:
        md: the chapter's MyST Markdown notebook.
        url: the repository address the set-up cell installs ``qkv`` from.
        root: the repository root (its ``pyproject.toml`` names the release installed).

    Returns:
        The notebook as nbformat 4 JSON, ending with a newline.

    Raises:
        ChapterError: the chapter's glued numbers have no up-to-date record, or it uses MyST
            that Colab cannot show and that has no plain form.
    """
    nb = jupytext.reads(md.read_text(), fmt="md:myst")
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    _plain_cells(nb, md, root)
    setup = nbformat.v4.new_code_cell(chapter_setup(code, url, release_tag(root), extras(root)),
                                      metadata={"tags": [SETUP_TAG]})
    first = nb.cells[0] if nb.cells else None
    at = 1 if first is not None and first.cell_type == "markdown" and first.source.startswith("# ") else 0
    nb.cells.insert(at, setup)
    nb.cells.insert(at + 1, nbformat.v4.new_markdown_cell(BUILT_NUMBERS))
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
    return {md.with_suffix(".ipynb"): render(md, url, root) for md in chapter_sources(root)}
