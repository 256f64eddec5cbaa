"""The part of a reference function that teaches: what the book's listings show.

A chapter shows ``qkv``'s code with the ``{listing}`` directive (``qkv_course.sphinx.listing``)
and its Colab copy shows the same text (``qkv_course.generate.colab``); both get it from
:func:`teaching_source`. From the object named (a function, a class or a method) it leaves out

- docstrings (the page's prose says what the function is for),
- input validation: calls into ``qkv._validate`` (imported under any name), calls to the module's
  own ``_check*`` / ``_require*`` / ``_validate*`` helpers, ``assert`` statements, ``if ...: raise``
  guards, and the comment lines right above any of these; a block (or a method) left empty
  goes too,

and breaks lines wider than :data:`WIDTH` (the book's code column) with :func:`fit_lines`: ruff's
formatter (pinned in requirements.txt) breaks the code, and the comments, which a formatter
leaves alone, are re-flowed here. The reference modules are never edited for this: the rules read
their syntax tree.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import re
import subprocess
import sys
import textwrap
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Set, Tuple

from ..config import ROOT, config, repository_url

# Characters per line that fit the book's code column at 1280 px (qkv.css sets the font and
# the padding that make it so; tests/test_browser.py measures it).
WIDTH = 80

_PRIVATE_CHECK = re.compile(r"_(check|require|validate)\w*$")


@dataclass(frozen=True)
class Listing:
    """The teaching text of one object and where the whole object lies in its file."""

    text: str
    first_line: int  # 1-based, the object's first line (decorators included)
    last_line: int


def _find(tree: ast.Module, pyobject: str) -> ast.AST:
    node: ast.AST = tree
    for part in pyobject.split("."):
        body = getattr(node, "body", [])
        found = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                 and n.name == part]
        if not found:
            raise LookupError(f"no {pyobject!r} (at {part!r})")
        node = found[0]
    return node


def _first_line(node: ast.AST) -> int:
    """The first line of a definition, its decorators included."""
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def _validate_aliases(tree: ast.Module) -> Set[str]:
    """Names the module binds to ``qkv._validate``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names if a.name == "_validate"}
        elif isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.name.endswith("._validate") and a.asname}
    return names


def _is_check_call(node: ast.AST, aliases: Set[str]) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.value.id in aliases
    return isinstance(func, ast.Name) and bool(_PRIVATE_CHECK.match(func.id))


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


class _Trimmer:
    """Collects the lines (1-based) to leave out of one object."""

    def __init__(self, aliases: Set[str]):
        self.aliases = aliases
        self.dropped: Set[int] = set()
        self.validation_starts: List[int] = []

    def _drop(self, node: ast.AST, validation: bool = False) -> None:
        first = _first_line(node)
        self.dropped.update(range(first, node.end_lineno + 1))
        if validation:
            self.validation_starts.append(first)

    def _is_validation(self, stmt: ast.stmt) -> bool:
        if isinstance(stmt, ast.Assert):
            return True
        if isinstance(stmt, ast.Expr) and _is_check_call(stmt.value, self.aliases):
            return True
        return isinstance(stmt, ast.If) and not stmt.orelse and all(isinstance(s, ast.Raise) for s in stmt.body)

    def body(self, stmts: Sequence[ast.stmt], is_def: bool) -> bool:
        """Trim a block; True when nothing of it is left."""
        kept = 0
        for i, stmt in enumerate(stmts):
            if i == 0 and is_def and _is_docstring(stmt):
                self._drop(stmt)
            elif self._is_validation(stmt):
                self._drop(stmt, validation=True)
            elif self.node(stmt):
                self._drop(stmt, validation=True)
            else:
                kept += 1
        return kept == 0

    def node(self, node: ast.AST) -> bool:
        """Trim a statement's blocks; True when one of its required blocks is left empty."""
        is_def = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        emptied = {}
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                emptied[field] = self.body(block, is_def and field == "body")
        for handler in getattr(node, "handlers", []):
            self.body(handler.body, False)
        # An `if` whose checks are gone but whose `else` holds code stays (with its else).
        return emptied.get("body", False) and emptied.get("orelse", True)


def _comments_above(lines: List[str], starts: Iterable[int], dropped: Set[int]) -> Set[int]:
    """Comment lines directly above a left-out statement (they explain it)."""
    extra = set()
    for start in starts:
        n = start - 1
        while n >= 1 and n not in dropped and lines[n - 1].strip().startswith("#"):
            extra.add(n)
            n -= 1
    return extra


def _tidy(lines: List[str]) -> List[str]:
    """No blank line right after a block opener, none doubled, none at the end."""
    out: List[str] = []
    for line in lines:
        blank = not line.strip()
        if blank and (not out or not out[-1].strip() or out[-1].rstrip().endswith(":")):
            continue
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out


def _between(lines: List[str], start_at: Optional[str], end_at: Optional[str]) -> List[str]:
    """From the first line holding ``start_at`` to the next holding ``end_at`` (both kept)."""
    first = next((i for i, line in enumerate(lines) if start_at in line), None) if start_at else 0
    if first is None:
        raise LookupError(f"no line holds {start_at!r}")
    last = next((i for i in range(first, len(lines)) if end_at in lines[i]), None) if end_at else len(lines) - 1
    if last is None:
        raise LookupError(f"no line after {start_at!r} holds {end_at!r}")
    return lines[first : last + 1]


def _comment_column(line: str) -> Optional[int]:
    """Where a comment ends a code line (None: no comment, or a line that is only a comment)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line.lstrip() + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None  # a line inside a bracket or a string: left to the formatter
    comments = [t for t in tokens if t.type == tokenize.COMMENT]
    if not comments or comments[0].start[1] == 0:
        return None
    return len(line) - len(line.lstrip()) + comments[0].start[1]


def fit_comments(code: str, width: int) -> str:
    """The comments of ``code`` within ``width``, which a formatter does not do.

    A comment that makes its code line too wide goes on its own line above it; a run of comment
    lines (one indentation) with a line too wide is re-flowed. The code itself is not touched.

    Args:
        code: Python source.
        width: the widest line wanted.

    Returns:
        The same code, its comments placed and broken to fit where their words allow.
    """
    lines: List[str] = []
    for line in code.split("\n"):
        col = _comment_column(line) if len(line) > width else None
        if col is None:
            lines.append(line)
        else:
            pad = line[: len(line) - len(line.lstrip())]
            lines += [pad + line[col:], line[:col].rstrip()]
    out: List[str] = []
    i = 0
    while i < len(lines):
        pad = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        j = i
        while j < len(lines) and lines[j].startswith(pad + "#"):
            j += 1
        run = lines[i:j]
        if run and max(map(len, run)) > width:
            words = " ".join(line.strip().lstrip("#").strip() for line in run)
            out += textwrap.wrap(words, width, initial_indent=pad + "# ", subsequent_indent=pad + "# ",
                                 break_on_hyphens=False, break_long_words=False)
        else:
            out += run or [lines[i]]
        i = max(j, i + 1)
    return "\n".join(out)


def fit_lines(code: str, width: int) -> str:
    """``code`` with its lines broken to at most ``width`` characters where this can be done.

    Code that fits is returned as it is. Otherwise its comments are fitted (:func:`fit_comments`)
    and ruff's formatter writes the code at that width, quotes as they were. What no formatter
    breaks (a string longer than the column) stays wide.

    Args:
        code: Python source (a whole statement or more).
        width: the widest line wanted.

    Returns:
        The fitted code, with the same syntax tree; ``code`` unchanged when it is not valid Python
        on its own (a fragment cut by ``start_at``/``end_at``).

    Raises:
        RuntimeError: ruff is not installed in this Python (``pip install -r requirements.txt``).
    """
    if all(len(line) <= width for line in code.split("\n")):
        return code
    if importlib.util.find_spec("ruff") is None:
        raise RuntimeError("the book's listings are formatted by ruff, which is not installed in "
                           f"{sys.executable}: run `pip install -r requirements.txt`")
    ruff = [sys.executable, "-m", "ruff", "format", "--isolated", "--line-length", str(width),
            "--config", "format.quote-style = 'preserve'", "-"]
    done = subprocess.run(ruff, input=fit_comments(code, width), capture_output=True, text=True)
    return done.stdout.rstrip("\n") if done.returncode == 0 else code


def teaching_source(path: Path, pyobject: str, width: Optional[int] = WIDTH,
                    start_at: Optional[str] = None, end_at: Optional[str] = None) -> Listing:
    """The listing of ``pyobject`` in ``path``: docstrings and validation left out, lines fitted.

    Args:
        path: a Python source file.
        pyobject: ``name``, ``Class`` or ``Class.method``, as Sphinx's ``literalinclude`` takes.
        width: the widest line wanted (``None``: leave lines as they are).
        start_at, end_at: show only the lines from the first holding ``start_at`` to the next
            holding ``end_at``, as ``literalinclude``'s options of those names do.

    Returns:
        The text (dedented, ending without a newline) and the object's line range in ``path``.

    Raises:
        LookupError: when the file has no such object.
    """
    source = path.read_text()
    tree = ast.parse(source)
    node = _find(tree, pyobject)
    lines = source.splitlines()
    first = _first_line(node)
    trimmer = _Trimmer(_validate_aliases(tree))
    trimmer.node(node)
    dropped = trimmer.dropped | _comments_above(lines, trimmer.validation_starts, trimmer.dropped)
    kept = [lines[n - 1] for n in range(first, node.end_lineno + 1) if n not in dropped]
    text = textwrap.dedent("\n".join(_between(_tidy(kept), start_at, end_at)))
    if width is not None:
        text = fit_lines(text, width)
    return Listing(text, first, node.end_lineno)


def object_source(path: Path, pyobject: str) -> Listing:
    """The whole of ``pyobject`` in ``path``, as ``literalinclude`` shows it (nothing left out)."""
    source = path.read_text()
    node = _find(ast.parse(source), pyobject)
    first = _first_line(node)
    text = textwrap.dedent("\n".join(source.splitlines()[first - 1 : node.end_lineno]))
    return Listing(text, first, node.end_lineno)


def source_link(rel_path: str, listing: Listing, root: Path = ROOT) -> Tuple[str, str]:
    """The text and address of the link under a listing, to the whole object on GitHub.

    Args:
        rel_path: the file's path from the repository root, e.g. ``src/qkv/efficient.py``.
        listing: what :func:`teaching_source` returned for it.
        root: the repository root (its ``_config.yml`` gives the address and the branch).

    Returns:
        ``(text, url)``.
    """
    branch = config(root)["repository"].get("branch", "main")
    url = f"{repository_url(root)}/blob/{branch}/{rel_path}#L{listing.first_line}-L{listing.last_line}"
    text = f"{rel_path}, lines {listing.first_line}–{listing.last_line}"
    return f"Full source, with docstring and input checks: {text}", url
