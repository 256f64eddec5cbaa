"""The book builds from the repository root with warnings as errors, as `make book` does.

The `built_book` fixture (one build per session) lives in conftest.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from book_pages import toc_pages

ROOT = Path(__file__).resolve().parents[1]


def toc_files() -> list[str]:
    # Every page, nested sections and `glob:` entries (exercises) included.
    return [page.name for page in toc_pages()]


@pytest.mark.slow
def test_book_builds_every_page_in_the_toc(built_book: Path):
    assert (built_book / "index.html").is_file()
    for f in toc_files():
        page = built_book / (str(Path(f).with_suffix("")) + ".html")
        assert page.is_file(), f"{f} in _toc.yml produced no page"
        html = page.read_text()
        assert "Traceback (most recent call last)" not in html, f"{f} shows a traceback"


def test_repository_address_is_in_config_once():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    url = cfg["repository"]["url"]
    assert url.startswith("https://github.com/")
    # Nothing else in the repository's own configuration spells the address out.
    for name in ("README.md", "pyproject.toml", "Makefile"):
        assert url not in (ROOT / name).read_text(), f"{name} repeats the repository address"
