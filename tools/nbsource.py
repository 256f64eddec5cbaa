"""Small helpers to write nbgrader source notebooks (``solutions/<assignment>/*.ipynb``).

A generator script builds the notebook from these cells once; after that the notebook
is the source of truth (edit it in Jupyter or rerun the script, not both). Cell
metadata follows nbgrader's schema 3: answer cells are ``solution``, test cells are
``grade`` with ``points`` and ``locked``, the set-up cell is ``locked`` (nbgrader
restores it when grading). Outputs are never written.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]


def repository_url() -> str:
    """The repository address, read from ``_config.yml`` (its only home)."""
    text = (ROOT / "_config.yml").read_text()
    match = re.search(r"^repository:\s*\n\s+url:\s*(\S+)", text, re.MULTILINE)
    if not match:
        raise ValueError("_config.yml has no repository: url:")
    return match.group(1)


def _nbgrader(grade_id: str, *, grade=False, solution=False, locked=False, points=None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def markdown(source: str):
    """A teaching cell (students may edit it; nothing is graded)."""
    return nbformat.v4.new_markdown_cell(source.strip("\n"))


def code(source: str):
    """An ordinary code cell (a demonstration)."""
    return nbformat.v4.new_code_cell(source.strip("\n"))


def setup(grade_id: str = "setup", extra: str = ""):
    """The locked set-up cell every student notebook starts with."""
    source = f'''# Set-up: run this cell first. Where the course package qkv is missing (Colab, say),
# it is installed from the course repository; under the autograder it does nothing.
import importlib
import os
import subprocess
import sys

try:
    import qkv
except ImportError:
    if os.environ.get("NBGRADER_EXECUTION"):
        raise  # the grading environment must have qkv installed already
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet",
                           "qkv @ git+{repository_url()}"])
    importlib.invalidate_caches()
    import qkv

import math

import torch

import qkv.checks  # loaded before any answer runs

qkv.checks.warnings_to_stdout()  # the autograder fails a test cell that writes to stderr
{extra}'''
    cell = nbformat.v4.new_code_cell(source.strip("\n"))
    cell.metadata.update(_nbgrader(grade_id, locked=True))
    return cell


def answer(grade_id: str, source: str):
    """An answer cell: code between ``### BEGIN SOLUTION`` / ``### END SOLUTION`` is removed."""
    cell = nbformat.v4.new_code_cell(source.strip("\n"))
    cell.metadata.update(_nbgrader(grade_id, solution=True))
    return cell


def tests(grade_id: str, points: float, source: str):
    """A locked, graded test cell; ``### BEGIN HIDDEN TESTS`` blocks are removed for students."""
    cell = nbformat.v4.new_code_cell(source.strip("\n"))
    cell.metadata.update(_nbgrader(grade_id, grade=True, locked=True, points=points))
    return cell


def write(path: Path, cells: list) -> None:
    """Write the notebook with stable cell ids (so regenerating it changes nothing)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python",
                                  "name": "python3"},
                   "language_info": {"name": "python"}}
    for i, cell in enumerate(cells):
        cell.id = cell.metadata.get("nbgrader", {}).get("grade_id", f"cell-{i}")
    nb.cells = cells
    nbformat.validate(nb)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
