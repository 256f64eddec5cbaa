"""``in_notebook()``: the report of ``qkv progress`` from inside a running notebook (Jupyter,
Colab), its checks those the notebook's own test cells call (:func:`checks_called`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, List, Mapping, Optional, Tuple

from ..calls import DEFAULT, QUESTION, Call, check_calls
from ..nbgrader.graded import ERROR, PASS, TIMEOUT, Outcome, outcome_of_error, read_notebook
from ..usage import UsageError
from .report import format_outcome


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
