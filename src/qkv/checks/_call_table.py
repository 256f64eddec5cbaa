"""What :class:`._calls.CallWatch` refuses, and how it names what it refuses.

The tables are built once, when the checks are imported: the course's own code is told
apart by its code objects, libraries by the folders they are installed in, built-ins by
their ids (kept alive here, so that an id is never reused while the checks run).
"""

from __future__ import annotations

import _thread
import builtins
import gc
import inspect
import os
import sys
import sysconfig
import traceback
from types import CodeType, FrameType
from typing import Any, Dict, Optional

import torch
import torch._ops
import torch.overrides
import torch.utils._python_dispatch as _pd

_getattr = builtins.getattr
_id = builtins.id

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
# The most specific first: a virtual environment's site-packages lies inside its lib folder.
_LIBRARY_DIRS = tuple(sorted({os.path.join(p, "") for p in (*(
    sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib", "platstdlib")),)},
    key=len, reverse=True))
# torch.compile and what runs a compiled function (torch._dynamo itself also runs for other
# reasons: torch wraps some of its functions in torch._dynamo.disable).
_COMPILE_FILE = os.path.join(_TORCH_DIR, "_dynamo", "eval_frame.py")
_COMPILE_NAMES = ("_TorchDynamoContext", "OptimizeContext", "OptimizedModule", "optimize",
                  "_optimize")

_TORCH_COMPILE = torch.compile.__code__
_OPCALLS = {torch._ops.OpOverload.__call__.__code__, torch._ops.OpOverloadPacket.__call__.__code__}
# What libraries may use but a cell may not (it would reach the guard, or frames): torch's mode
# stacks (the guard's modes are on them) and the standard library's frame helpers. Python
# functions, then built-ins, each with what calling it from a cell amounts to.
_MODES = "reaches torch's modes (the checks' guard among them)"
_FRAMES = "reads the call stack"
_LIBRARY_ONLY: Dict[CodeType, str] = {
    **{f.__code__: _MODES for f in (
        _pd._pop_mode, _pd._push_mode, _pd._disable_current_modes, _pd._get_current_dispatch_mode,
        _pd._get_current_dispatch_mode_stack, torch.overrides._pop_mode,
        torch.overrides._push_mode, torch.overrides._get_current_function_mode,
        torch.overrides._get_current_function_mode_stack)},
    **{f.__code__: f"{_FRAMES} ({f.__module__}.{f.__name__})" for f in (
        inspect.currentframe, inspect.stack, inspect.trace, inspect.getouterframes,
        inspect.getinnerframes, traceback.walk_stack, traceback.walk_tb)},
}
_LIBRARY_ONLY_BUILTINS = {
    **{_id(_getattr(torch._C, n)): _MODES for n in (
        "_pop_torch_function_stack", "_push_on_torch_function_stack", "_pop_torch_dispatch_stack",
        "_push_on_torch_dispatch_stack", "_set_dispatch_mode", "_unset_dispatch_mode",
        "_get_function_stack_at", "_get_dispatch_stack_at", "_get_dispatch_mode")},
    _id(sys._getframe): f"{_FRAMES} (sys._getframe)",
    _id(sys._current_frames): f"{_FRAMES} (sys._current_frames)",
    **{_id(f): "searches the garbage collector's objects"
       for f in (gc.get_objects, gc.get_referrers, gc.get_referents)},
}


def holds_frame(value: Any, depth: int = 2) -> bool:
    """Whether ``value`` is a frame, or a tuple or list (a few items, ``depth`` levels) holding one.

    A library function that hands the student's code a frame (``logging.currentframe``
    returns its caller's) opens the way to the harness's own objects through ``f_back``
    and ``f_locals``, which Python does not audit; :class:`CallWatch` refuses that return.
    """
    if type(value) is FrameType:
        return True
    if depth and isinstance(value, (tuple, list)):  # inspect's FrameInfo is a tuple too
        return any(holds_frame(v, depth - 1) for v in value[:4])
    return False


def _refused() -> Dict[int, str]:
    """Built-ins refused from anywhere while the student's code runs."""
    out = {
        sys.setprofile: "switches the checks' watch off (sys.setprofile)",
        sys.getprofile: "reaches the checks' watch (sys.getprofile)",
        sys.settrace: "installs a trace function (sys.settrace)",
        sys.addaudithook: "installs an audit hook",
        _thread.start_new_thread: "starts a thread",
    }
    for name in ("fork", "forkpty", "system", "posix_spawn", "posix_spawnp", "execv", "execve"):
        if hasattr(os, name):
            out[getattr(os, name)] = f"starts a process (os.{name})"
    if hasattr(_thread, "start_joinable_thread"):
        out[_thread.start_joinable_thread] = "starts a thread"
    return {_id(f): why for f, why in out.items()}


_REFUSED = _refused()
_REFUSED_KEEP = list(_REFUSED)  # the ids above stay valid: the functions are module attributes


def _library_name(code: CodeType) -> Optional[str]:
    """``torch.nn.functional.softmax`` for code in an installed library, else ``None``."""
    path = code.co_filename
    for d in _LIBRARY_DIRS:
        if path.startswith(d):
            rel = path[len(d):].rsplit(".", 1)[0].replace(os.sep, ".")
            if rel.endswith(".__init__"):
                rel = rel[: -len(".__init__")]
            return f"{rel}.{code.co_qualname}"
    return None


def _builtin_name(fn: Any) -> str:
    owner = _getattr(fn, "__self__", None)
    name = _getattr(fn, "__qualname__", None) or _getattr(fn, "__name__", "?")
    if owner is not None and type(owner).__name__ == "module":
        return f"{owner.__name__}.{_getattr(fn, '__name__', name)}"
    module = _getattr(fn, "__module__", None)
    return f"{module}.{name}" if module else name


# A module's forward is named after its class: ``MultiheadAttention.forward`` is attention.
_CLASS_NAMED = {"forward", "_forward", "__call__", "apply"}


def _called_name(code: CodeType) -> str:
    """The name a library function's patterns are matched against.

    The function's own name (with its class's for a ``forward``), not the whole
    qualified name: a right answer may make a library run ``NodeTransformer.visit`` (a
    lazy import of sympy does), which is not a transformer. Module and class bodies
    (no ``CO_OPTIMIZED``) run definitions, not calls, and are never matched.
    """
    if not code.co_flags & inspect.CO_OPTIMIZED:
        return ""
    parts = [p for p in code.co_qualname.split(".") if p != "<locals>"]
    if parts[-1] in _CLASS_NAMED and len(parts) > 1:
        return ".".join(parts[-2:])
    return parts[-1]
