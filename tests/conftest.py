"""Shared fixtures: the devices and dtypes every comparison runs on, and the built book."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]

CUDA = torch.cuda.is_available()

# The book builds in the background while the other tests run: the build is a subprocess
# (its notebooks run in their own kernels), so it takes one core and the tests the other.
# Tests that need the built book run last and wait for it; so do those that read what the
# build writes (book/_glue).
AFTER_THE_BOOK = {"test_book.py", "test_notebooks.py", "test_browser.py", "test_generated.py"}
_BUILD: dict = {}  # "proc": the background `make book`, "log": its output file
BUILD_LOG = ROOT / "_build" / "book-build.log"


def _needs_book(item: pytest.Item) -> bool:
    return "built_book" in getattr(item, "fixturenames", ())


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected what they do
def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    last = [i for i in items if _needs_book(i) or i.path.name in AFTER_THE_BOOK]
    if last:
        chosen = set(map(id, last))
        items[:] = [i for i in items if id(i) not in chosen] + last


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start `make book` now if any selected test needs the built book."""
    if session.config.option.collectonly or not any(map(_needs_book, session.items)):
        return
    if shutil.which("make") is None:
        return  # built_book fails with the reason
    _start_build()
    torch.set_num_threads(1)  # the other core is the build's


def _start_build() -> None:
    """Start the Makefile's `book` target (one build command for readers and tests)."""
    BUILD_LOG.parent.mkdir(exist_ok=True)
    log = open(BUILD_LOG, "w")  # a file, not a pipe: the build writes a lot
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    _BUILD["log"] = log
    _BUILD["proc"] = subprocess.Popen(["make", "--no-print-directory", "book"], cwd=ROOT,
                                      env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True)  # stopped as a group


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop a background build the session no longer needs (after -x, or Ctrl-C)."""
    proc = _BUILD.get("proc")
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # make, jupyter-book and the kernels
        proc.wait(timeout=60)


def _wait_for_build() -> None:
    """Wait for the background build (if one was started); fail with its log if it failed."""
    proc = _BUILD.get("proc")
    if proc is None:
        return
    code = proc.wait(timeout=900)
    _BUILD["log"].close()
    text = BUILD_LOG.read_text(errors="replace")
    assert code == 0, f"book build failed:\n{text[-8000:]}"


@pytest.fixture(scope="session")
def book_build_finished() -> None:
    """Wait until a background book build (if any) has finished writing book/_glue and _build."""
    _wait_for_build()


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
    """The book built once per test session (into _build/html, like `make book`).

    Shared by every test that looks at the built book (test_book, test_notebooks, test_browser).
    """
    if shutil.which("make") is None:
        pytest.fail("make is not installed; the book is built with `make book`")
    if "proc" not in _BUILD:  # asked for without being collected (getfixturevalue): build now
        _start_build()
    _wait_for_build()
    return ROOT / "_build" / "html"


@pytest.fixture
def one_thread():
    """One torch thread for the test: the models are tiny, and on a shared machine extra threads
    only add contention."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
