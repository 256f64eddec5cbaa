"""The regrade scan's second pass: what ordinary tensor code never writes.

:mod:`._regrade_scan` lists machinery by name (``sys._getframe``, ``gc``...), and a name can be
built at run time: ``getattr(t, "tb_" + "frame")``, ``"{0.__traceback__}".format(e)``, an
import through ``chr`` codes, ``vars(obj)[name]``, ``type(name, bases, {"__del__": f})``. The
scan is the regrade's one detector the student's code cannot reach (it runs in the regrade's own
process, on the cell's text), so this pass is conservative: it flags every *way of reaching*
things by a computed name, every dunder attribute beyond the few a class needs, every string
that spells a dunder or a frame attribute, every import outside :data:`ALLOWED_IMPORTS`, and
any use of ``os``, ``sys`` or ``io`` (the set-up cell binds ``os`` and ``sys``: through them an
answer reaches the process's descriptors, its files and its memory). No model answer writes
any of these (a test keeps it so); an honest student who does gets a flag to look at, not a
lost point.

Identifiers need no normalising here: Python's parser applies NFKC to them already
(``ｇｃ`` arrives as ``gc``), and a string is not normalised by ``getattr`` either.
"""

from __future__ import annotations

import ast
import re
from typing import Callable, Mapping, Optional

#: Attributes of frames, tracebacks and generators (as strings too: names built for getattr).
FRAME_ATTRIBUTES = frozenset({"f_back", "f_locals", "f_globals", "f_builtins", "f_code",
                              "f_trace", "tb_frame", "gi_frame", "cr_frame", "ag_frame",
                              "_getframe", "_current_frames", "exc_info"})

#: Modules an answer may import without a flag (and their submodules, unless private).
ALLOWED_IMPORTS = frozenset({"torch", "math", "numpy", "typing", "dataclasses", "functools",
                             "itertools", "collections", "einops", "__future__"})
# Parts of allowed packages that read or write files, load or compile code.
_CODE_OR_FILES = {"torch.load": "files", "torch.save": "files", "torch.from_file": "files",
                  "torch.jit": "exec", "torch.compile": "exec", "torch.hub": "exec",
                  "torch.package": "exec", "torch.utils": "exec", "torch.classes": "exec",
                  "torch.storage": "files", "numpy.load": "files", "numpy.save": "files",
                  "numpy.fromfile": "files", "numpy.memmap": "files", "numpy.ctypeslib": "ctypes",
                  "numpy.lib": "files", "torch.backends": "torch-private"}
_FILE_METHODS = {"tofile", "fromfile", "from_file", "_new_shared", "_share_filename_cpu_",
                 "data_ptr", "untyped_storage", "_cdata"}
#: Modules that give the process itself: any use of these names is a flag.
PROCESS_MODULES = frozenset({"os", "sys", "io", "posix", "_io", "nt"})
# Dunder attributes a class of an answer's needs (``super().__init__``, a name for messages).
_PLAIN_DUNDERS = {"__init__", "__name__", "__qualname__", "__doc__", "__module__", "__class__"}
_DUNDER = re.compile(r"__[A-Za-z]\w*__")
# Built-ins that reach attributes, names or classes by a string or a dict.
_DYNAMIC_BUILTINS = {"getattr", "setattr", "delattr", "hasattr", "vars", "globals", "locals",
                     "dir", "memoryview", "help", "input"}
_ALWAYS = {"getattr": 1, "setattr": 1, "delattr": 1, "hasattr": 1}  # arg index of the name

Add = Callable[[Optional[str], ast.AST, str], None]


def import_flag(module: str) -> Optional[str]:
    """The flag an import of ``module`` raises in this pass (the first pass names most)."""
    parts = module.split(".")
    if parts[0] in PROCESS_MODULES:
        return "system"
    if parts[0] not in ALLOWED_IMPORTS:
        return "imports"
    if any(p.startswith("_") and not p.startswith("__") for p in parts[1:]):
        return "torch-private" if parts[0] == "torch" else "imports"
    return dotted_flag(module)


def dotted_flag(dotted: str) -> Optional[str]:
    """Flags of an attribute chain on a module (``torch.sys.modules``, ``torch.jit.load``)."""
    parts = dotted.split(".")
    if parts[0] in PROCESS_MODULES or any(p in PROCESS_MODULES or p == "builtins"
                                          for p in parts[1:]):
        return "system"  # torch.os, numpy.sys...: a module reached through another
    for n in range(len(parts), 1, -1):
        flag = _CODE_OR_FILES.get(".".join(parts[:n]))
        if flag:
            return flag
    return None


def _string_flag(value: str) -> Optional[str]:
    """A string that spells a dunder or a frame attribute: a name built for ``getattr``,
    ``format`` or ``__import__``."""
    if any(d not in _PLAIN_DUNDERS for d in _DUNDER.findall(value)):
        return "internals"
    words = set(re.findall(r"[A-Za-z_]\w*", value))
    return "frames" if words & FRAME_ATTRIBUTES else None


def strict_scan(tree: ast.AST, aliases: Mapping[str, str], add: Add) -> None:
    """Flag, through ``add(keyword, node, what)``, what ordinary tensor code never writes.

    Args:
        tree: the cell's syntax tree.
        aliases: names bound to modules (the set-up cell's and the cell's own imports).
        add: records a flag (``keyword`` None: nothing).
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(import_flag(a.name), node, f"import {a.name}")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            add("imports" if node.level else import_flag(module), node, f"from {module} import")
            for a in node.names:
                add(dotted_flag(f"{module}.{a.name}") if not node.level else None, node, a.name)
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and node.attr not in _PLAIN_DUNDERS:
                add("internals", node, f".{node.attr}")
            add("files" if node.attr in _FILE_METHODS else None, node, f".{node.attr}")
        elif isinstance(node, ast.Name):
            if aliases.get(node.id, "").split(".")[0] in PROCESS_MODULES:
                add("system", node, node.id)
            if node.id in _DYNAMIC_BUILTINS:
                add(_builtin_flag(node, tree), node, node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            text = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            add(_string_flag(text), node, f"the string {text[:40]!r}")
        elif isinstance(node, ast.Call):
            _call(node, add)
        elif isinstance(node, ast.MatchClass):  # case C(f_back=x) reads x = subject.f_back
            for attr in node.kwd_attrs:
                add(_string_flag(attr) or ("dynamic" if attr.startswith("_") else None),
                    node, f"case ...({attr}=...)")
    _dotted_chains(tree, aliases, add)


def _builtin_flag(node: ast.Name, tree: ast.AST) -> Optional[str]:
    """``getattr(x, "name")`` with a literal name is the first pass's; every other use of a
    built-in that reaches things by a string (or passes it around) is ``dynamic``."""
    for parent in ast.walk(tree):
        if isinstance(parent, ast.Call) and parent.func is node and node.id in _ALWAYS:
            index = _ALWAYS[node.id]
            literal = len(parent.args) > index and isinstance(parent.args[index], ast.Constant)
            return None if literal and isinstance(parent.args[index].value, str) else "dynamic"
    return "dynamic"


def _call(node: ast.Call, add: Add) -> None:
    """``"...".format(...)`` with a field that reads attributes or items, a format string
    built at run time, and ``type(name, bases, namespace)`` (a class without a class body)."""
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in ("format", "format_map"):
        if isinstance(func.value, ast.Constant) and isinstance(func.value.value, str):
            fields = re.findall(r"\{([^{}:!]*)", func.value.value)
            add("dynamic" if any(re.search(r"[.\[]", f) for f in fields) else None, node,
                "a format field that reads an attribute")
        else:
            add("dynamic", node, ".format on a string built at run time")
    if isinstance(func, ast.Name) and func.id == "type" and len(node.args) == 3:
        add("dynamic", node, "type(name, bases, namespace)")


def _dotted_chains(tree: ast.AST, aliases: Mapping[str, str], add: Add) -> None:
    """Attribute chains on module names: a module reached through another, files, code."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        parts, base = [node.attr], node.value
        while isinstance(base, ast.Attribute):
            parts.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name) and base.id in aliases:
            dotted = ".".join([aliases[base.id], *reversed(parts)])
            add(dotted_flag(dotted), node, dotted)
