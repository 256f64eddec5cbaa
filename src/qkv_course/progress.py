"""``qkv progress``: run a student's notebooks and say which tests pass, as the autograder would.

Each notebook runs in a fresh kernel, cell after cell, on a copy in memory (the notebook is
never written; a conceptual question's first answer is recorded beside it in
``qkv_answers.json``, as running its cell in Jupyter would); a failing cell does not stop the ones after it, and a cell that runs too long is
interrupted. Then every graded cell is reported: pass or fail, its points, and a failure's
message in full. :func:`in_notebook` gives the same report from inside a running notebook.

Exit status: 0 when every autograded test passes, 1 when one does not, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import copy
import re
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, List, Mapping, Optional, Tuple

from .nbgrader.graded import (
    BY_HAND, ERROR, ERROR_ON_TIMEOUT, NOT_WRITTEN, PASS, TIMED_OUT, TIMEOUT, Outcome, Question,
    cell_outcome, is_graded, jupyter, nbgrader_meta, outcome_of_error, questions, read_notebook)
from .calls import DEFAULT, QUESTION, Call, check_calls
from .usage import UsageError

_WORDS = {PASS: "pass", BY_HAND: "by hand", TIMEOUT: "TIMEOUT", ERROR: "ERROR"}
_INDENT = " " * 11
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


def _other_failures(nb: Any) -> List[Tuple[str, Outcome]]:
    """Ungraded cells that failed: often why a test cell after them cannot find an answer."""
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or is_graded(cell):
            continue
        outcome = cell_outcome(cell)
        if outcome.status in (ERROR, TIMEOUT) and cell.get("outputs"):
            name = nbgrader_meta(cell).get("grade_id")
            found.append((f"cell {i + 1}" + (f" ({name})" if name else _first_line(cell)),
                          outcome))
    return found


def _first_line(cell: Any) -> str:
    """``, starting "x = causal_mask(4)"``: Jupyter and Colab number no cells, so a cell is
    told by its first line of code."""
    lines = [line.strip() for line in str(cell.get("source", "")).splitlines()]
    first = next((line for line in lines if line and not line.startswith("#")), "")
    if not first:
        return ""
    return f', starting "{first[:50]}{"..." if len(first) > 50 else ""}"'



def format_outcome(name: str, outcome: Outcome, score: str = "", note: str = "",
                   width: int = 0) -> str:
    """One reported line (status, name padded to ``width``, score), then a failure's message
    in full, indented."""
    status = _WORDS.get(outcome.status, outcome.status.upper())
    head = f"  {status:<8} {name:<{width}}" + (f"  {score}" if score else "")
    lines = [head.rstrip()]
    message = outcome.message if outcome.status != BY_HAND else ""
    if note:
        message = f"{message} {note}" if message else note
    lines += [_INDENT + line for line in message.splitlines()]
    return "\n".join(lines)


def format_notebook(path: Path, found: List[Question], others: List[Tuple[str, Outcome]],
                    timeout: int) -> str:
    """The report of one executed notebook: its assignment, every question, the totals."""
    lines = [f"{path.parent.name or path.stem}: {path}"]
    width = max([len(q.grade_id) for q in found] + [0])
    for q in found:
        if q.by_hand:
            unwritten = q.outcome.message == NOT_WRITTEN  # a written answer left blank
            lines.append(format_outcome(q.grade_id, q.outcome, (
                f"{q.points:g} points, not written yet (0 until you write it)" if unwritten
                else f"{q.points:g} points, graded by hand"), width=width))
        else:
            # A cell interrupted at its limit (a check's own time budget names its limit).
            note = (f"(limit: {timeout} s per cell)"
                    if q.outcome.status == TIMEOUT and q.outcome.message == TIMED_OUT else "")
            lines.append(format_outcome(q.grade_id, q.outcome, f"{q.earned:g}/{q.points:g}",
                                        note, width))
    if others:
        lines.append("  other cells that failed (a test after them may not find your answer):")
        lines += [format_outcome(name, outcome) for name, outcome in others]
    tests = [q for q in found if not q.by_hand]
    total = (f"  total: {sum(q.earned for q in tests):g}/{sum(q.points for q in tests):g} points "
             f"from the tests ({sum(q.outcome.status == PASS for q in tests)} of {len(tests)} "
             "pass)")
    by_hand = sum(q.points for q in found if q.by_hand)
    lines.append(total + (f"; {by_hand:g} more graded by hand" if by_hand else ""))
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- in a notebook


@dataclass
class Summary:
    """What :func:`in_notebook` found: ``(name, outcome)`` for every check it ran."""

    results: List[Tuple[str, Outcome]] = field(default_factory=list)

    @property
    def passed(self) -> List[str]:
        return [name for name, o in self.results if o.status == PASS]

    @property
    def failed(self) -> List[str]:
        return [name for name, o in self.results if o.status != PASS]

    @property
    def all_passed(self) -> bool:
        return bool(self.results) and not self.failed

    def __repr__(self) -> str:
        return f"<progress: {len(self.passed)} of {len(self.results)} checks pass>"


def in_notebook(namespace: Optional[Mapping[str, Any]] = None) -> Summary:
    """Check every answer defined in a running notebook, and print what passes.

    The checks are those the notebook's own test cells call, with the same arguments
    (``check_scaled_dot_product_attention(f, masks=False)``): read from the notebook's file
    when the kernel knows it (Jupyter's ``__session__``), else from the cells run so far
    (IPython's ``In``); an answer whose test cell is not found gets its check's defaults.
    Its questions (``check_question("id", variable)``) are judged too. Works where the
    notebook has no file on disk (Colab). Never raises: an interrupted check (the stop
    button, during an endless loop) ends the report early.

    Args:
        namespace: where the answers are defined (default: ``__main__``'s globals, which
            are the notebook's).

    Returns:
        a :class:`Summary` of the checks run (none when no answer is defined yet).
    """
    ns = vars(sys.modules["__main__"]) if namespace is None else namespace
    summary = Summary()
    try:
        from qkv.checks import grading
        from qkv.checks.harness import check_now
    except Exception as e:  # noqa: BLE001 (a report must not raise)
        print(f"qkv.checks cannot be imported: {type(e).__name__}: {e}")
        return summary
    for label, run in _planned(ns, grading, check_now):
        outcome, stop = _run(run)
        summary.results.append((label, outcome))
        print(format_outcome(label, outcome))
        if stop:
            break
    if not summary.results:
        print("no answers found: define them first (run their cells), then call this again")
    else:
        print(f"  {len(summary.passed)} of {len(summary.results)} checks pass")
    return summary


def checks_called(sources: Iterable[str]) -> List[Call]:
    """Each check the notebook's test cells call, once each, as ``qkv grade`` reads them.

    The seed is the check's business here (``in_notebook()`` runs the visible inputs), so
    calls differing only in their seed count once. A cell that is not a test cell qkv grade
    could read (an IPython magic, a cell the student is still writing, a computed argument)
    is passed over.
    """
    found: List[Call] = []
    for number, source in enumerate(sources, 1):
        try:
            calls = check_calls(source, str(number))
        except UsageError:
            continue
        for call in calls:
            call = replace(call, seed=DEFAULT)
            if call not in found:
                found.append(call)
    return found


def _sources(ns: Mapping[str, Any]) -> List[str]:
    """The notebook's code cells: from its file when the kernel knows it, else those run."""
    session = ns.get("__session__")
    if isinstance(session, str) and session.endswith(".ipynb") and Path(session).is_file():
        try:
            nb = read_notebook(Path(session))
            return [c.source for c in nb.cells if c.cell_type == "code"]
        except UsageError:
            pass
    history = ns.get("In")
    return [str(c) for c in history] if isinstance(history, list) else []


def _planned(ns: Mapping[str, Any], grading: Any, check_now: Callable[..., Any]
             ) -> List[Tuple[str, Callable[[], Any]]]:
    """``(label, run)`` for every check of an answer (or question) the notebook defines."""
    planned: List[Tuple[str, Callable[[], Any]]] = []
    calls = checks_called(_sources(ns))
    checked = set()
    for call in calls:
        check, name, options = call.check, call.answer, call.options
        if check == QUESTION:
            # The first answer recorded is what is graded, and only its test cell records one:
            # a report judges that answer, and never judges (nor gives away) one not recorded.
            name, variable = call.question, call.answer
            first = grading.recorded(name)
            if first is None:
                unset = variable not in ns or ns[variable] is None
                what = (f"not answered yet: set {variable}, then run its test cell" if unset
                        else f"not recorded yet: run the test cell with check_question({name!r}, "
                        f"{variable}), which records your first answer and grades it")
                planned.append((check + f"({name!r})", lambda q=name, w=what: grading.CheckResult(
                    q, False, None, what=w, kind="wrong")))
            else:
                planned.append((check + f"({name!r})",
                                lambda q=name, v=first: grading.question(q, v)))
            continue
        if check not in grading.CHECKS or name not in ns or _imported(ns[name]):
            continue
        label = name + ("" if not options else
                        "(" + ", ".join(f"{k}={v!r}" for k, v in options.items()) + ")")
        planned.append((label, lambda c=check, a=ns[name], o=options:
                        check_now(grading.CHECKS[c], a, 0, **o)))
        checked.add(name)
    for name, answer in list(ns.items()):  # answers whose test cell was not found
        check = f"check_{name}"
        if check in grading.CHECKS and name not in checked and not _imported(answer):
            planned.append((name, lambda c=check, a=answer: check_now(grading.CHECKS[c], a, 0)))
    return planned


def _imported(answer: Any) -> bool:
    """Whether ``answer`` came from qkv or torch (imported, so not the student's own)."""
    module = getattr(answer, "__module__", None) or ""
    return module.split(".")[0] in ("qkv", "torch")


def _run(run: Callable[[], Any]) -> Tuple[Outcome, bool]:
    """Run one check: its outcome, and whether the student interrupted it."""
    try:
        result = run()
    except KeyboardInterrupt:
        return Outcome(TIMEOUT, "interrupted (an endless loop?); the checks after it did not "
                       "run"), True
    except Exception as e:  # noqa: BLE001 (a bad option in a test cell, say: reported)
        return Outcome(ERROR, f"{type(e).__name__}: {e}"), False
    if result.passed:
        return Outcome(PASS, f"note: {result.notice}" if result.notice else ""), False
    return outcome_of_error("CheckFailed", result.message(), result), False
