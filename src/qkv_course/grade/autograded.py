"""The autograded notebook of one submission, ``autograded/<student>/<assignment>/<notebook>.ipynb``,
as ``nbgrader autograde`` writes it, made from its result file (:mod:`.records`) for
:mod:`.gradebook`: the release's cells, the student's answer cells and written answers (and
any markdown they wrote or added, as text), the cells the student added, and the instructor's
test cells (hidden tests included) with each failing test's message as its error output
(``AssertionError``); and what a person grades in it (:func:`answer_texts`).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Tuple

from ..nbgrader.graded import ERROR_ON_TIMEOUT, nbgrader_meta
from .judge import PASS, TIMEOUT
from .plan import Plan, text

WAITS = ("qkv grade judges only the checks' calls: this test cell calls none, so a person "
         "grades it in formgrader")


def _error_output(status: str, message: str) -> Dict[str, Any]:
    if status == TIMEOUT:
        return {"output_type": "error", **ERROR_ON_TIMEOUT, "evalue": message,
                "traceback": [f"CellTimeoutError: {message}"]}
    return {"output_type": "error", "ename": "AssertionError", "evalue": message,
            "traceback": ["AssertionError: " + line if i == 0 else line
                          for i, line in enumerate(message.splitlines() or [""])]}


def _result_outputs(test: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The failing check's result as data, where ``qkv progress`` and ``qkv report`` read it
    in a kernel's outputs (:func:`qkv.checks.result.show`)."""
    from qkv.checks.result import MIME

    failed = [c for c in test.get("calls", []) if "exercise" in c and not c.get("passed")]
    if not failed:
        return []
    fields = {k: v for k, v in failed[-1].items() if k not in ("call",)}
    return [{"output_type": "display_data", "metadata": {},
             "data": {MIME: fields, "text/plain": ""}}]


def _unfinished(cells: List[Dict[str, Any]]) -> List[Tuple[Any, str, str]]:
    """The cells of the run that the sandbox interrupted at their time limit: ``(where, name,
    how it was told)``, ``where`` the cell id or grade id it is or (a cell the student added)
    follows, ``None`` above every cell of the release (the instructor's cells are labelled
    ``instructor:<id>``)."""
    found = []
    for c in cells:
        if not c.get("time_limit"):
            continue
        if c["cell"] == "added":
            where = c.get("after")
            name = "a cell the student added" + (f" below {where}" if where else "")
        else:
            where = name = c["cell"].split(":", 1)[-1]
        found.append((where, name, c["time_limit"]))
    return found


def _waits(unfinished: List[Tuple[Any, str, str]], above: set) -> str:
    """What a hand-graded test cell says: a person grades it; and which cells above it did not
    finish in the sandbox (their results, a training run say, are not in this run)."""
    late = [f"{name} ({told})" for where, name, told in unfinished
            if where is None or where in above]
    if not late:
        return WAITS + "\n"
    return (WAITS + ". In qkv grade's sandbox these cells above it did not finish, so what they "
            "compute is missing from this run: " + "; ".join(late) + "\n")


def autograded_notebook(plan: Plan, record: Dict[str, Any]) -> Dict[str, Any]:
    """The autograded notebook of one submission, as plain JSON (nbformat 4.5)."""
    tests = {t["grade_id"]: t for t in record.get("tests", [])}
    sources = {nbgrader_meta(c).get("grade_id"): text(c.get("source"))
               for c in plan.source.get("cells", []) if isinstance(c, dict)}
    answers, written = record.get("answers", {}), record.get("written", {})
    edited = record.get("edited", {})
    added: Dict[Any, List[Tuple[str, str, Any]]] = {}
    for anchor, source in record.get("added", []):
        added.setdefault(anchor, []).append(("code", source, None))
    for anchor, source, pasted in record.get("notes", []):
        added.setdefault(anchor, []).append(("markdown", source, pasted))
    cells: List[Dict[str, Any]] = []
    unfinished, seen = _unfinished(record.get("cells", [])), set()

    def add_student_cells(anchor: Any) -> None:
        for kind, source, pasted in added.pop(anchor, []):
            cell = {"cell_type": kind, "id": f"added-{len(cells)}", "metadata": {},
                    "source": source}
            if kind == "code":
                cell.update(execution_count=len(cells) + 1, outputs=[])
            elif pasted:
                cell["attachments"] = pasted
            cells.append(cell)

    add_student_cells(None)
    for original in plan.skeleton.get("cells", []):
        cell = copy.deepcopy(original)
        meta = nbgrader_meta(cell)
        gid = meta.get("grade_id")
        cell["metadata"] = {"nbgrader": meta} if meta else {}
        cell["source"] = text(cell.get("source"))  # one string, as nbgrader's checksums read it
        if cell.get("cell_type") == "code":  # numbered as run (qkv report: a test that ran)
            cell["outputs"], cell["execution_count"] = [], len(cells) + 1
        if gid in answers:
            cell["source"] = answers[gid]
        elif gid in written:
            cell["source"] = written[gid]
        elif cell.get("cell_type") == "markdown" and cell.get("id") in edited:
            # The student's text below a task, say, with the images pasted into it.
            cell["source"], pasted = edited[cell["id"]]
            if pasted:
                cell["attachments"] = pasted
        elif gid in tests or gid in plan.manual_tests:
            cell["source"] = sources.get(gid, text(cell.get("source")))
            result = tests.get(gid)
            if result is None:
                cell["outputs"] = [{"output_type": "stream", "name": "stdout",
                                    "text": _waits(unfinished, seen)}]
            elif result["status"] != PASS:
                cell["outputs"] = _result_outputs(result) + [
                    _error_output(result["status"], result["message"])]
        cells.append(cell)
        seen |= {gid, cell.get("id")} - {None}  # the cells above the next one
        add_student_cells(cell.get("id"))
        if gid and gid != cell.get("id"):
            add_student_cells(gid)
    for anchor in list(added):
        add_student_cells(anchor)
    metadata = {k: v for k, v in plan.skeleton.get("metadata", {}).items()
                if k in ("kernelspec", "language_info", "jupytext")}
    return {"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}


def write_notebook(path: Path, nb: Dict[str, Any]) -> Any:
    import nbformat

    node = nbformat.from_dict(nb)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        nbformat.write(node, str(tmp))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return node


def answer_texts(cells: List[Any]) -> Dict[str, str]:
    """What a person grades in an autograded notebook, by grade id: a written answer's text,
    and a task's answer, the student's cells below it up to the next graded cell."""
    found: Dict[str, str] = {}
    task = None
    for cell in cells:
        meta = nbgrader_meta(cell)
        gid = meta.get("grade_id")
        if gid:
            task = gid if meta.get("task") else None
            if meta.get("solution") and cell.get("cell_type") == "markdown":
                found[gid] = text(cell.get("source"))
        elif task is not None:
            found[task] = found.get(task, "") + text(cell.get("source")) + "\n"
    return found


def previous_answers(path: Path) -> Dict[str, str]:
    """:func:`answer_texts` of the autograded notebook written before (none: {})."""
    try:
        return answer_texts(json.loads(path.read_text(encoding="utf-8")).get("cells", []))
    except (OSError, ValueError, AttributeError):
        return {}
