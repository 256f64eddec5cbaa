"""``qkv progress``: run a student's notebooks and say which tests pass, as the autograder would.

Each notebook runs in a fresh kernel, cell after cell, on a copy in memory (the notebook is
never written; a conceptual question's first answer is recorded beside it in
``qkv_answers.json``, as running its cell in Jupyter would); a failing cell does not stop the ones after it, and a cell that runs too long is
interrupted. Then every graded cell is reported: pass or fail, its points, and a failure's
message in full. :func:`.notebook.in_notebook` gives the same report from inside a running notebook.

Exit status: 0 when every autograded test passes, 1 when one does not, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import copy
import re
import subprocess
from pathlib import Path
from typing import Any, Iterable, List, Optional, Tuple

from ..nbgrader.graded import ERROR_ON_TIMEOUT, PASS, is_graded, jupyter, questions, read_notebook
from ..usage import UsageError
from .report import _other_failures, format_notebook

# Folders never searched for notebooks: hidden ones (.venv, .ipynb_checkpoints, .git), and
# installed packages, which may ship nbgrader notebooks of their own.
_SKIP = ("node_modules", "site-packages", "_build")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``qkv progress``."""
    parser.add_argument("paths", nargs="*", default=["."], metavar="NOTEBOOK_OR_FOLDER",
                        help="assignment notebooks, or folders searched for them (default: .)")
    parser.add_argument("--timeout", type=int, default=60, metavar="SECONDS",
                        help="how long one cell may run before it is interrupted (default 60)")
    parser.add_argument("--kernel", default="python3",
                        help="the Jupyter kernel to run them in (default python3: this Python)")


def run(args: argparse.Namespace) -> int:
    """Run and report every notebook named; 0 if all autograded tests pass, else 1."""
    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive whole number of seconds")
    unread: List[Path] = []
    notebooks = find_notebooks([Path(p) for p in args.paths], unread)
    all_pass = not unread  # a notebook that cannot be read cannot be graded either
    for path, nb in notebooks:
        executed = execute(nb, path.parent, args.timeout, args.kernel)
        found = questions(executed)
        print(format_notebook(path, found, _other_failures(executed), args.timeout))
        all_pass &= all(q.outcome.status == PASS for q in found if not q.by_hand)
    return 0 if all_pass else 1


def find_notebooks(paths: Iterable[Path],
                   unread: Optional[List[Path]] = None) -> List[Tuple[Path, Any]]:
    """The assignment notebooks (those with graded cells) among ``paths``, read.

    Args:
        paths: notebooks, or folders searched (recursively) for notebooks.
        unread: where a folder's notebooks that cannot be read are appended (each is said,
            with how to fix it).

    Returns:
        ``(path, notebook)`` pairs, in the order given (a folder's sorted).

    Raises:
        UsageError: a path does not exist, a file is not a notebook or has no graded cell,
            or a folder holds no assignment notebook.
    """
    found: List[Tuple[Path, Any]] = []
    for path in paths:
        if not path.exists():
            raise UsageError(f"{path}: no such file or folder")
        if path.is_file():
            nb = read_notebook(path)
            if not any(is_graded(c) for c in nb.cells):
                raise UsageError(f"{path}: no graded cells (not an assignment notebook)")
            found.append((path, nb))
            continue
        inside = [p for p in sorted(path.rglob("*.ipynb")) if not _skipped(p.relative_to(path))]
        # Jupyter's copies ("scaling-Copy1.ipynb", a download's "scaling (1).ipynb") share the
        # folder's record of first answers: run first, a copy would record its answers as the
        # student's. They are run only when named.
        copies = [p for p in inside if _copy_of(p) in inside]
        for p in copies:
            print(f"{p}: skipped, a copy of {_copy_of(p).name} (name it to run it)")
        inside = [p for p in inside if p not in copies]
        bad: List[Path] = []
        graded = [(p, nb) for p in inside for nb in [_read_quietly(p, bad)]
                  if nb is not None and any(is_graded(c) for c in nb.cells)]
        if unread is not None:
            unread += bad
        if not graded:
            raise UsageError(f"{path}: no assignment notebooks (with graded cells) in this folder"
                             + (f" that can be read ({len(bad)} cannot: above)" if bad else ""))
        found.extend(graded)
    return found


_COPY = re.compile(r"^(?P<name>.+?)(?:-Copy\d+| \(\d+\))$")


def _copy_of(path: Path) -> Optional[Path]:
    """The notebook ``path`` is a copy of, by Jupyter's and browsers' naming, or None."""
    found = _COPY.match(path.stem)
    return path.with_name(found.group("name") + path.suffix) if found else None


def _skipped(relative: Path) -> bool:
    return any(part.startswith(".") or part in _SKIP for part in relative.parts[:-1])


def _read_quietly(path: Path, bad: List[Path]) -> Any:
    """The notebook, or None; one that cannot be read is said (it may be the student's
    assignment: the grader cannot read it either) and appended to ``bad``."""
    try:
        return read_notebook(path)
    except UsageError as e:
        if "codec" in str(e):  # the grader reads it with U+FFFD for those bytes, and flags it
            said = ("NOT RUN: it is not all UTF-8 (the grader would read it with those bytes "
                    "replaced, and flag it for a person to check)")
            fix = ("save it as UTF-8 in the editor that last saved it, or with `iconv -f "
                   "latin1 -t utf-8`")
        else:
            said = "NOT RUN, and the grader cannot read it as it is either"
            fix = ("open it in Jupyter and save it; if Jupyter cannot open it either, go back "
                   "to your last good copy (File > Revert Notebook to Checkpoint, or "
                   ".ipynb_checkpoints/)")
        print(f"{e}: {said} (if it is your assignment): {fix}; then run `qkv progress` again")
        bad.append(path)
        return None


def execute(nb: Any, folder: Path, timeout: int, kernel: str) -> Any:
    """Run a copy of ``nb`` in a fresh kernel, every cell, errors and timeouts allowed.

    Args:
        nb: the notebook (left unchanged).
        folder: the working folder of the kernel (the notebook's own, for relative paths).
        timeout: seconds one cell may run before the kernel is interrupted.
        kernel: the kernel's name.

    Returns:
        the executed copy. If the kernel dies, the cells after that point stay unrun.

    Raises:
        UsageError: the kernel cannot be started.
    """
    NoSuchKernel = jupyter("jupyter_client.kernelspec").NoSuchKernel
    NotebookClient = jupyter("nbclient").NotebookClient
    DeadKernelError = jupyter("nbclient.exceptions").DeadKernelError
    copy_ = copy.deepcopy(nb)
    client = NotebookClient(copy_, timeout=timeout, allow_errors=True, interrupt_on_timeout=True,
                            error_on_timeout=ERROR_ON_TIMEOUT, kernel_name=kernel,
                            resources={"metadata": {"path": str(folder)}})
    try:
        # The kernel's own stderr is only its start-up chatter (a student's output comes back
        # through the notebook's outputs), so it is dropped.
        client.execute(stderr=subprocess.DEVNULL)
    except NoSuchKernel:
        raise UsageError(f"no Jupyter kernel named {kernel!r} (see `jupyter kernelspec list`)"
                         ) from None
    except DeadKernelError:
        pass  # the cells that did not run are reported as such
    return copy_
