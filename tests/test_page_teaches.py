"""The page teaches, the exercise asks: no graded function's code on a page before its exercise.

A chapter's exercises follow its page (``_toc.yml``), so the code of a function graded in
chapter ``k``'s assignment may appear only on the pages of chapters after ``k``: neither as a
``{listing}`` of it (or of a private helper of its module that it calls, which is part of its
code), nor as a ``def``/``class`` of the same name in a code cell. The graded functions are the
``check_*`` calls of the instructor's sources, ``solutions/*/*.md``.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import qkv
from qkv_course.config import ROOT

_CHECK = re.compile(r"^check_(\w+)\((\w+)", re.M)
_LISTING = re.compile(r"^```\{listing\} (\S+)\n:pyobject: (\S+)", re.M)
_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.M | re.S)
_DEF = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)", re.M)


def _number(path: Path) -> int:
    return int(path.name[:2])


def graded(root: Path = ROOT) -> dict[str, int]:
    """Each graded function's name and the first chapter whose assignment grades it."""
    first: dict[str, int] = {}
    for md in sorted((root / "solutions").glob("[0-9][0-9]-*/*.md")):
        for check, name in _CHECK.findall(md.read_text()):
            if check != "question" and check == name:
                first[name] = min(first.get(name, 99), _number(md.parent))
    return first


def _private_helpers(name: str) -> set[tuple[str, str]]:
    """(module file name, helper) for the private functions of its module that ``name`` calls.

    Empty for a graded name that ``qkv`` has no reference of (a measurement the student makes).
    """
    obj = getattr(qkv, name, None)
    if obj is None or not (inspect.isfunction(obj) or inspect.isclass(obj)):
        return set()
    path = Path(inspect.getsourcefile(obj))
    tree = ast.parse(path.read_text())
    top = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    node = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name)
    called = {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
    return {(path.name, h) for h in called if h.startswith("_") and h in top}


def test_the_graded_functions_are_found():
    names = graded()
    # Spot checks: one early, one late, a class; and no question counted as a function.
    assert names["softmax"] == 2 and names["kv_cache_step"] == 8 and names["MultiHeadAttention"] == 5
    assert "question" not in names and len(names) >= 20, names


def violations(md: Path, first: dict[str, int]) -> list[str]:
    """What on chapter page ``md`` shows the code of a function graded in its chapter or later."""
    n = _number(md)
    due = {name for name, k in first.items() if k >= n}
    helpers = {h: name for name in due for h in _private_helpers(name)}
    text = md.read_text()
    found = []
    for path, pyobject in _LISTING.findall(text):
        top = pyobject.split(".")[0]
        if top in due:
            found.append(f"{{listing}} of {pyobject} (graded in chapter {first[top]})")
        elif (Path(path).name, top) in helpers:
            owner = helpers[(Path(path).name, top)]
            found.append(f"{{listing}} of {pyobject}, part of {owner} (graded in chapter {first[owner]})")
    for cell in _CELL.findall(text):
        for name in _DEF.findall(cell):
            if name in due:
                found.append(f"a code cell defines {name} (graded in chapter {first[name]})")
    return found


@pytest.mark.parametrize("md", sorted((ROOT / "book").glob("[0-9][0-9]-*.md")), ids=lambda p: p.stem)
def test_no_graded_code_before_its_exercise(md: Path):
    found = violations(md, graded())
    assert not found, (
        f"{md.name} shows graded code before its exercise: {found}. Give the idea, the math and "
        "the shapes, run qkv's function, or show another form (one query in a loop, pseudocode); "
        "the reference may come in a later chapter."
    )


def test_a_listing_a_helper_and_a_def_are_each_caught(tmp_path: Path):
    page = tmp_path / "08-x.md"
    page.write_text(
        "```{listing} ../src/qkv/efficient.py\n:pyobject: kv_cache_step\n```\n\n"
        "```{listing} ../src/qkv/efficient.py\n:pyobject: _online_softmax_step\n```\n\n"
        "```{code-cell} ipython3\ndef softmax(x):\n    return x\n\ndef repeat_kv(x):\n    pass\n```\n"
    )
    found = violations(page, graded())
    assert len(found) == 3, found  # softmax is graded in chapter 2: chapter 8 may define it
    assert any("kv_cache_step" in f for f in found) and any("part of chunked_attention" in f for f in found)
    assert any("defines repeat_kv" in f for f in found)


def _exercise_section(md: Path) -> str:
    text = md.read_text()
    start = text.find("\n## Exercise\n")
    return "" if start < 0 else text[start:text.find("\n## ", start + 5)]


@pytest.mark.parametrize("md", sorted((ROOT / "book").glob("[0-9][0-9]-*.md")), ids=lambda p: p.stem)
def test_the_exercise_section_names_what_its_assignment_grades(md: Path):
    """Each chapter's "## Exercise" names every function its assignment grades, and only
    functions some assignment grades (a reader walk found one promising an ungraded mask and
    leaving out three graded parts)."""
    section = _exercise_section(md)
    assert section, f"{md.name} has no '## Exercise' section pointing to its assignment"
    first = graded()
    here = {name for name, k in first.items() if k == _number(md)}
    named = set(re.findall(r"`(\w+)`", section))
    missing = sorted(here - named)
    assert not missing, f"{md.name}'s exercise section does not name {missing}"
    own = {name for name in named if name in first and first[name] != _number(md)}
    assert not own, f"{md.name}'s exercise section names functions other chapters grade: {own}"
