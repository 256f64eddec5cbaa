"""The book builds from the repository root with warnings as errors, as `make book` does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def built_book() -> Path:
    """Build the book once per test session (into _build/html, like `make book`)."""
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent)) or shutil.which("jupyter-book")
    if jb is None:
        pytest.fail("jupyter-book is not installed; run the tests with `make test`")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(
        [jb, "build", ".", "-W", "-n", "--keep-going"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, f"book build failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    return ROOT / "_build" / "html"


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        for ch in part.get("chapters", []):
            files.append(ch["file"])
            files.extend(s["file"] for s in ch.get("sections", []))
    return files


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
