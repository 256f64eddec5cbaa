"""``warnings_to_stdout``: what the set-up cell of every exercise calls.

nbgrader scores a test cell that writes to stderr as failed; the set-up cell asks for
warnings (and, in a Jupyter kernel, stderr) to be shown on stdout instead. The checks
themselves install nothing: only this explicit call does.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings

__all__ = ["warnings_to_stdout"]

_ORIGINAL_SHOWWARNING = warnings.showwarning


def warnings_to_stdout() -> None:
    """Show warnings, and in a Jupyter kernel everything sent to stderr, as ordinary output.

    nbgrader scores a test cell that writes anything to stderr as failed, so a harmless
    warning, progress bar or debug print from a student's answer would cost its points,
    also when a test cell calls the answer outside a check. The set-up cell of every
    exercise calls this: warnings are written to stdout, and in a Jupyter kernel so are
    Python's ``sys.stderr`` and file descriptor 2 (``os.write(2, ...)``, C libraries),
    which the kernel would otherwise show as stderr. Everything still shows.
    """
    # The original's name, module and docstring are kept (functools.wraps): the capstone's
    # text is the standard library's docstrings, read from the modules as they are (see
    # qkv.text_data), and a hook that changed warnings' functions would change that text, and
    # every loss trained on it, in this process only (a grader's outside it would differ).
    @functools.wraps(_ORIGINAL_SHOWWARNING)
    def show(message, category, filename, lineno, file=None, line=None):
        text = warnings.formatwarning(message, category, filename, lineno, line)
        sys.stdout.write(text)

    warnings.showwarning = show
    if type(sys.stderr).__module__.split(".")[0] != "ipykernel":
        return  # a terminal or a test run: its stderr is not graded
    sys.stderr.flush()
    sys.stderr = sys.stdout
    try:
        os.dup2(1, 2)  # the kernel forwards fd 1 to the notebook as stdout
    except OSError:
        pass
