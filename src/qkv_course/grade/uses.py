"""What a submission's answer uses: the code reached from its name, not every cell's names.

The delegation flags ask what an answer *calls*. The student's code (answer cells and the cells
they added) is read once (:class:`Code`); an answer's names are those of the definitions of its
name (a ``def``, a class, an assignment, an import), then of every name of the student's those
use, and so on: a helper in another cell is read, a scratch cell that compares the answer with
torch's own is not (honest13: one such cell flagged all six tests of 08-efficient). Code that
builds names or code at run time (``exec``, ``__import__``, ``globals()``) or switches torch's
function hooks off (``torch._C.DisableTorchFunction``, which the sandbox's notice sees through)
cannot be followed so: it is named wherever it is (:attr:`Code.unfollowed`), for a person.
"""

from __future__ import annotations

import ast
from typing import Dict, Iterator, List, Sequence, Set, Tuple

from .names import Budget, NotRead, aliases_of, bound, collect, free, trees

#: Builtins that run code or reach names built at run time.
_RUN_TIME = ("exec", "eval", "compile", "__import__", "globals", "vars", "import_module")
#: The same reached as a module's attribute (``importlib.import_module``).
_MODULE_RUN_TIME = ("__import__", "import_module")
#: The module of the builtins: ``builtins.eval`` is eval.
_BUILTINS = ("builtins", "__builtins__")
#: Attributes that reach a function or a module's names by a string, or compile code from one
#: (``fn.__globals__["h"]``, ``torch.__dict__["softmax"]``, TorchScript from a string), as
#: ``sys.modules["qkv"]`` does: a reading of names cannot follow them.
_BY_STRING = ("__globals__", "__dict__", "__builtins__", "__code__", "__closure__",
              "CompilationUnit", "jit", "attrgetter", "methodcaller")


def _hooks(name: str) -> bool:
    """A name of torch's machinery for seeing calls (``DisableTorchFunction``,
    ``_pop_mode``, ``torch._C``): no exercise needs it, and it can hide a call from the
    sandbox's notice."""
    low = name.lower()
    return "torchfunction" in low or "torch_function" in low or low in (
        "_pop_mode", "_push_mode", "_pop_mode_temporarily", "_c")


class Code:
    """The student's code of one submission, read once.

    Args:
        sources: its cells' code, in order, read on one budget (:meth:`.names.Budget.for_code`
            of them all).

    Attributes:
        unread: ``(index in sources, why)`` of each cell that could not be read.
        unfollowed: what the code does that cannot be followed by reading it (``exec``,
            ``torch._C``...), sorted, wherever it is.
    """

    def __init__(self, sources: Sequence[str]) -> None:
        budget = Budget.for_code(sources)
        self.unread: List[Tuple[int, str]] = []
        roots: List[ast.AST] = []
        for i, source in enumerate(sources):
            try:
                roots += trees(source, budget)
            except NotRead as e:
                self.unread.append((i, str(e)))
        nodes = [n for root in roots for n in ast.walk(root)]
        self._defined = set(bound(nodes))
        self._aliases = aliases_of(nodes)
        self._defs: Dict[str, List[ast.AST]] = {}
        for root in roots:
            for node in _module_level(root):
                for name, definition in _definitions(node):
                    self._defs.setdefault(name, []).append(definition)
        # ``global h`` in a function: its assignments to h are the module's (looked for only
        # where the code declares a global: each function's walk is not free)
        functions = nodes if any(isinstance(n, ast.Global) for n in nodes) else ()
        for node in functions:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                declared = {n for g in ast.walk(node) if isinstance(g, ast.Global)
                            for n in g.names}
                for inner in ast.walk(node) if declared else ():
                    for name, definition in _definitions(inner):
                        if name in declared and inner is not node:
                            self._defs.setdefault(name, []).append(definition)
        unfollowed: Set[str] = set()
        for node in nodes:
            # the builtins by their own names (called or not: ``run = exec``), not a method
            # of that name (``model.eval()``, ``re.compile``); the builtins module itself
            # and importlib's import_module wherever they are
            if isinstance(node, ast.Name) and node.id in _RUN_TIME:
                unfollowed.add(f"{node.id}()")
            elif isinstance(node, ast.Attribute) and node.attr in _MODULE_RUN_TIME:
                unfollowed.add(f"{node.attr}()")
            elif isinstance(node, ast.Attribute) and (node.attr in _BY_STRING or (
                    node.attr == "modules" and getattr(node.value, "id", "") == "sys")):
                unfollowed.add("sys.modules" if node.attr == "modules" else node.attr)
            imported = [a.name for a in getattr(node, "names", []) or []
                        if isinstance(a, ast.alias)]
            if "*" in imported:  # ``from qkv.scaling import *`` rebinds what it likes
                unfollowed.add("import *")
            module = getattr(node, "module", None) or ""
            for name in [getattr(node, "id", None), *imported, module]:
                if not isinstance(name, str):
                    continue
                if name in _BUILTINS or name.split(".")[0] in _BUILTINS:
                    unfollowed.add("builtins")
                elif name in _MODULE_RUN_TIME or name.split(".")[0] == "importlib":
                    unfollowed.add("importlib" if name.startswith("importlib") else f"{name}()")
            named = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
            if isinstance(named, str) and _hooks(named):
                unfollowed.add(named)
        self.unfollowed = sorted(unfollowed)

    def uses(self, name: str) -> Set[str]:
        """The names the code reached from ``name`` mentions (:func:`.names.collect`)."""
        picked: List[ast.AST] = []
        seen: Set[str] = set()
        queue = [name]
        while queue:
            current = queue.pop()
            if current in seen:
                continue
            seen.add(current)
            for definition in self._defs.get(current, []):
                picked.append(definition)
                # only the names it looks up outside itself: a local or a parameter named as
                # a scratch cell's variable (out, model) is not that variable (honest14)
                queue += [n for n in free(definition) if n in self._defs and n not in seen]
        return collect(picked, self._defined, self._aliases)


def _module_level(root: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a cell's namespace: everything but what is inside a function, a lambda or
    a class (whose own names are local to it, and read with it)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                 ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _definitions(node: ast.AST) -> List[Tuple[str, ast.AST]]:
    """``(name, code)`` for each name ``node`` binds, with the code that gives it its value."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [(node.name, node)]
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [(t.id, node.value) for target in targets for t in ast.walk(target)
                if isinstance(t, ast.Name)]
    if isinstance(node, ast.NamedExpr):
        return [(node.target.id, node.value)]
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [(t.id, node.iter) for t in ast.walk(node.target) if isinstance(t, ast.Name)]
    if isinstance(node, ast.withitem) and node.optional_vars is not None:
        return [(t.id, node.context_expr) for t in ast.walk(node.optional_vars)
                if isinstance(t, ast.Name)]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [((a.asname or a.name).split(".")[0], node) for a in node.names]
    return []
