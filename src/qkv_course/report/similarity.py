"""Answers that look copied: pairs of submissions, and submissions against the reference.

``qkv report`` calls :func:`find` on ``autograded/`` and :func:`write_html` writes
``similarity.html``: each flagged pair with both codes side by side, the shared parts marked.

A student's answer to an assignment is the code of its answer cells (nbgrader's solution code
cells), without the conceptual questions' one-line answers and the experiment's seed. Code is
compared by winnowed fingerprints (MOSS's method) from ``copydetect`` (pinned in
requirements.txt): pygments tokenises it, names become placeholders and whitespace and comments
go, so renaming variables or reformatting hides nothing. The lines the released notebook gives
every student (signatures, docstrings, comments) are boilerplate and never count.

Flagged:

- two students of one assignment whose answers cover each other at ``threshold`` or more
  (both ways: a short answer inside a long one is not a copy of it);
- a student whose answers are covered at ``threshold`` or more by the model solution
  (``solutions/``) or by the reference package's source (``src/qkv``), both public.

Answers shorter than ``min_chars`` after normalisation are left out: short right answers are
alike because they are right.
"""

from __future__ import annotations

import html
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

import nbformat

from ..config import ROOT

#: Fingerprint parameters (copydetect's defaults: noise threshold 25, guarantee threshold 30).
K, WINDOW = 25, 6
THRESHOLD = 0.8
MIN_CHARS = 150
_SKIPPED = re.compile(r".*_q\d+$|my_seed$")  # one-line answers: alike whenever they are right


@dataclass(frozen=True)
class Match:
    """One flagged pair.

    Args:
        assignment: e.g. ``06-masking``.
        left: a student.
        right: another student, or ``reference: <file>``.
        similarity: the share of ``left``'s code (and, for two students, of ``right``'s) found
            in the other, from 0 to 1.
        left_html, right_html: both codes, HTML-escaped, shared parts in ``<mark>``.
    """

    assignment: str
    left: str
    right: str
    similarity: float
    left_html: str
    right_html: str


def answer_code(nb: nbformat.NotebookNode) -> str:
    """The code of a notebook's answer cells, one after another."""
    answers = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution"):
            answers.append((str(meta.get("grade_id", "")), cell.source))
    return _joined(answers)


def _joined(answers: Iterable[Tuple[str, str]]) -> str:
    """``(grade id, code)`` pairs as one text, the one-line answers (:data:`_SKIPPED`) left out."""
    return "\n\n".join(str(code).strip() for gid, code in answers
                       if not _SKIPPED.match(gid)) + "\n"


def _fingerprint(code: str, name: str, boilerplate: Iterable[int] = ()):
    from copydetect import CodeFingerprint  # numpy, pygments: only when a report is made

    return CodeFingerprint(f"{name}.py", K, WINDOW, boilerplate=list(boilerplate),
                           language="python", fp=io.StringIO(code))


def _boilerplate(code: str) -> List[int]:
    return list(_fingerprint(code, "given").hashes) if code.strip() else []


def _marked(fp, slices) -> str:
    from copydetect.utils import highlight_overlap

    if slices.shape[-1] == 0:
        return html.escape(fp.raw_code)
    out, _ = highlight_overlap(fp.raw_code, slices, "<mark>", "</mark>", escape_html=True)
    return out


def compare(left, right) -> Tuple[float, float, str, str]:
    """How much of each fingerprinted code the other covers, and both marked up."""
    from copydetect import compare_files

    _, (a, b), (sa, sb) = compare_files(left, right)
    return float(a), float(b), _marked(left, sa), _marked(right, sb)


def _filtered_length(fp) -> int:
    return len(fp.filtered_code)


def _references(root: Path, assignment: str) -> Dict[str, str]:
    """The public code an answer could be copied from: the model answers and ``src/qkv``."""
    found = {}
    for path in sorted((root / "solutions" / assignment).glob("*.ipynb")):
        found[path.relative_to(root).as_posix()] = answer_code(nbformat.read(str(path), 4))
    for path in sorted((root / "src" / "qkv").glob("*.py")):
        found[path.relative_to(root).as_posix()] = path.read_text()
    return found


def _given(root: Path, assignment: str) -> str:
    """What every student was given in the answer cells (the released notebook's)."""
    return "".join(answer_code(nbformat.read(str(p), 4))
                   for p in sorted((root / "exercises" / assignment).glob("*.ipynb")))


def record_code(record: Dict) -> str:
    """The code of a result record's answer cells (``qkv grade``'s, or the one a Gradescope
    ``results.json`` keeps), one after another, as :func:`answer_code` reads a notebook's."""
    return _joined((gid, code) for gid, code in (record.get("answers") or {}).items()
                   if isinstance(gid, str))


def codes_in(autograded: Path) -> Dict[str, Dict[str, str]]:
    """``{assignment: {student: answer code}}`` of ``autograded/<student>/<assignment>/*.ipynb``."""
    codes: Dict[str, Dict[str, str]] = {}
    for notebook in sorted(autograded.glob("*/*/*.ipynb")):
        student, assignment = notebook.parent.parent.name, notebook.parent.name
        try:
            nb = nbformat.read(str(notebook), 4)
        except Exception:  # noqa: BLE001  (qkv report says which files it skipped)
            continue
        codes.setdefault(assignment, {})[student] = (
            codes.get(assignment, {}).get(student, "") + answer_code(nb))
    return codes


def find(codes: Dict[str, Dict[str, str]], root: Path = ROOT, threshold: float = THRESHOLD,
         min_chars: int = MIN_CHARS) -> List[Match]:
    """Every flagged pair among the class's answers.

    Args:
        codes: ``{assignment: {student: answer code}}`` (:func:`codes_in` reads an
            ``autograded/`` folder; :func:`record_code` a result record).
        root: the repository (its ``solutions/``, ``exercises/`` and ``src/qkv``).
        threshold: the share of code two answers must have in common to be flagged.
        min_chars: answers shorter than this, normalised, are never flagged.

    Returns:
        The matches, by assignment, most similar first.
    """
    matches: List[Match] = []
    for assignment, by_student in sorted(codes.items()):
        given = _boilerplate(_given(root, assignment))
        fps = {s: _fingerprint(c, s, given) for s, c in by_student.items()}
        fps = {s: fp for s, fp in fps.items() if _filtered_length(fp) >= min_chars}
        names = sorted(fps)
        found: List[Match] = []
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                x, y, ha, hb = compare(fps[a], fps[b])
                if min(x, y) >= threshold:
                    found.append(Match(assignment, a, b, min(x, y), ha, hb))
        references = {name: _fingerprint(code, name, given)
                      for name, code in _references(root, assignment).items()}
        for s in names:
            best: Optional[Match] = None
            for name, ref in references.items():
                x, _, hs, hr = compare(fps[s], ref)
                if x >= threshold and (best is None or x > best.similarity):
                    best = Match(assignment, s, f"reference: {name}", x, hs, hr)
            if best is not None:
                found.append(best)
        matches += sorted(found, key=lambda m: -m.similarity)
    return matches


def groups(matches: List[Match]) -> List[Tuple[List[str], Match]]:
    """The flagged matches as groups: students linked by a chain of pairs (one source copied by
    many makes one group, not n(n-1)/2 pairs), or a student and the reference they match; each
    with its most similar pair, whose codes the page shows. Most similar first."""
    parent: Dict[Tuple[str, str], Tuple[str, str]] = {}

    def root(x: Tuple[str, str]) -> Tuple[str, str]:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for m in matches:
        if not m.right.startswith("reference: "):
            parent[root((m.assignment, m.left))] = root((m.assignment, m.right))
    found: Dict[Tuple[str, str], Tuple[List[str], Match]] = {}
    for m in matches:
        if m.right.startswith("reference: "):
            found[(m.assignment, f"{m.left} ~ {m.right}")] = ([m.left, m.right], m)
            continue
        key = root((m.assignment, m.left))
        members, best = found.get(key, ([], m))
        for s in (m.left, m.right):
            if s not in members:
                members.append(s)
        found[key] = (members, m if m.similarity > best.similarity else best)
    return sorted(((sorted(ms), best) for ms, best in found.values()),
                  key=lambda g: (g[1].assignment, -g[1].similarity))


def write_html(path: Path, matches: List[Match], threshold: float = THRESHOLD) -> None:
    """``similarity.html``: the flagged groups, each with its most similar pair side by side."""
    found = groups(matches)
    rows = [f"<h1>Answers that look copied</h1><p>{len(found)} group(s) of submissions (from "
            f"{len(matches)} pair(s)) sharing at least {threshold:.0%} of their answer code, after "
            "names and whitespace are normalised (winnowed fingerprints, copydetect). A match "
            "is a reason to read both, not a verdict: a short right answer looks like every "
            "other right answer.</p>"]
    for members, m in found:
        who = (f"{len(members)} students: {', '.join(members)}" if len(members) > 2
               else f"{members[0]} and {members[1]}")
        rows.append(f"<h2>{html.escape(m.assignment)}: {html.escape(who)} "
                    f"({m.similarity:.0%} at most)</h2>"
                    f"<table><tr><th>{html.escape(m.left)}</th><th>{html.escape(m.right)}</th>"
                    f"</tr><tr><td><pre>{m.left_html}</pre></td><td><pre>{m.right_html}</pre>"
                    "</td></tr></table>")
    style = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;width:100%}"
             "td,th{border:1px solid #ccc;vertical-align:top;padding:.3em;width:50%}"
             "pre{white-space:pre-wrap;font-size:85%}mark{background:#ffd27f}")
    path.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>qkv: similar "
                    f"answers</title><style>{style}</style></head><body>{''.join(rows)}"
                    "</body></html>\n", encoding="utf-8")
