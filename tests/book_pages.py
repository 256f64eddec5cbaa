"""What the book publishes, read from ``_toc.yml`` and ``_config.yml`` (shared by the book tests).

A *page* is a docname as Sphinx sees it: a path from the repository root without its suffix,
e.g. ``book/intro`` or ``exercises/04-scaling/scaled_attention``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SYNC_COMMAND = "python scripts/sync_notebooks.py"


def config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def repository_url() -> str:
    """The repository address: set once, in ``_config.yml``."""
    return config()["repository"]["url"].rstrip("/")


@dataclass(frozen=True)
class Page:
    name: str  # docname, e.g. "book/01-bottleneck"
    parent: str | None  # the toc entry it is nested under (None at top level)

    @property
    def source(self) -> Path:
        for suffix in (".md", ".ipynb"):
            path = ROOT / (self.name + suffix)
            if path.is_file():
                return path
        raise FileNotFoundError(f"_toc.yml lists {self.name} but neither .md nor .ipynb exists")

    @property
    def html(self) -> str:
        """Path of the page inside _build/html."""
        return self.name + ".html"

    @property
    def is_notebook(self) -> bool:
        """True when the theme treats the page as a notebook (and gives it launch buttons)."""
        src = self.source
        if src.suffix == ".ipynb":
            return True
        text = src.read_text()
        if not text.startswith("---"):
            return False
        front = yaml.safe_load(text[3 : text.find("\n---", 3)]) or {}
        return isinstance(front, dict) and "kernelspec" in front

    @property
    def colab_target(self) -> str:
        """Repository path Colab opens: the page's .ipynb (a MyST chapter's paired notebook)."""
        return self.name + ".ipynb"

    @property
    def is_exercise(self) -> bool:
        return self.name.startswith("exercises/")


def _expand(pattern: str) -> list[str]:
    found = set()
    for suffix in (".md", ".ipynb"):
        for path in ROOT.glob(pattern + suffix):
            if ".ipynb_checkpoints" in path.parts:
                continue
            found.add(path.relative_to(ROOT).with_suffix("").as_posix())
    return sorted(found)


def _walk(entries: list, parent: str | None, out: list[Page]) -> None:
    for entry in entries or []:
        names = [entry["file"]] if "file" in entry else _expand(entry["glob"]) if "glob" in entry else []
        for name in names:
            out.append(Page(str(Path(name).with_suffix("")) if name.endswith((".md", ".ipynb")) else name, parent))
        # Sections nest under the entry's file (a glob entry cannot have sections).
        if "file" in entry:
            _walk(entry.get("sections", []), out[-1].name, out)


def toc_pages() -> list[Page]:
    """Every page in ``_toc.yml``, in reading order, globs expanded."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [Page(toc["root"], None)]
    _walk(toc.get("chapters", []), None, pages)
    for part in toc.get("parts", []) or []:
        _walk(part.get("chapters", []), None, pages)
    return pages


def student_notebooks() -> list[Path]:
    """The released exercise notebooks, ``exercises/<assignment>/*.ipynb``."""
    return sorted(p for p in ROOT.glob("exercises/*/*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def first_code_cell(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    for cell in cells:
        if cell["cell_type"] == "code":
            src = cell["source"]
            return "".join(src) if isinstance(src, list) else src
    return ""
