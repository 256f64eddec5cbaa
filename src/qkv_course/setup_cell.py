"""The locked set-up cell every assignment notebook starts with.

It installs ``qkv`` from the course repository where it is missing (Colab, say) and does
nothing under the autograder (nbgrader sets ``NBGRADER_EXECUTION``), then imports what every
assignment uses. An assignment's ``:setup:`` cell holds only the lines it adds to this text.
"""

from __future__ import annotations

GRADE_ID = "setup"

_TEXT = '''# Set-up: run this cell first. Where the course package qkv is missing (Colab, say),
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
                           "qkv @ git+{url}"])
    importlib.invalidate_caches()
    import qkv

import math

import torch

import qkv.checks  # loaded before any answer runs

qkv.checks.warnings_to_stdout()  # the autograder fails a test cell that writes to stderr
'''


def setup_source(url: str, extra: str = "") -> str:
    """The set-up cell's source.

    Args:
        url: the repository address ``qkv`` is installed from (``config.repository_url``).
        extra: the assignment's own lines (say ``from torch import nn``), appended at the end.

    Returns:
        The cell's text, without leading or trailing blank lines.
    """
    return (_TEXT.replace("{url}", url) + extra).strip("\n")
