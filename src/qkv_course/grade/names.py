"""The names a cell of code uses, read as IPython runs it: what the delegation flags look at.

The sandbox runs each cell through IPython (``TransformerManager().transform_cell``), so a cell
is read here the same way: its magics become calls, and the code a magic runs (``%%capture``'s
body, ``%time``'s line) is read too. The reading runs in the trusted grader, outside every time
limit, so its work is budgeted and linear in the code's length; a cell that cannot be read is
said (:class:`NotRead`), never taken to name nothing.
"""

from __future__ import annotations

import ast
from typing import Any, Dict, FrozenSet, Iterable, Iterator, List, Optional, Set, Tuple


class NotRead(Exception):
    """A piece of code could not be read: it does not compile even as IPython reads it, or the
    transform or the parser failed on it (``MemoryError`` on ``"-" * 100000``,
    ``RecursionError``, the work budget): what it names is unknown, a person reads it."""


class _DoesNotCompile(NotRead):
    """A syntax error, even as IPython reads the code: the sandbox compiled none of it."""


#: Work (characters parsed and tokenised, plus :data:`_PER_READ` for each piece of code read)
#: that reading a submission may cost beyond reading it once (:class:`Budget`). IPython
#: tokenises the whole cell again after each piece of its syntax it rewrites (200 magic lines in
#: 400 KB: 200 s of CPU), and this reading runs in the trusted grader, outside every limit: the
#: cells past it are flagged. 2 MiB reads 20 ``%time`` lines in a 65 KB cell (about 1 s) and
#: stops a submission at about 8 s.
_WORK = 2 << 20
_PER_READ = 1 << 10
#: The calls IPython writes for a magic; the sandbox's ``get_ipython()`` runs the code of some
#: (``%time``, ``%%capture``...). Every one whose code is Python is read: a flag is for a person.
_MAGIC_CALLS = ("run_cell_magic", "run_line_magic")
#: The magics that only show help (``torch.softmax?`` is ``%pinfo torch.softmax``): their text
#: names what the student looked up, and runs nothing.
_HELP_MAGICS = ("pinfo", "pinfo2", "psearch", "pdef", "pdoc", "psource", "pfile")


class Budget:
    """The work one submission's reading may cost: :func:`for_code` of all the code read
    (one budget for every cell: a budget per cell let 512 cells of 2 KiB magics cost the
    grader minutes)."""

    def __init__(self, chars: int) -> None:
        self.left = chars

    @classmethod
    def for_code(cls, sources: Iterable[str]) -> "Budget":
        """Twice the code's length (reading it once, then its magics' code) and :data:`_WORK`."""
        return cls(2 * sum(map(len, sources)) + _WORK)

    def spend(self, chars: int) -> None:
        self.left -= chars
        if self.left < 0:
            raise NotRead(f"its IPython syntax needs more than {_WORK:,} characters of work "
                          "beyond reading it once")


def _transformer() -> Any:
    """IPython's ``TransformerManager``, or ``None`` where IPython is not installed."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return None
    return TransformerManager


#: How a cell that does not compile was read, as its flag says (IPython's reading, or not).
AS_IPYTHON = "even as IPython reads it"
AS_PYTHON = "read as plain Python (IPython is not installed where it was graded)"


def _ipython(source: str, budget: Budget) -> str:
    """The text IPython compiles for a cell, as the sandbox runs it (``worker._transform``:
    ``TransformerManager().transform_cell``, a text transform that runs nothing), each pass of
    its tokeniser paid for from ``budget``."""
    TransformerManager = _transformer()
    if TransformerManager is None:  # then the sandbox runs plain Python too
        return source

    class Counted(TransformerManager):
        def do_one_token_transform(self, lines):  # type: ignore[no-untyped-def]
            budget.spend(sum(map(len, lines)))
            return super().do_one_token_transform(lines)

    return Counted().transform_cell(source)


def parse(source: str, budget: Optional[Budget] = None) -> ast.AST:
    """The tree of the code IPython makes of a cell (what the sandbox compiles).

    Raises:
        NotRead: the cell does not compile even as IPython reads it (or as plain Python, where
            IPython is not installed and the sandbox runs it so): the sandbox ran none of it
            either, but a person reads it: never "it names nothing"; or the transform or the
            parser failed on it in another way (``MemoryError`` on ``"-" * 100000``,
            ``RecursionError``, the work budget).
    """
    budget = budget or Budget.for_code([source])
    budget.spend(len(source) + _PER_READ)
    try:
        return ast.parse(_ipython(source, budget))
    except NotRead:
        raise
    except SyntaxError as e:
        how = AS_IPYTHON if _transformer() is not None else AS_PYTHON
        raise _DoesNotCompile(f"{type(e).__name__} at line {e.lineno}: {str(e.msg)[:100]}, "
                              f"{how}; the sandbox ran none of it") from None
    except Exception as e:  # MemoryError, RecursionError, anything else of the parser's
        raise NotRead(f"{type(e).__name__}: {str(e)[:100]}".rstrip(": ")) from None


def trees(source: str, budget: Optional[Budget] = None) -> List[ast.AST]:
    """A cell's tree and the trees of the code its magics hold (``%%capture``'s body,
    ``%time``'s line, read as IPython reads them: they share the cell's namespace). A magic's
    text that is not Python (``%pip install x``) is not run as code, and is left out.

    Raises:
        NotRead: the cell itself could not be read (:func:`parse`).
    """
    budget = budget or Budget.for_code([source])
    roots = [parse(source, budget)]
    for root in roots:  # grows as magics are found: no recursion, one budget
        for node in ast.walk(root):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in _MAGIC_CALLS and node.args
                    and all(isinstance(a, ast.Constant) and isinstance(a.value, str)
                            for a in node.args)
                    and node.args[0].value not in _HELP_MAGICS):
                for text in node.args[1:]:  # a line magic's line; a cell magic's line, body
                    try:
                        roots.append(parse(text.value, budget))
                    except _DoesNotCompile:
                        pass  # the sandbox runs no such code (it raises, or it is a no-op)
    return roots


def names_in(source: str) -> Set[str]:
    """Every dotted name and imported module a piece of code mentions, read as IPython runs it
    (:func:`trees`): :func:`collect` over all of it.

    Raises:
        NotRead: it could not be read (it does not compile, or the parser failed on it).
    """
    roots = trees(source)
    nodes = [n for root in roots for n in ast.walk(root)]
    return collect(roots, set(bound(nodes)), aliases_of(nodes))


def collect(roots: Iterable[ast.AST], defined: Set[str], aliases: Dict[str, str]) -> Set[str]:
    """The dotted names and imported modules the code under ``roots`` mentions. Linear in the
    code's length: a long attribute chain (``a.b.b.b...``) is walked once, and its paths keep
    :data:`_PATH_PARTS` parts at most.

    A name the code binds (``defined``: a ``def``, a class, an assignment) is the student's
    own, not delegation; torch's attribute of that name keeps its whole path
    (``F.scaled_dot_product_attention`` in code whose answer is assigned that name), and
    ``getattr(torch, "softmax")`` is read as ``torch.softmax``. ``qkv`` is the course's package
    except where a function assigns it (``qkv = x @ W.T``, a fused projection).
    """
    found: Set[str] = set()
    shadowed: Set[str] = set()
    for root in roots:
        walked = list(_scoped(root))
        inner = {id(n.value) for n, _ in walked
                 if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute)}
        for node, local in walked:
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Attribute):
                found.add(node.attr)
                if id(node) not in inner:  # the top of a chain: its paths, read once
                    _chain(node, defined, aliases, local, found, shadowed)
            elif isinstance(node, ast.Name):
                if node.id not in local:
                    found.add(node.id)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id == "getattr" and len(node.args) >= 2 and \
                    isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                attr = node.args[1].value[:200]
                found.add(attr)
                _chain(ast.Attribute(value=node.args[0], attr=attr), defined, aliases, local,
                       found, shadowed)
    return (found - defined) | shadowed  # the student's own functions are not delegation


#: What opens a scope of local names.
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _locals(fn: ast.AST) -> FrozenSet[str]:
    """The names local to a function: its parameters and what its body assigns."""
    args = getattr(fn, "args", None)
    found: Set[str] = set()
    if args is not None:
        found |= {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        found |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    body = getattr(fn, "body", [])
    stack = list(body) if isinstance(body, list) else [body]
    declared: Set[str] = set()  # ``global h``: h is the module's, assigned or not
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
            continue
        elif isinstance(node, ast.Lambda):
            continue
        elif isinstance(node, _COMPREHENSIONS):
            # a comprehension's targets are its own, not the function's (Python 3); what it
            # reads and a walrus in it are the function's
            stack.extend(child for g in node.generators for child in [g.iter, *g.ifs])
            stack.extend([node.key, node.value] if isinstance(node, ast.DictComp)
                         else [node.elt])
            continue
        stack.extend(ast.iter_child_nodes(node))
    return frozenset(found - declared)


def _outside(fn: ast.AST) -> List[ast.AST]:
    """What a function's definition evaluates where it is defined, not in its own scope: its
    decorators, defaults and annotations (``def f(x, q=qkv)`` reads the package there)."""
    args = fn.args  # type: ignore[attr-defined]
    found: List[ast.AST] = list(getattr(fn, "decorator_list", []))
    found += list(args.defaults) + [d for d in args.kw_defaults if d is not None]
    found += [a.annotation for a in args.posonlyargs + args.args + args.kwonlyargs
              + [a for a in (args.vararg, args.kwarg) if a is not None] if a.annotation]
    returns = getattr(fn, "returns", None)
    return found + ([returns] if returns is not None else [])


def _scoped(root: ast.AST) -> Iterator[Tuple[ast.AST, FrozenSet[str]]]:
    """Every node under ``root`` with the names local to its innermost function (each node
    visited once, and once more to find its function's names)."""
    stack: List[Tuple[ast.AST, FrozenSet[str]]] = [(root, frozenset())]
    while stack:
        node, local = stack.pop()
        yield node, local
        if isinstance(node, _FUNCTIONS):
            outside = _outside(node)
            # an enclosing function's names are local here too (a closure over a fused
            # projection named qkv reads that tensor, not the package)
            inner = local | _locals(node)
            stack.extend((n, local) for n in outside)
            skip = {id(n) for n in outside} | {id(node.args)}  # its defaults are outside
            stack.extend((child, inner) for child in ast.iter_child_nodes(node)
                         if id(child) not in skip)
        elif isinstance(node, _COMPREHENSIONS):
            # a comprehension's targets are its own (``[out for out in ...]``); its first
            # iterable is read where it stands (``[h for h in [h]]`` reads the outer h)
            targets = {t.id for g in node.generators for t in ast.walk(g.target)
                       if isinstance(t, ast.Name)}
            first = node.generators[0].iter
            stack.append((first, local))
            stack.extend((child, local | targets) for child in ast.iter_child_nodes(node)
                         if child is not first)
        else:
            stack.extend((child, local) for child in ast.iter_child_nodes(node))


#: What binds names of its own, as a function does.
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def free(root: ast.AST) -> Iterator[str]:
    """The names ``root``'s code reads that are not local to it (a function's parameters and
    what it assigns, a comprehension's targets): those it looks up where it is defined."""
    for node, local in _scoped(root):
        if isinstance(node, ast.Name) and node.id not in local:
            yield node.id


def bound(nodes: Iterable[ast.AST]) -> Iterable[str]:
    """The names the code binds: functions, classes, and plain names assigned (``f = g``,
    ``f: T = g``, ``(f := g)``, ``f += g``), unpacked targets included."""
    for n in nodes:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield n.name
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            yield n.id


#: Parts of an attribute chain's path kept: the first ones, then ``…`` and the last one (no
#: code a person writes is longer; reading ``a.b.b.b...`` in full costs its length squared).
_PATH_PARTS = 12


def _chain(top: ast.Attribute, defined: Set[str], aliases: Dict[str, str],
           local: FrozenSet[str], found: Set[str], shadowed: Set[str]) -> None:
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
    alias = None if root in local else aliases.get(root)
    package = root == "qkv" and root not in local
    for depth in range(1, len(parts)):
        attr = parts[depth]
        mine = attr in defined and root not in ("self", "cls")
        if not (mine or alias or package):
            continue
        if depth < _PATH_PARTS:
            kept = parts[:depth + 1]
        else:
            kept = parts[:_PATH_PARTS - 2] + ["…", attr]
        path = ".".join(kept)
        # torch.softmax inside the student's own ``def softmax``: the attribute is torch's,
        # not theirs, so it keeps its whole dotted name (the exercise's name alone is not
        # delegation; its module's is).
        if mine and (package or root != "qkv"):  # a local qkv's attributes are a tensor's
            shadowed.add(path)
        if alias:  # q.Block after `import qkv as q`: qkv.Block
            path = alias + path[len(root):]
        if path.startswith("qkv.") and (alias or package):  # which of the course's names
            found.add(path)


def aliases_of(nodes: Iterable[ast.AST]) -> Dict[str, str]:
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
