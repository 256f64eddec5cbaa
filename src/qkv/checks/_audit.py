"""The checks' audit hook: what a notebook may not do to the checks, or while one runs.

An audit hook (:func:`sys.addaudithook`) is called by Python itself for sensitive
operations, in every thread, and cannot be removed once installed. :func:`protect`
installs one when :mod:`qkv.checks` is imported, after :func:`._integrity.record`.
At any time it refuses replacing the code or defaults of the course's functions,
changing a check module's class, and executing a copy of the course's code; before
executing code that names a check (a test cell) it undoes any change to the checks
(:func:`._integrity.heal`). While the student's code runs in a check (:data:`RUN`)
it also refuses frames, the garbage collector's object lists, files that are not Python
modules, ``ctypes``, audit hooks of the notebook's own, and new processes.
"""

from __future__ import annotations

import _thread
import builtins
import sys
from types import CodeType, ModuleType
from typing import Set

from . import _integrity
from ._integrity import _CHECK_MODULES, _CODES, _FUNCS, _codes, heal, note

#: (thread id, trip) while a student's code runs (see :meth:`._guard.Guard.start`).
RUN = _integrity.state([])
ident = _thread.get_ident
_CHECK_NAMES: Set[str] = _integrity.state(set())
_WHY = {
    "sys._getframe": "reads the call stack", "sys._current_frames": "reads the call stack",
    "gc.get_objects": "searches the garbage collector's objects",
    "gc.get_referrers": "searches the garbage collector's objects",
    "gc.get_referents": "searches the garbage collector's objects",
    "sys.settrace": "installs a trace function", "sys.setprofile": "switches the checks' watch off",
    "sys.addaudithook": "installs an audit hook", "subprocess.Popen": "starts a process",
    "os.system": "starts a process", "os.fork": "starts a process", "os.forkpty": "starts a process",
    "os.posix_spawn": "starts a process", "os.exec": "starts a process",
    "os.spawn": "starts a process",
}
_MODULE_FILES = (".py", ".pyc", ".so", ".pth", ".pyd")
# Attribute reads that hand out a frame (Python audits them as object.__getattr__).
_FRAMES = {"tb_frame", "gi_frame", "cr_frame", "ag_frame"}


class Refused(RuntimeError):
    """What the audit hook refuses: a change to the checks, or a way around one."""


def _on_exec(code: CodeType, _codes=_codes, _course=_CODES, _names=_CHECK_NAMES, _heal=heal,
             _note=note, _any=builtins.any) -> None:
    """Refuse running a copy of the course's code; heal before code that uses a check."""
    if _any(c in _course for c in _codes(code)):
        raise Refused("this executes a copy of the course's code (qkv); the checks refuse it")
    if not _names.isdisjoint(code.co_names):
        _note(_heal())


def _hook(event: str, args: tuple, _busy=_integrity._BUSY, _run=RUN, _funcs=_FUNCS,
          _mods=_CHECK_MODULES, _ident=_thread.get_ident, _id=builtins.id,
          _isinstance=builtins.isinstance, _on_exec=_on_exec, _why=_WHY, _str=str,
          _files=_MODULE_FILES, _frames=_FRAMES) -> None:
    if _busy[0]:
        return
    if event == "exec" and args and _isinstance(args[0], CodeType):
        _on_exec(args[0])
    elif event == "object.__setattr__" and len(args) > 1:
        if _id(args[0]) in _funcs and args[1] in ("__code__", "__defaults__", "__kwdefaults__"):
            raise Refused(f"the course's functions cannot be changed ({args[1]})")
        if _id(args[0]) in _mods and args[1] == "__class__":
            raise Refused("the checks' modules cannot be changed")
    if _run and _run[-1][0] == _ident():
        why = _why.get(event) or ("uses ctypes" if event.startswith("ctypes.") else None)
        if event == "object.__getattr__" and len(args) > 1 and args[1] in _frames:
            why = f"reads a frame ({args[1]})"
        if event == "open" and args and _isinstance(args[0], _str) and not args[0].endswith(_files):
            why = f"opens the file {args[0]}"
        if why is not None:
            _run[-1][1](f"{why}; the checks do not allow it while your code runs")


def protect(package: ModuleType) -> None:
    """Record the course (once), then install the hook; call at the end of the package's import."""
    if _CHECK_NAMES:
        return
    _CHECK_NAMES.update(n for n in package.__all__ if n.startswith("check_"))
    _CHECK_NAMES.add(package.__name__)
    _integrity.record(package)
    sys.addaudithook(_hook)
