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
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent)) or shutil.which("jupyter-book")
    if jb is None:
        pytest.fail("jupyter-book is not installed; run the tests with `make test`")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    # As `make book`: with MPLBACKEND=Agg (exported by the Makefile) plt.show() draws nothing.
    env.pop("MPLBACKEND", None)
    proc = subprocess.run(
        [jb, "build", ".", "-W", "-n", "--keep-going"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, f"book build failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    return ROOT / "_build" / "html"
