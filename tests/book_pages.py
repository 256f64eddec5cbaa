"""What the book publishes beyond its pages: the student notebooks and the Colab addresses.

A helper of the book's tests (test_notebooks.py, test_browser.py), not shipped: the pages
themselves come from :func:`qkv_course.config.toc_pages`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

from qkv_course.config import ROOT, config, repository_url


def student_notebooks(root: Path = ROOT) -> List[Path]:
    """The released exercise notebooks, ``exercises/<assignment>/*.ipynb``, sorted."""
    return sorted(p for p in root.glob("exercises/*/*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def first_code_cell(path: Path) -> str:
    """The source of a notebook's first code cell (empty when it has none)."""
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "code":
            src = cell["source"]
            return "".join(src) if isinstance(src, list) else src
    return ""


def colab_url(page_name: str, root: Path = ROOT) -> str:
    """The address the theme's Colab button opens for a page, built from ``_config.yml``.

    Args:
        page_name: the page's docname, e.g. ``book/01-bottleneck``.
        root: the repository root.

    Returns:
        ``<colab_url>/github/<org>/<repo>/blob/<branch>/<page_name>.ipynb``.
    """
    cfg = config(root)
    org_repo = repository_url(root).split("github.com/")[1]
    colab = cfg["launch_buttons"]["colab_url"].rstrip("/")
    branch = cfg["repository"].get("branch", "main")
    return f"{colab}/github/{org_repo}/blob/{branch}/{page_name}.ipynb"
