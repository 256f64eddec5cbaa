"""Shared fixtures: the devices and dtypes every comparison runs on, and the built book."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]

CUDA = torch.cuda.is_available()

# `make test` runs the suite on two workers (pytest-xdist, --dist loadgroup). Tests that build
# or read the built book run on one of them, so that the book is built once and nothing
# reads book/_glue or _build while the build writes them; the other worker takes the rest.
BOOK_GROUP = {"test_book.py", "test_notebooks.py", "test_browser.py", "test_generated.py"}
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)  # one core each: two workers share the machine's two


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    for item in items:
        if item.path.name in BOOK_GROUP or "built_book" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("book"))

requires_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")


def devices() -> list[str]:
    """Every device available here: always the CPU, plus CUDA and MPS when present."""
    found = ["cpu"]
    if CUDA:
        found.append("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        found.append("mps")
    return found


@pytest.fixture(params=devices())
def device(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="session")
def built_book() -> Path:
    """Build the book once per test session (into _build/html, like `make book`).

    Shared by every test that looks at the built book (test_book, test_notebooks, test_browser).
    """
    # One build command for readers and tests: the Makefile's `book` target.
    if shutil.which("make") is None:
        pytest.fail("make is not installed; the book is built with `make book`")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(
        ["make", "--no-print-directory", "book"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, f"book build failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    return ROOT / "_build" / "html"


@pytest.fixture
def one_thread():
    """One torch thread for the test: the models are tiny, and on a shared machine extra threads
    only add contention."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
