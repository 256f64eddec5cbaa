"""The one reader of ``_config.yml`` and ``_toc.yml``: the repository root, its address, its pages.

A *page* is a docname as Sphinx sees it: a path from the repository root without its suffix,
e.g. ``book/intro`` or ``exercises/04-scaling/scaling``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import yaml

# The tooling works on a checkout: src/qkv_course/config.py -> the repository root.
ROOT = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=None)
def _read_yaml(path: Path, mtime: float) -> dict:
    return yaml.safe_load(path.read_text()) or {}


def _load(name: str, root: Path) -> dict:
    path = root / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run the course's tools from a checkout of the repository")
    return _read_yaml(path, path.stat().st_mtime)


def config(root: Path = ROOT) -> dict:
    """``_config.yml`` as a dict."""
    return _load("_config.yml", root)


def repository_url(root: Path = ROOT) -> str:
    """The repository address: set once, in ``_config.yml`` (``repository: url:``)."""
    try:
        return str(config(root)["repository"]["url"]).rstrip("/")
    except (KeyError, TypeError):
        raise ValueError(f"{root / '_config.yml'} has no `repository: url:` entry") from None


@dataclass(frozen=True)
class Page:
    """One page of the book, as listed in ``_toc.yml``."""

    name: str  # docname, e.g. "book/01-bottleneck"
    parent: str | None  # the toc entry it is nested under (None at top level)
    root: Path = ROOT

    @property
    def source(self) -> Path:
        for suffix in (".md", ".ipynb"):
            path = self.root / (self.name + suffix)
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
        return src.suffix == ".ipynb" or is_myst_notebook(src)

    @property
    def colab_target(self) -> str:
        """Repository path Colab opens: the page's .ipynb (a MyST chapter's paired notebook)."""
        return self.name + ".ipynb"

    @property
    def is_exercise(self) -> bool:
        return self.name.startswith("exercises/")

    @property
    def is_chapter(self) -> bool:
        """A numbered chapter, ``book/NN-name``."""
        stem = Path(self.name).name
        return self.name.startswith("book/") and stem[:2].isdigit() and stem[2:3] == "-"


def front_matter(path: Path) -> dict:
    """The YAML front matter of a Markdown file (empty when it has none)."""
    text = path.read_text()
    if not text.startswith("---"):
        return {}
    end = text.find("\n---", 3)
    if end == -1:
        return {}
    front = yaml.safe_load(text[3:end]) or {}
    return front if isinstance(front, dict) else {}


def is_myst_notebook(path: Path) -> bool:
    """True for a MyST Markdown notebook: a ``.md`` whose front matter has a kernelspec."""
    return path.suffix == ".md" and "kernelspec" in front_matter(path)


def _expand(pattern: str, root: Path) -> list[str]:
    found = set()
    for suffix in (".md", ".ipynb"):
        for path in root.glob(pattern + suffix):
            if ".ipynb_checkpoints" not in path.parts:
                found.add(path.relative_to(root).with_suffix("").as_posix())
    return sorted(found)


def _walk(entries: list, parent: str | None, out: list[Page], root: Path) -> None:
    for entry in entries or []:
        if "file" in entry:
            name = entry["file"]
            for suffix in (".md", ".ipynb"):
                name = name[: -len(suffix)] if name.endswith(suffix) else name
            out.append(Page(name, parent, root))
            # Sections nest under the entry's file (a glob entry cannot have sections).
            _walk(entry.get("sections", []), name, out, root)
        elif "glob" in entry:
            out.extend(Page(name, parent, root) for name in _expand(entry["glob"], root))


def toc_pages(root: Path = ROOT) -> list[Page]:
    """Every page in ``_toc.yml``, in reading order, globs expanded."""
    toc = _load("_toc.yml", root)
    pages = [Page(toc["root"], None, root)]
    _walk(toc.get("chapters", []), None, pages, root)
    for part in toc.get("parts", []) or []:
        _walk(part.get("chapters", []), None, pages, root)
    return pages


def chapters(root: Path = ROOT) -> list[Page]:
    """The numbered chapters, in reading order."""
    return [page for page in toc_pages(root) if page.is_chapter]


def _project(root: Path) -> dict:
    import tomllib

    return tomllib.loads((root / "pyproject.toml").read_text())["project"]


def release_tag(root: Path = ROOT) -> str:
    """The tag of the release a chapter's Colab copy installs: ``v`` + pyproject's version.

    A release is made by setting ``version`` in ``pyproject.toml`` and regenerating
    (``python -m qkv_course generate``); publishing the book tags that commit ``v<version>``
    when the tag is missing (``.ci/release-tag.sh``, run by ``book.yml``). The exercises'
    set-up cells install the same release.
    """
    return f"v{_project(root)['version']}"


def extras(root: Path = ROOT) -> dict[str, list[str]]:
    """The optional dependencies of the ``qkv`` package (pyproject), extra -> requirements."""
    return dict(_project(root).get("optional-dependencies", {}))
