#!/usr/bin/env python3
"""Write the Colab notebook of every chapter: ``book/NN-name.md`` -> ``book/NN-name.ipynb``.

Chapters are written and edited as MyST Markdown notebooks (``book/*.md`` with a jupytext
header). The book's launch buttons (sphinx-book-theme) point Colab at the ``.ipynb`` with the
same name next to the ``.md`` when one exists in the repository, so every chapter has a paired
notebook, generated here and committed. The ``.md`` is the only source: never edit the
``.ipynb`` by hand; run this script after changing a chapter and commit both files.

The generated notebook is the chapter's cells without outputs, plus one set-up cell (after the
title) that installs ``qkv`` from the repository address in ``_config.yml`` when it is missing,
as on Colab. The set-up cell is not part of the ``.md``, so the book build never runs it.

Usage (from the repository root)::

    python scripts/sync_notebooks.py          # write every book/*.ipynb that differs
    python scripts/sync_notebooks.py --check  # write nothing; exit 1 listing what differs

``tests/test_notebooks.py`` runs the same comparison and names this command when it fails.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

import jupytext
import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
COMMAND = "python scripts/sync_notebooks.py"
SETUP_TAG = "qkv-setup"


def repository_url(root: Path = ROOT) -> str:
    """The repository address, read from ``_config.yml`` (its only home)."""
    cfg = yaml.safe_load((root / "_config.yml").read_text())
    return cfg["repository"]["url"].rstrip("/")


def is_notebook_source(md: Path) -> bool:
    """True for a MyST Markdown notebook: a ``.md`` whose front matter has a kernelspec."""
    text = md.read_text()
    if not text.startswith("---"):
        return False
    end = text.find("\n---", 3)
    if end == -1:
        return False
    front = yaml.safe_load(text[3:end]) or {}
    return isinstance(front, dict) and "kernelspec" in front


def chapter_sources(root: Path = ROOT) -> list[Path]:
    """Every MyST notebook under ``book/`` (pages without code are not paired)."""
    return sorted(p for p in (root / "book").glob("*.md") if is_notebook_source(p))


def setup_source(code: str, url: str) -> str:
    """The set-up cell: install what the chapter imports that Colab lacks, when it is missing.

    ``code`` is the chapter's code cells. ``qkv`` comes from the repository (with the extras
    the code needs, so most chapters install quickly); ``myst_nb`` (for ``glue``) from PyPI.
    """
    extras = []
    if re.search(r"\bqkv\.pretrained\b|\bimport pretrained\b|^\s*(from|import) transformers\b", code, re.M):
        extras.append("pretrained")
    if "bertviz" in code:
        extras.append("viz")
    needed = {"qkv": f"qkv{'[' + ','.join(extras) + ']' if extras else ''} @ git+{url}"}
    if re.search(r"^\s*(from|import) myst_nb\b", code, re.M):
        needed["myst_nb"] = "myst-nb"
    lines = ",\n".join(f'    "{module}": "{requirement}"' for module, requirement in needed.items())
    return (
        "# Set-up: install what this notebook needs when it is missing (as on Colab), the\n"
        "# course package qkv from its repository. Where it is installed this does nothing.\n"
        "import importlib.util\n"
        "import subprocess\n"
        "import sys\n"
        "\n"
        "needed = {\n"
        f"{lines},\n"
        "}\n"
        "missing = [req for module, req in needed.items() if importlib.util.find_spec(module) is None]\n"
        "if missing:\n"
        '    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", *missing])'
    )


def render(md: Path, url: str) -> str:
    """The ``.ipynb`` text for chapter ``md``: its cells, no outputs, a set-up cell, stable ids."""
    text = md.read_text()
    nb = jupytext.reads(text, fmt="md:myst")
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    setup = nbformat.v4.new_code_cell(setup_source(code, url), metadata={"tags": [SETUP_TAG]})
    first = nb.cells[0] if nb.cells else None
    at = 1 if first is not None and first.cell_type == "markdown" and first.source.startswith("# ") else 0
    nb.cells.insert(at, setup)
    # Stable ids (jupytext makes random ones), so regenerating an unchanged chapter changes nothing.
    seen: dict[str, int] = {}
    for cell in nb.cells:
        digest = hashlib.sha1(f"{cell.cell_type}\n{cell.source}".encode()).hexdigest()[:8]
        seen[digest] = seen.get(digest, 0) + 1
        cell.id = digest if seen[digest] == 1 else f"{digest}-{seen[digest]}"
    nb.metadata.pop("jupytext", None)
    nb.metadata["colab"] = {"provenance": []}
    nbformat.validate(nb)
    return nbformat.writes(nb, version=4) + "\n"


def out_of_sync(root: Path = ROOT) -> list[str]:
    """Problems with the pairs, one line each; empty when every pair is in sync."""
    url = repository_url(root)
    problems = []
    sources = chapter_sources(root)
    for md in sources:
        ipynb = md.with_suffix(".ipynb")
        rel = ipynb.relative_to(root)
        if not ipynb.exists():
            problems.append(f"{rel} is missing")
        elif ipynb.read_text() != render(md, url):
            problems.append(f"{rel} differs from {md.relative_to(root)}")
    stems = {md.stem for md in sources}
    for ipynb in sorted((root / "book").glob("*.ipynb")):
        if ipynb.stem not in stems:
            problems.append(f"{ipynb.relative_to(root)} has no MyST notebook {ipynb.stem}.md beside it")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any pair differs")
    args = parser.parse_args(argv)
    if args.check:
        problems = out_of_sync()
        for line in problems:
            print(line)
        if problems:
            print(f"run `{COMMAND}` and commit the .ipynb files")
        return 1 if problems else 0
    url = repository_url()
    for md in chapter_sources():
        ipynb = md.with_suffix(".ipynb")
        text = render(md, url)
        if not ipynb.exists() or ipynb.read_text() != text:
            ipynb.write_text(text)
            print(f"wrote {ipynb.relative_to(ROOT)}")
    for ipynb in sorted(BOOK.glob("*.ipynb")):
        if not ipynb.with_suffix(".md").exists():
            print(f"warning: {ipynb.relative_to(ROOT)} has no .md beside it (delete it if the chapter is gone)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
