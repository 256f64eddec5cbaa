"""The regrade's static scan: what an answer cell's code reaches for, read from its syntax tree.

``qkv regrade`` flags an answer that names machinery an exercise has no use for: the call
stack, the garbage collector, ``sys.modules``, ``builtins``, torch's operator registry and
private modules, the course's own packages, files, ``importlib``, ``ctypes``, new processes,
ways out of the process, and assignments to a module's attributes (patching torch or the
checks). Nothing is run: the scan reads the code, so it sees what the code *says*, however the
run went (the running child reports what the code *did*, see :mod:`._regrade_child`).

A flag is ``(keyword, detail)``: a short keyword from :data:`KEYWORDS` and where it was seen.
The model answers of every assignment raise none (a test keeps it so).
"""

from __future__ import annotations

import ast
from typing import Dict, List, Mapping, Optional, Tuple

from ._regrade_scan_strict import strict_scan

Flag = Tuple[str, str]

# keyword -> what it means, for the summary and the instructors' page.
KEYWORDS = {
    "frames": "reads the call stack (sys._getframe, inspect, traceback, f_back, f_locals)",
    "gc": "searches the garbage collector's objects",
    "sys.modules": "reads or changes sys.modules",
    "builtins": "reaches builtins (__builtins__, __import__, the builtins module)",
    "torch.ops": "calls torch's operator registry (torch.ops)",
    "torch-private": "uses a private part of torch (torch._C, torch._refs, ...)",
    "qkv": "imports the course's reference package qkv",
    "checks": "reaches the checks (qkv.checks)",
    "files": "opens or locates files (open, __file__, pathlib, glob, os.listdir)",
    "importlib": "loads modules by hand (importlib)",
    "ctypes": "uses ctypes",
    "exit": "ends or signals the process (os._exit, sys.exit, os.kill, signal)",
    "subprocess": "starts a process or thread (subprocess, os.system, multiprocessing, threading)",
    "tracing": "installs a trace, profile or audit hook",
    "exec": "runs code built at run time (exec, eval, compile, runpy, marshal)",
    "internals": "reads or rewrites a function's internals (__code__, __globals__, __subclasses__)",
    "patches": "assigns to a module's attributes (patching torch, qkv or Python)",
    "modes": "installs a torch function or dispatch mode (torch.overrides)",
    "subclass": "subclasses torch.Tensor, a number type or str (to pass comparisons)",
    "torch-attention": "names torch's attention (scaled_dot_product_attention, MultiheadAttention)",
    "kernels": "registers kernels for torch's operators (torch.library)",
    "kernel": "changes how the notebook's kernel runs cells (get_ipython)",
    "system": "uses os, sys or io (the process itself: its descriptors, files, memory)",
    "imports": "imports a module no exercise needs (outside torch, math, numpy, typing, "
               "dataclasses, functools, itertools, collections, einops)",
    "dynamic": "reaches attributes or names by a string built at run time (getattr with a "
               "computed name, vars, globals, a format field, type(name, bases, namespace))",
    "hooks": "leaves code for Python or torch to call later (a warning or exception with its "
             "own __str__, __del__, weakref.finalize, gc.callbacks, nn.Module global hooks, "
             "saved-tensor hooks)",
}

# Modules whose import alone is a flag (a dotted name also matches its submodules).
_MODULES = {
    "inspect": "frames", "traceback": "frames", "gc": "gc", "builtins": "builtins",
    "importlib": "importlib", "ctypes": "ctypes", "subprocess": "subprocess",
    "multiprocessing": "subprocess", "threading": "subprocess", "_thread": "subprocess",
    "concurrent": "subprocess", "signal": "exit", "qkv": "qkv", "qkv.checks": "checks",
    "pathlib": "files", "glob": "files", "shutil": "files", "runpy": "exec", "marshal": "exec",
    "pickle": "exec", "torch.ops": "torch.ops", "torch._C": "torch-private",
    "torch.overrides": "modes", "torch.utils._python_dispatch": "modes",
    "torch.library": "kernels", "IPython": "kernel", "ipykernel": "kernel",
}
# Dotted names (after resolving import aliases) that are flags wherever they appear.
_DOTTED = {
    "sys.modules": "sys.modules", "sys._getframe": "frames", "sys._current_frames": "frames",
    "sys.exit": "exit", "os._exit": "exit", "os.kill": "exit", "os.abort": "exit",
    "os.system": "subprocess", "os.popen": "subprocess", "os.fork": "subprocess",
    "os.posix_spawn": "subprocess", "os.listdir": "files", "os.scandir": "files",
    "os.walk": "files", "os.open": "files", "os.path": "files", "io.open": "files",
    "sys.settrace": "tracing", "sys.setprofile": "tracing", "sys.addaudithook": "tracing",
    "torch.ops": "torch.ops", "torch.library": "kernels", "weakref.finalize": "hooks",
    "torch.autograd.graph.saved_tensors_hooks": "hooks", "gc.callbacks": "hooks",
}
# Names of torch's global hooks (nn.Module's, autograd's): flags wherever they appear.
_HOOK_NAMES = ("register_module_", "saved_tensors_hooks", "register_multi_grad_hook",
               "_global_forward", "_global_backward")
# Methods Python calls on its own (a finalizer, formatting a warning or an exception): a class
# of an answer's that defines one leaves code to run after the guard is off.
_CALLED_LATER = {"__del__", "__str__", "__repr__", "__format__", "__class__", "__eq__",
                 "__index__", "__float__", "__bool__", "__len__", "__iter__"}
_TORCH_ATTENTION = {"scaled_dot_product_attention", "MultiheadAttention",
                    "multi_head_attention_forward"}
_SUBCLASSED = {"torch.Tensor", "float", "int", "complex", "str"}  # what a comparison could be fooled by
_PREFIXES = {"os.exec": "subprocess", "os.spawn": "subprocess"}
# Attribute names that are flags on any object.
_ATTRIBUTES = {
    **{a: "frames" for a in ("f_back", "f_locals", "f_globals", "f_code", "tb_frame", "gi_frame",
                             "cr_frame", "ag_frame", "_getframe", "_current_frames",
                             "currentframe")},  # logging's and inspect's hand back a frame
    **{a: "internals" for a in ("__code__", "__closure__", "__globals__", "__defaults__",
                                "__kwdefaults__", "__subclasses__")},
    "__builtins__": "builtins", "__file__": "files",
}
# Bare names that are flags when used.
_NAMES = {"open": "files", "__file__": "files", "__import__": "builtins",
          "__builtins__": "builtins", "exec": "exec", "eval": "exec", "compile": "exec",
          "exit": "exit", "quit": "exit", "breakpoint": "tracing", "get_ipython": "kernel"}
# What the set-up cell of every assignment binds before the answers run (see setup_cell.py).
SETUP_NAMES = {"torch": "torch", "math": "math", "qkv": "qkv", "os": "os", "sys": "sys",
               "subprocess": "subprocess", "importlib": "importlib", "nn": "torch.nn",
               "F": "torch.nn.functional"}


def _module_flag(module: str) -> Optional[str]:
    """The flag an import of ``module`` raises: its own entry or its closest parent's."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        flag = _MODULES.get(".".join(parts[:n]))
        if flag:
            return flag
    if parts[0] == "torch" and any(p.startswith("_") and not p.startswith("__") for p in parts):
        return "torch-private"
    return None


def _dotted(node: ast.AST, aliases: Mapping[str, str]) -> Optional[str]:
    """``torch.ops.aten`` for an attribute chain on a module name (aliases resolved), else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *reversed(parts)])


def _dotted_flag(name: str) -> Optional[str]:
    for n in range(name.count(".") + 1, 0, -1):
        head = ".".join(name.split(".")[:n])
        flag = _DOTTED.get(head) or (_module_flag(head) if n > 1 else None)
        if flag:
            return flag
    if name.startswith("torch.") and name.rsplit(".", 1)[-1] in _TORCH_ATTENTION:
        return "torch-attention"
    return next((f for p, f in _PREFIXES.items() if name.startswith(p)), None)


def _aliases(tree: ast.AST, known: Mapping[str, str], flags: List[Flag]) -> Dict[str, str]:
    """Names bound to modules (the set-up's and the code's own imports); flags the imports."""
    aliases = dict(known)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                aliases[a.asname or top] = a.name if a.asname else top
                _add(flags, _module_flag(a.name), node, f"import {a.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                aliases[a.asname or a.name] = full
                _add(flags, _module_flag(full) or _dotted_flag(full), node,
                     f"from {node.module} import {a.name}")
    return aliases


def _add(flags: List[Flag], keyword: Optional[str], node: ast.AST, what: str) -> None:
    if keyword:
        flags.append((keyword, f"line {getattr(node, 'lineno', '?')}: {what}"))


def _patch_target(node: ast.AST, aliases: Mapping[str, str]) -> Optional[str]:
    """The module attribute an assignment target writes (``torch.Tensor.allclose``), if any."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return _dotted(node, aliases)
    return None


def scan(source: str, known: Mapping[str, str] = SETUP_NAMES) -> List[Flag]:
    """The flags an answer cell's source raises, in order of appearance, each keyword once.

    Args:
        source: the cell's code.
        known: names already bound to modules when the cell runs (the set-up cell's).

    Returns:
        ``(keyword, detail)`` pairs; none for code that does not parse (it cannot run either).
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    flags: List[Flag] = []
    aliases = _aliases(tree, known, flags)
    strict_scan(tree, aliases, lambda keyword, node, what: _add(flags, keyword, node, what))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            dotted = _dotted(node, aliases)
            _add(flags, _dotted_flag(dotted) if dotted else None, node, dotted)
            _add(flags, _ATTRIBUTES.get(node.attr), node, dotted or f".{node.attr}")
            _add(flags, "hooks" if node.attr.startswith(_HOOK_NAMES) else None, node,
                 dotted or f".{node.attr}")
        elif isinstance(node, ast.Name):
            _add(flags, _NAMES.get(node.id) or (
                "hooks" if node.id.startswith(_HOOK_NAMES) else None), node, node.id)
        elif isinstance(node, ast.ClassDef):
            bases = [_dotted(b, aliases) or getattr(b, "id", None) for b in node.bases]
            subclassed = next((b for b in bases if b in _SUBCLASSED), None)
            _add(flags, "subclass" if subclassed else None, node,
                 f"class {node.name}({subclassed})")
            later = sorted(f.name for f in node.body if isinstance(
                f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name in _CALLED_LATER)
            _add(flags, "hooks" if later else None, node, f"class {node.name} defines {later}")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                written = _patch_target(target, aliases)
                _add(flags, "patches" if written else None, node, f"assigns {written}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            first = node.args[0]
            if node.func.id in ("setattr", "delattr") and _dotted(first, aliases):
                _add(flags, "patches", node, f"{node.func.id}({_dotted(first, aliases)}, ...)")
            if node.func.id == "getattr" and len(node.args) > 1 and isinstance(
                    node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                attr = node.args[1].value
                base = _dotted(first, aliases)
                _add(flags, (_dotted_flag(f"{base}.{attr}") if base else None)
                     or _ATTRIBUTES.get(attr), node, f"getattr(..., {attr!r})")
    return _first_of_each(flags)


def _first_of_each(flags: List[Flag]) -> List[Flag]:
    """Each keyword once (its first sighting, by line), in line order."""
    seen: Dict[str, Flag] = {}
    for keyword, detail in sorted(flags, key=lambda f: _line(f[1])):
        seen.setdefault(keyword, (keyword, detail))
    return list(seen.values())


def _line(detail: str) -> int:
    head = detail.split(":")[0].replace("line ", "")
    return int(head) if head.isdigit() else 0
