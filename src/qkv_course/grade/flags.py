"""Delegation flags: for a person to review, never a deduction.

An exercise that asks for your own softmax or attention cannot stop an answer from calling
torch's (the sandbox runs whatever the answer calls, and a right result is a right result).
So delegation is a *flag*: the grade stands, and the run's summary and the result file name
the student, the test and what was seen, from two sources:

- what the sandbox saw: the checks' notice in a call's verdict (the answer called what the
  exercise asks you to write, seen through torch's public API while it ran);
- a static reading of the student's code (answer cells and cells they added), here in the
  parent: a reference to torch's softmax or attention where the exercise forbids it, or any
  use of the course's reference package ``qkv`` (``qkv.checks`` aside, nothing of it belongs
  in an answer).
"""

from __future__ import annotations

import ast
import re
from typing import Dict, Iterable, List, Optional, Set, Tuple

SOFTMAX = ("softmax",)
_NOTICES = 16  # a test's sandbox notices kept as flags
ATTENTION = ("scaled_dot_product_attention", "multiheadattention", "multi_head_attention",
             "flex_attention", "_safe_softmax", "_masked_softmax", "transformer")
# What each exercise may not call, beyond the course's reference (checks not listed: attention).
FORBIDDEN = {"softmax": SOFTMAX, "question": (), "dot_product_variance": (),
             # torch's ready-made causal masks; not tril or triu, the way the exercise is done
             "split_heads": (), "merge_heads": (),
             "causal_mask": ("causal_lower_right", "causal_upper_left", "subsequent_mask"),
             "padding_mask": (), "sinusoidal_encoding": ("sinusoid", "rotary", "rope", "alibi"),
             "apply_rope": ("sinusoid", "rotary", "rope", "alibi"),
             "alibi_bias": ("sinusoid", "rotary", "rope", "alibi"),
             "repeat_kv": ("repeat_kv",),
             "causal_mask_bottom_right": ("lower_right", "upper_left", "subsequent_mask")}


#: What an exercise's text tells the student to call, by exercise: an answer's use of it is
#: no delegation (assignment 11's ablation starts from ``qkv.ablation_baseline()``, measures
#: with ``qkv.ablation_loss`` and may avoid the chapter's own changes).
HANDED = {"ablation": {"qkv.ablation_baseline", "qkv.ablation_loss", "qkv.chapter_ablations"}}


class NotRead(Exception):
    """The parser itself failed on a piece of code (not a syntax error: ``MemoryError`` on
    ``"-" * 100000``, ``RecursionError``, ...): what it names is unknown, a person reads it."""


def _parse(source: str) -> Optional[ast.AST]:
    """The code's tree, read as Python after :func:`_without_magics`; ``None`` for code that
    does not compile even so (it defines nothing in the sandbox either); :class:`NotRead` when
    the parser fails in any other way."""
    try:
        try:
            return ast.parse(source)
        except SyntaxError:
            return ast.parse(_without_magics(source))
    except (SyntaxError, ValueError):
        return None
    except Exception as e:  # MemoryError, RecursionError, anything else of the parser's
        raise NotRead(f"{type(e).__name__}: {str(e)[:100]}".rstrip(": ")) from None


_MAGIC = re.compile(r"^(\s*)(%%?|!)(.*)$")


def _without_magics(source: str) -> str:
    """The Python of a cell that uses IPython's syntax, which the sandbox runs through IPython:
    a cell magic's body is read as code (``%%capture`` or ``%%writefile`` hides nothing), a
    line magic's arguments too (``%time f()`` reads ``f()``), a shell line (``!ls``) is none."""
    lines = source.splitlines()
    out = []
    for line in lines:
        found = _MAGIC.match(line)
        if not found:
            out.append(line)
        elif found.group(2) == "%" and not found.group(3).startswith("%"):
            rest = found.group(3).split(None, 1)  # the magic's name, then what it runs
            out.append(found.group(1) + (rest[1] if len(rest) > 1 else "pass"))
        else:  # a cell magic's first line, or a shell command
            out.append(found.group(1) + "pass")
    return "\n".join(out)


def names_in(source: str) -> Set[str]:
    """Every dotted name and imported module a piece of code mentions (empty if it does not
    parse: a cell that does not parse defines nothing).

    Raises:
        NotRead: the parser failed on it (not a syntax error).
    """
    tree = _parse(source)
    if tree is None:
        return set()
    found: Set[str] = set()
    shadowed: Set[str] = set()
    defined = {n.name for n in ast.walk(tree)
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    aliases = _aliases(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
            path = _dotted(node)
            # torch.softmax inside the student's own ``def softmax``: the attribute is torch's,
            # not theirs, so it keeps its whole dotted name (the exercise's name alone is not
            # delegation; its module's is).
            if node.attr in defined and path and path.split(".")[0] not in ("self", "cls"):
                shadowed.add(path)
            root = path.split(".")[0]
            if root in aliases:  # q.Block after `import qkv as q`: qkv.Block
                path = aliases[root] + path[len(root):]
            if path.startswith("qkv."):  # which of the course's names: given, or the student's
                found.add(path)
        elif isinstance(node, ast.Name):
            found.add(node.id)
    return (found - defined) | shadowed  # the student's own functions are not delegation


def _aliases(tree: ast.AST) -> Dict[str, str]:
    """The names the code binds to the course's modules: ``{"q": "qkv"}`` for ``import qkv as
    q``, ``{"b": "qkv.bottleneck"}`` for ``from qkv import bottleneck as b``."""
    found: Dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update({a.asname: a.name for a in node.names
                          if a.asname and a.name.split(".")[0] == "qkv"})
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "qkv":
            found.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
    return found


def _dotted(node: ast.Attribute) -> str:
    """``a.b.c`` for an attribute chain on a plain name, else the empty string."""
    parts = [node.attr]
    value = node.value
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    return ".".join([value.id, *reversed(parts)]) if isinstance(value, ast.Name) else ""


def _public_check(name: str) -> bool:
    """``qkv.checks`` and what a notebook calls of it (``qkv.checks.check_softmax``): a student
    may check an answer in its own cell. The rest of the checks (``qkv.checks.grading``, the
    catalogues of mistakes) holds the references."""
    rest = name.split(".")[2:] if name.startswith("qkv.checks") else None
    return rest is not None and (not rest or rest[0].startswith("check_")
                                 or rest[0] in ("in_notebook", "CheckFailed"))


def _delegates(check: str, names: Iterable[str]) -> List[str]:
    check = check[len("check_"):] if check.startswith("check_") else check
    patterns = FORBIDDEN.get(check, ATTENTION)
    seen = []
    for name in sorted(names):
        if name.split(".")[-1].startswith("check_") and (
                "." not in name or _public_check(name)):
            continue  # a check, called to try the answer
        if name == "qkv" or (name.startswith("qkv.") and not _public_check(name)):
            seen.append(f"uses the course's reference ({name})")
        elif check != "softmax" and check in FORBIDDEN and not patterns:
            continue
        elif any(p in name.lower() for p in patterns) and name != check:
            seen.append(f"names {name}")
    return seen


#: Characters of a submission's added cells read for flags: a flag is for a person, and a
#: submission's size must not buy it the grader's time (each cell is parsed once, up to this).
STATIC_CHARS = 1 << 20


def _added_names(added: Iterable[str]) -> Tuple[Set[str], bool, List[str]]:
    """The names the added cells use, read up to :data:`STATIC_CHARS` characters in all;
    whether some were left unread; and why each cell the parser failed on was not read."""
    names: Set[str] = set()
    failed: List[str] = []
    budget = STATIC_CHARS
    for source in added:
        if len(source) > budget:
            return names, True, failed
        budget -= len(source)
        try:
            names |= names_in(source)
        except NotRead as e:
            failed.append(f"an added cell, {e}")
    return names, False, failed


def _names_or_none(source: str, failed: List[str]) -> Set[str]:
    """:func:`names_in`, or no names with why appended to ``failed``."""
    try:
        return names_in(source)
    except NotRead as e:
        failed.append(str(e))
        return set()


def _answer_names(answer_source: str, added_names: Set[str], given: str,
                  failed: List[str]) -> Set[str]:
    """The names the code that can define an answer uses (its cell and the added cells), less
    those the release itself wrote in the answer cell (``given``); an answer cell the parser
    fails on names nothing, and why is appended to ``failed``."""
    return (_names_or_none(answer_source, failed) | added_names) - _names_or_none(given, [])


def _unread(why: str) -> str:
    return (f"a cell could not be read: {why} (the parser failed on it; what it calls was not "
            "looked at: read it)")


def given_by_setup(setup: str) -> Set[str]:
    """``{"qkv.split_heads", ...}``: what the instructor's set-up cell imports from ``qkv``
    (an answer that reaches it as ``qkv.split_heads`` uses what the assignment gives)."""
    try:
        tree = _parse(setup)
    except NotRead:
        tree = None  # the instructor's own cell: then nothing is given
    if tree is None:
        return set()
    return {f"qkv.{a.name}" for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "qkv" for a in node.names}


def _less_given(names: Set[str], given: Set[str]) -> Set[str]:
    """``names`` without the set-up's given pieces (and without ``qkv`` itself when every use
    of it was one of them)."""
    left = names - given
    if given and "qkv" in left and not any(n.startswith("qkv.") for n in left) \
            and any(n in given for n in names):
        left.discard("qkv")
    return left


def flags_for(record_tests: List[Dict], answers: Dict[str, str], added: List[str],
              calls_by_test: Dict[str, List[tuple]],
              given: Optional[Dict[str, str]] = None, setup: str = "") -> List[Dict[str, str]]:
    """Every flag of a submission: ``{"test", "source", "detail"}``.

    Args:
        record_tests: the tests' verdicts (their calls' ``notice`` fields).
        answers: the student's answer cells by id.
        added: the cells the student added.
        calls_by_test: test id -> ``[(check, answer name)]`` from the instructor's plan.
        given: answer id -> the code the release wrote in that answer cell (not flagged).
        setup: the instructor's set-up cell: what it imports from ``qkv`` is given, not
            delegation, however the answer reaches it (``qkv.split_heads``).
    """
    from_setup = given_by_setup(setup)
    flags = []
    added_names, unread, failed = _added_names(added)
    if unread:
        flags.append({"test": "", "source": "static", "detail": (
            f"the added cells hold more than {STATIC_CHARS:,} characters: the rest was not "
            "read for flags")})
    names: Dict[str, Set[str]] = {}  # answer id -> the names its code uses, read once
    for test in record_tests:
        for notice in list(dict.fromkeys(test.get("notices", [])))[:_NOTICES]:
            flags.append({"test": test["grade_id"], "source": "sandbox", "detail": notice[:300]})
        for check, answer in calls_by_test.get(test["grade_id"], []):
            if check == "check_question":
                continue
            if answer not in names:
                why: List[str] = []
                names[answer] = _answer_names(answers.get(answer, ""), added_names,
                                              (given or {}).get(answer, ""), why)
                failed += [f"the answer cell {answer}, {w}" for w in why]
            handed = HANDED.get(check[len("check_"):], set())
            for detail in _delegates(check, _less_given(names[answer], from_setup | handed)):
                flags.append({"test": test["grade_id"], "source": "static",
                              "detail": f"{answer}: {detail}"})
    # A cell the parser failed on is a flag for a person, never the end of grading.
    flags += [{"test": "", "source": "static", "detail": _unread(why)} for why in failed]
    unique = {(f["test"], f["source"], f["detail"]): f for f in flags}
    return list(unique.values())
