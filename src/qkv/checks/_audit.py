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
import importlib._bootstrap
import os
import sys
from types import CodeType, ModuleType
from typing import Callable, Optional, Set

from . import _dispatcher, _integrity, _kernel
from ._calls import _LIBRARY_DIRS, from_library
from ._integrity import _CHECK_MODULES, _CODES, _FUNCS, _QKV_DIR, _codes, harness, heal, note

_RUN = _integrity.state([])  # (thread id, trip) while a student's code runs
CHECKING = _integrity.state([0])  # > 0 while a check runs (its Session), in any part of it
_CHECK_NAMES: Set[str] = _integrity.state(set())
_BEFORE = _integrity.state([None, None])  # trace and profile functions when the checks came
_IMPORTERS = tuple((owner, name, getattr(owner, name)) for owner, name in (
    (builtins, "__import__"), (importlib._bootstrap, "_handle_fromlist")))
_WHY = {
    "sys._getframe": "reads the call stack", "sys._current_frames": "reads the call stack",
    "gc.get_objects": "searches the garbage collector's objects",
    "gc.get_referrers": "searches the garbage collector's objects",
    "gc.get_referents": "searches the garbage collector's objects",
    "sys.settrace": "installs a trace function", "sys.setprofile": "switches the checks' watch off",
    "sys.addaudithook": "installs an audit hook", "subprocess.Popen": "starts a process",
    **{e: "starts a process" for e in ("os.system", "os.fork", "os.forkpty", "os.posix_spawn",
                                       "os.exec", "os.spawn")},
}
_MODULE_FILES = (".py", ".pyc", ".so", ".pth", ".pyd")
# Where installed libraries live (the standard library's zip included): their files are
# public, and a right answer's lazy import may read them (importlib.metadata does).
_LIBRARIES = _LIBRARY_DIRS + tuple(p for p in sys.path if p.endswith((".zip", ".egg")))
# Attribute reads that hand out a frame or what a function holds (Python audits them as
# object.__getattr__): the way to the guard's own objects.
_FRAMES = {"tb_frame", "gi_frame", "cr_frame", "ag_frame", "__defaults__", "__kwdefaults__"}
# Refused only when the student's own code asks (libraries read frames for their own reasons:
# torch.library records where it is called from, tracebacks are formatted).
_FROM_CELL = {"sys._getframe", "sys._current_frames", "object.__getattr__", "gc.get_objects",
              "gc.get_referrers", "gc.get_referents"}


@harness
def _calling_frame():
    """The Python frame whose call raised the event being audited (the hook's caller)."""
    _integrity._BUSY[0] = True  # sys._getframe is audited too
    try:
        # This function, _from_library or _from_importer, _refusal, the hook, then the caller.
        return sys._getframe(4)
    finally:
        _integrity._BUSY[0] = False


@harness
def _from_library() -> bool:
    return from_library(_calling_frame())


@harness
def _from_importer() -> bool:
    frame = _calling_frame()
    return frame is not None and frame.f_code.co_filename.startswith("<frozen importlib")


@harness
def _public_file(path: str, _realpath=os.path.realpath, _libraries=_LIBRARIES,
                 _qkv=_QKV_DIR) -> bool:
    """Whether ``path`` (links and ``..`` resolved) is an installed library's, not the course's."""
    _integrity._BUSY[0] = True  # resolving links must not be audited as the student's
    try:
        real = _realpath(path)
    finally:
        _integrity._BUSY[0] = False
    return (real.startswith(_libraries) or real in _libraries) and not real.startswith(_qkv)


class Refused(RuntimeError):
    """What the audit hook refuses: a change to the checks, or a way around one."""


@harness
def _on_exec(code: CodeType, _codes=_codes, _course=_CODES, _names=_CHECK_NAMES, _heal=heal,
             _note=note, _any=builtins.any, _settrace=sys.settrace, _gettrace=sys.gettrace,
             _setprofile=sys.setprofile, _getprofile=sys.getprofile, _before=_BEFORE,
             _importers=_IMPORTERS, _getattr=getattr, _setattr=setattr) -> None:
    """Refuse running a copy of the course's code; heal before code that uses a check."""
    try:
        copy = _any(c in _course for c in _codes(code))
    except Exception:  # noqa: BLE001 (never break a program's exec over a fault here)
        copy = False
    if copy:
        raise Refused("this executes a copy of the course's code (qkv); the checks refuse it")
    if not _names.isdisjoint(code.co_names):
        _note(_heal())
        # The import statement of the test cell itself goes through these two.
        for owner, name, original in _importers:
            if _getattr(owner, name, None) is not original:
                _setattr(owner, name, original)
        # Nor may a trace or profile function set by the notebook run in a test cell: it could
        # rewrite the check's local variables (its seed, say) before the check protects itself.
        # (One set before the checks were imported, a debugger's or coverage's, stays.)
        if _gettrace() is not _before[0]:
            _settrace(_before[0])
        if _getprofile() is not _before[1]:
            _setprofile(_before[1])
        # ... nor may the kernel swallow the test cell's error (IPython's custom_exc).
        _kernel.restore()


@harness
def _refusal(event: str, args: tuple, _why=_WHY, _str=str, _isinstance=builtins.isinstance,
             _files=_MODULE_FILES, _public=_public_file, _frames=_FRAMES, _from_cell=_FROM_CELL,
             _qkv=_QKV_DIR) -> Optional[str]:
    """Why the student's code may not do what raised ``event``; None when it may.

    A fault here must not break what every program audits (imports, opening files): it
    refuses nothing rather than raise.
    """
    try:
        why = _why.get(event) or ("uses ctypes" if event.startswith("ctypes.") else None)
        if event == "object.__getattr__":
            why = (f"reads a frame or a function's internals ({args[1]})"
                   if len(args) > 1 and args[1] in _frames else None)
        if event == "open" and args and _isinstance(args[0], _str) and (
                not args[0].endswith(_files) or args[0].startswith(_qkv)):
            why = f"opens the file {args[0]}"
            if args[0].endswith(_files) and _from_importer():
                why = None  # the import system loading a module of the course
            elif _public(args[0]):
                why = None  # a library reading its own data (importlib.metadata, zipimport)
        if why is not None and event in _from_cell and _from_library():
            why = None
        return why
    except Exception:  # noqa: BLE001
        return None


@harness
def _outsider(_getframe=sys._getframe, _harness=_integrity._HARNESS,
              _course=os.path.dirname(_QKV_DIR.rstrip(os.sep)), _busy=_integrity._BUSY) -> bool:
    """Whether the code that raised the event is the notebook's (not the checks', the
    course's tools' or an installed library's)."""
    _busy[0] = True
    try:
        frame = _getframe(3)  # this function, _tracing, the hook, then the caller
    finally:
        _busy[0] = False
    return frame is not None and frame.f_code not in _harness and not (
        frame.f_code.co_filename.startswith(_course) or from_library(frame))


@harness
def _tracing(event: str, _checking=CHECKING) -> None:
    """Refuse the notebook's audit hooks (any time: one cannot be removed, and it would run
    inside every check) and trace or profile functions (while a check runs: code of the
    notebook's that runs there after the guard is off, a warning's message formatted, say,
    could install one that rewrites the harness's variables)."""
    if event == "sys.addaudithook" and _outsider():
        raise Refused("the checks do not allow a notebook's own audit hook")
    if _checking[0] and event in ("sys.settrace", "sys.setprofile") and _outsider():
        raise Refused(f"{event} while a check runs; the checks do not allow it")


@harness
def _hook(event: str, args: tuple, _busy=_integrity._BUSY, _run=_RUN, _funcs=_FUNCS,
          _mods=_CHECK_MODULES, _ident=_thread.get_ident, _id=builtins.id,
          _isinstance=builtins.isinstance, _on_exec=_on_exec, _refusal=_refusal,
          _tracing=_tracing) -> None:
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
        why = _refusal(event, args)
        if why is not None:
            _run[-1][1](f"{why}; the checks do not allow it while your code runs")
    if event.startswith("sys.set") or event == "sys.addaudithook":
        _tracing(event)


@harness
def register(trip: Callable[[str], None], _run=_RUN, _ident=_thread.get_ident) -> None:
    """While the student's code runs in this thread, refused events call ``trip`` (which raises)."""
    _run.append((_ident(), trip))


@harness
def unregister(trip: Callable[[str], None], _run=_RUN, _ident=_thread.get_ident) -> bool:
    """End :func:`register`'s effect; whether its registration was still intact."""
    intact = _run == [(_ident(), trip)]
    _run.clear()
    return intact


def protect(package: ModuleType) -> None:
    """Record the course (once), then install the hook; call at the end of the package's import."""
    if _CHECK_NAMES:
        return
    _CHECK_NAMES.update(n for n in package.__all__ if n.startswith("check_"))
    _CHECK_NAMES.add(package.__name__)
    _BEFORE[:] = [sys.gettrace(), sys.getprofile()]
    _integrity.record(package)
    _dispatcher.guard_registrations()
    _kernel.record()
    sys.addaudithook(_hook)
