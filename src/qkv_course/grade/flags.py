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
    """A piece of code could not be read: it does not compile even as IPython reads it, or the
    transform or the parser failed on it (``MemoryError`` on ``"-" * 100000``,
    ``RecursionError``, the work budget): what it names is unknown, a person reads it."""


class _DoesNotCompile(NotRead):
    """A syntax error, even as IPython reads the code: the sandbox compiled none of it."""


#: Work (characters parsed and tokenised, plus :data:`_PER_READ` for each piece of code read)
#: that reading one cell may cost beyond reading it once. IPython tokenises the whole cell again
#: after each piece of its syntax it rewrites (200 magic lines in 400 KB: 200 s of CPU), and this
#: reading runs in the trusted grader, outside every limit: a cell that needs more is flagged.
_WORK = 1 << 20
_PER_READ = 1 << 10
#: The calls IPython writes for a magic; the sandbox's ``get_ipython()`` runs the code of some
#: (``%time``, ``%%capture``...). Every one whose code is Python is read: a flag is for a person.
_MAGIC_CALLS = ("run_cell_magic", "run_line_magic")


class _Budget:
    def __init__(self, chars: int) -> None:
        self.left = chars

    def spend(self, chars: int) -> None:
        self.left -= chars
        if self.left < 0:
            raise NotRead(f"its IPython syntax needs more than {_WORK:,} characters of work "
                          "beyond reading it once")


def _ipython(source: str, budget: _Budget) -> str:
    """The text IPython compiles for a cell, as the sandbox runs it (``worker._transform``:
    ``TransformerManager().transform_cell``, a text transform that runs nothing), each pass of
    its tokeniser paid for from ``budget``."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # then the sandbox runs plain Python too
        return source

    class Counted(TransformerManager):
        def do_one_token_transform(self, lines):  # type: ignore[no-untyped-def]
            budget.spend(sum(map(len, lines)))
            return super().do_one_token_transform(lines)

    return Counted().transform_cell(source)


def _parse(source: str, budget: Optional[_Budget] = None) -> ast.AST:
    """The tree of the code IPython makes of a cell (what the sandbox compiles).

    Raises:
        NotRead: the cell does not compile even as IPython reads it (the sandbox ran none of it
            either, but a person reads it: never "it names nothing"), or the transform or the
            parser failed on it in another way (``MemoryError`` on ``"-" * 100000``,
            ``RecursionError``, the work budget).
    """
    budget = budget or _Budget(2 * len(source) + _WORK)
    budget.spend(len(source) + _PER_READ)
    try:
        return ast.parse(_ipython(source, budget))
    except NotRead:
        raise
    except SyntaxError as e:
        raise _DoesNotCompile(f"{type(e).__name__} at line {e.lineno}: {str(e.msg)[:100]}, "
                              "even as IPython reads it; the sandbox ran none of it") from None
    except Exception as e:  # MemoryError, RecursionError, anything else of the parser's
        raise NotRead(f"{type(e).__name__}: {str(e)[:100]}".rstrip(": ")) from None


def _trees(source: str) -> List[List[ast.AST]]:
    """The nodes of a cell's tree and of the trees of the code its magics hold (``%%capture``'s
    body, ``%time``'s line, read as IPython reads them: they share the cell's namespace), each
    tree walked once. A magic's text that is not Python (``%pip install x``) is not run as
    code, and is left out."""
    budget = _Budget(2 * len(source) + _WORK)
    trees = [list(ast.walk(_parse(source, budget)))]
    for nodes in trees:  # grows as magics are found: no recursion, one budget
        for node in nodes:
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in _MAGIC_CALLS and node.args
                    and all(isinstance(a, ast.Constant) and isinstance(a.value, str)
                            for a in node.args)):
                for text in node.args[1:]:  # a line magic's line; a cell magic's line, body
                    try:
                        trees.append(list(ast.walk(_parse(text.value, budget))))
                    except _DoesNotCompile:
                        pass  # the sandbox runs no such code (it raises, or it is a no-op)
    return trees


def names_in(source: str) -> Set[str]:
    """Every dotted name and imported module a piece of code mentions, read as IPython runs it
    (:func:`_trees`). Linear in the code's length: a long attribute chain (``a.b.b.b...``) is
    walked once, and its paths keep :data:`_PATH_PARTS` parts at most.

    Raises:
        NotRead: it could not be read (it does not compile, or the parser failed on it).
    """
    trees = _trees(source)
    found: Set[str] = set()
    shadowed: Set[str] = set()
    defined = {n.name for nodes in trees for n in nodes
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    aliases: Dict[str, str] = {}
    for nodes in trees:
        aliases.update(_aliases(nodes))
    for nodes in trees:
        inner = {id(n.value) for n in nodes
                 if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute)}
        for node in nodes:
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Attribute):
                found.add(node.attr)
                if id(node) not in inner:  # the top of a chain: its paths, read once
                    _chain(node, defined, aliases, found, shadowed)
            elif isinstance(node, ast.Name):
                found.add(node.id)
    return (found - defined) | shadowed  # the student's own functions are not delegation


#: Parts of an attribute chain's path kept: the first ones, then ``…`` and the last one (no
#: code a person writes is longer; reading ``a.b.b.b...`` in full costs its length squared).
_PATH_PARTS = 12


def _chain(top: ast.Attribute, defined: Set[str], aliases: Dict[str, str],
           found: Set[str], shadowed: Set[str]) -> None:
    """The paths of one attribute chain on a plain name (``a.b.c``: ``a.b`` and ``a.b.c``):
    what the course's reference is reached by, and torch's own attribute where the student
    defines a function of that name (``torch.softmax`` in their ``def softmax``)."""
    parts = []
    value: ast.AST = top
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    if not isinstance(value, ast.Name):
        return
    parts.append(value.id)
    parts.reverse()  # root first
    root = parts[0]
    alias = aliases.get(root)
    for depth in range(1, len(parts)):
        attr = parts[depth]
        mine = attr in defined and root not in ("self", "cls")
        if not (mine or alias or root == "qkv"):
            continue
        if depth < _PATH_PARTS:
            kept = parts[:depth + 1]
        else:
            kept = parts[:_PATH_PARTS - 2] + ["…", attr]
        path = ".".join(kept)
        # torch.softmax inside the student's own ``def softmax``: the attribute is torch's,
        # not theirs, so it keeps its whole dotted name (the exercise's name alone is not
        # delegation; its module's is).
        if mine:
            shadowed.add(path)
        if alias:  # q.Block after `import qkv as q`: qkv.Block
            path = alias + path[len(root):]
        if path.startswith("qkv."):  # which of the course's names: given, or the student's
            found.add(path)


def _aliases(nodes: Iterable[ast.AST]) -> Dict[str, str]:
    """The names the code binds to the course's modules: ``{"q": "qkv"}`` for ``import qkv as
    q``, ``{"b": "qkv.bottleneck"}`` for ``from qkv import bottleneck as b``."""
    found: Dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update({a.asname: a.name for a in node.names
                          if a.asname and a.name.split(".")[0] == "qkv"})
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "qkv":
            found.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
    return found


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
    whether some were left unread; and why each cell that could not be read was not."""
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
    those the release itself wrote in the answer cell (``given``); an answer cell that could not
    be read adds no names, and why is appended to ``failed`` (a flag, never "names nothing")."""
    return (_names_or_none(answer_source, failed) | added_names) - _names_or_none(given, [])


def _unread(why: str) -> str:
    return (f"a cell could not be read: {why} (what it calls was not looked at: read it)")


def given_by_setup(setup: str) -> Set[str]:
    """``{"qkv.split_heads", ...}``: what the instructor's set-up cell imports from ``qkv``
    (an answer that reaches it as ``qkv.split_heads`` uses what the assignment gives)."""
    try:
        tree = _parse(setup)
    except NotRead:
        return set()  # the instructor's own cell: then nothing is given
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
    # A cell that could not be read is a flag for a person, never the end of grading.
    flags += [{"test": "", "source": "static", "detail": _unread(why)} for why in failed]
    unique = {(f["test"], f["source"], f["detail"]): f for f in flags}
    return list(unique.values())
