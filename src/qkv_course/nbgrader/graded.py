"""Reading a graded notebook: its questions, and what each test cell's outputs say.

Shared by ``qkv progress`` (a student's notebook, executed here) and ``qkv report`` (the
notebooks ``nbgrader autograde`` wrote): both ask :func:`questions` for the graded cells of
an executed notebook and get, for each, an :class:`Outcome` scored the way nbgrader scores
it (a test cell passes when it raised nothing and wrote nothing to stderr).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple

from ..usage import UsageError

PASS, FAIL, TIMEOUT, ERROR, BY_HAND = "pass", "fail", "timeout", "error", "by hand"
UNNAMED = "unnamed failure"
NOT_WRITTEN = "not written yet"

# What a cell that ran out of time holds: the kernel's KeyboardInterrupt (nbclient interrupts
# it) and, from nbgrader or qkv progress, the CellTimeoutError put in by error_on_timeout.
TIMEOUT_ERRORS = ("CellTimeoutError", "KeyboardInterrupt")
ERROR_ON_TIMEOUT = {"ename": "CellTimeoutError", "evalue": "",
                    "traceback": ["CellTimeoutError: No reply from kernel before timeout"]}
TIMED_OUT = "the cell ran past its time limit and was interrupted (an endless loop?)"
NOT_RUN = "the cell did not run (the kernel stopped before it)"


@dataclass(frozen=True)
class Outcome:
    """What running a cell (or a check) came to.

    Args:
        status: ``pass``, ``fail`` (an AssertionError, or stderr output), ``timeout``,
            ``error`` (any other exception) or ``by hand``.
        message: the failure's full text (never shortened: a mistake's name ends a long line).
        mistake: the known mistake the check named, if any.
    """

    status: str
    message: str = ""
    mistake: Optional[str] = None

    @property
    def label(self) -> str:
        """How ``qkv report`` counts it: a mistake's name, or one of its kinds of failure."""
        if self.status == FAIL:
            return self.mistake or UNNAMED
        return self.status


@dataclass(frozen=True)
class Question:
    """One graded cell of a notebook and its outcome.

    Args:
        grade_id: nbgrader's name for the cell, e.g. ``test_causal_mask``.
        points: what it is worth.
        by_hand: graded by a person (a written answer, a task), not by the tests.
        outcome: for a test cell, what its outputs say.
    """

    grade_id: str
    points: float
    by_hand: bool
    outcome: Outcome

    @property
    def earned(self) -> float:
        """Points scored automatically: all of them for a pass, none otherwise."""
        return self.points if self.outcome.status == PASS else 0.0


def outcome_of_error(ename: str, evalue: str, result: Any = None) -> Outcome:
    """Classify an exception by its type's name, and by the check's result when there is one.

    Args:
        ename: the exception's class name, e.g. ``CheckFailed``.
        evalue: ``str(exception)``, the check's whole message.
        result: the :class:`qkv.checks.result.CheckResult` the check gave (a failing
            check's, read from the cell's outputs or from the exception), or ``None``.

    Returns:
        a timeout, a failure (naming the check's known mistake when there is one) or an error.
    """
    if ename in TIMEOUT_ERRORS:
        return Outcome(TIMEOUT, TIMED_OUT)
    if result is not None and not result.passed:
        if result.kind == "timeout":  # a call that ran past the check's limit
            return Outcome(TIMEOUT, result.message())
        mistake = result.mistake or (NOT_WRITTEN if result.kind == "not written" else None)
        return Outcome(FAIL, result.message(), mistake)
    if ename not in ("AssertionError", "CheckFailed"):
        return Outcome(ERROR, f"{ename}: {evalue}" if evalue else ename)
    return Outcome(FAIL, evalue or "AssertionError (with no message)")


def cell_outcome(cell: Any) -> Outcome:
    """What an executed code cell's outputs say, scored as nbgrader scores a test cell."""
    outputs = cell.get("outputs", [])
    errors = [o for o in outputs if o.get("output_type") == "error"]
    if any(o.get("ename") in TIMEOUT_ERRORS for o in errors):
        return Outcome(TIMEOUT, TIMED_OUT)
    if errors:
        failed = [r for r in _results(outputs) if not r.passed]
        return outcome_of_error(errors[0].get("ename", ""), errors[0].get("evalue", ""),
                                failed[-1] if failed else None)
    stderr = "".join(o.get("text", "") for o in outputs
                     if o.get("output_type") == "stream" and o.get("name") == "stderr")
    if stderr:
        return Outcome(FAIL, "the cell wrote to stderr, which the autograder scores as a "
                       "failure:\n" + stderr.rstrip())
    if cell.get("execution_count") is None and not outputs:
        return Outcome(ERROR, NOT_RUN)
    notices = [r.notice for r in _results(outputs) if r.notice]
    return Outcome(PASS, "\n".join(f"note: {n}" for n in dict.fromkeys(notices)))


def _results(outputs: List[Any]) -> list:
    """The checks' results a cell's outputs hold (see :func:`qkv.checks.result.show`)."""
    from qkv.checks.result import results_in  # imports torch

    return results_in(outputs)


def nbgrader_meta(cell: Any) -> dict:
    """A cell's nbgrader metadata, ``{}`` when it has none or it is not a dict (a hand-edited file)."""
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    found = meta.get("nbgrader") if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else {}


def is_graded(cell: Any) -> bool:
    """Whether nbgrader gives the cell points: a test, a written answer or a task."""
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade") or meta.get("task"))


def questions(nb: Any) -> List[Question]:
    """The graded cells of an executed notebook, in order, with their outcomes.

    Args:
        nb: a notebook (``nbformat.NotebookNode`` or the same structure in plain dicts).

    Returns:
        one :class:`Question` per graded cell; written answers and tasks are ``by_hand``.
    """
    found = []
    for cell in nb.get("cells", []):
        meta = nbgrader_meta(cell)
        if not is_graded(cell):
            continue
        by_hand = bool(meta.get("solution") or meta.get("task")) or cell.get("cell_type") != "code"
        outcome = Outcome(BY_HAND) if by_hand else cell_outcome(cell)
        if by_hand and meta.get("solution") and cell.get("cell_type") == "markdown" and \
                text(cell.get("source")).strip() in ("", "YOUR ANSWER HERE"):
            outcome = Outcome(BY_HAND, NOT_WRITTEN)  # scored 0 as it is, whoever grades it
        found.append(Question(meta.get("grade_id", "?"), float(meta.get("points", 0) or 0),
                              by_hand, outcome))
    return found


def text(source: Any) -> str:
    """A cell's source as one string (a list of lines, a string, or anything else: empty)."""
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    return ""


def jupyter(module: str) -> Any:
    """Import one of Jupyter's packages (lazily: ``qkv --help`` needs none of them).

    Raises:
        UsageError: it is not installed (the ``qkv`` package does not require it).
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(f"this needs Jupyter's {module.split('.')[0]}: "
                         "pip install nbclient ipykernel") from None


def read_notebook(path: Path) -> Any:
    """Read a notebook (version 4), or say in one line why the file is not one.

    Raises:
        UsageError: the file cannot be read or is not a notebook.
    """
    nbformat = jupyter("nbformat")
    try:
        return nbformat.read(str(path), as_version=4)
    except (OSError, ValueError, AttributeError, KeyError, TypeError, RecursionError,
            nbformat.ValidationError) as e:
        # nbformat raises NotJSONError (a ValueError) for text, jsonschema's ValidationError
        # (not a ValueError) when it cannot convert old JSON, and assorted errors for JSON
        # that is not a notebook.
        reason = str(e).splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(f"{path}: not a notebook ({reason[:200]})") from None


def notebooks_in(folder: Path) -> Iterator[Tuple[str, str, Path]]:
    """Every ``folder/<student>/<assignment>/*.ipynb`` (nbgrader's ``autograded/`` or
    ``submitted/`` tree), sorted, hidden folders (``.ipynb_checkpoints``) left out.

    Returns:
        ``(student, assignment, notebook path)`` triples.
    """
    for notebook in sorted(folder.glob("*/*/*.ipynb")):
        assignment_dir = notebook.parent
        student = assignment_dir.parent.name
        if not (student.startswith(".") or assignment_dir.name.startswith(".")):
            yield student, assignment_dir.name, notebook
