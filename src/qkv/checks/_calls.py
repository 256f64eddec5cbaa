"""Watching every call the student's code makes, at any depth: :class:`CallWatch`.

A profile function (:func:`sys.setprofile`) sees each Python function called and each
built-in called from Python, however deeply nested, under whatever name it was imported,
and even when torch's own modes are switched off. While the student's code runs it refuses:

- any function of the course package (:mod:`qkv` and :mod:`qkv.checks`), also a fresh
  copy loaded from disk (recognised by its code, see :mod:`._integrity`), except the
  harness's own code (:func:`harness`);
- any built-in, torch operator (``torch.ops...``) or library function (torch, numpy,
  scipy, ...) whose name matches the exercise's :class:`~._exercise.Forbidden` patterns;
- what only serves to get around the checks: frames and the garbage collector's object
  lists, switching the watch off, starting threads or processes, torch's mode stacks
  (taken off from outside torch), TorchScript and ``torch.compile``.
"""

from __future__ import annotations

import builtins
import sys
from types import CodeType, FrameType
from typing import Any, Callable, Dict, FrozenSet, Optional


from . import _integrity
from ._call_table import (
    _LIBRARY_DIRS,
    _COMPILE_FILE,
    _COMPILE_NAMES,
    _TORCH_COMPILE,
    _OPCALLS,
    _FRAMES,
    _LIBRARY_ONLY,
    _LIBRARY_ONLY_BUILTINS,
    holds_frame,
    _REFUSED,
    _library_name,
    _builtin_name,
    _called_name,
)
from ._exercise import Forbidden

_getattr = builtins.getattr
_id = builtins.id
_setprofile = sys.setprofile
_getprofile = sys.getprofile
_settrace = sys.settrace
_gettrace = sys.gettrace

class DelegationError(RuntimeError):
    """Raised inside the student's code when it calls something the exercise forbids."""


@_integrity.harness
def from_library(frame: Any) -> bool:
    """Whether ``frame`` runs code of an installed library (torch, the standard library, ...)."""
    return frame is not None and frame.f_code.co_filename.startswith(_LIBRARY_DIRS + ("<frozen",))


_COURSE = object()  # a verdict's marker: the course's code, allowed under a helper only


@_integrity.harness
def within(frame: Any, allow: FrozenSet[CodeType], _course=_integrity.course_code) -> bool:
    """Whether ``frame`` runs (through the course's code only) inside an allowed helper.

    Walks out through the course's own frames: a helper's internals are allowed, but not
    the course's code called from the student's code that a helper called back.
    """
    while frame is not None:
        code = frame.f_code
        if code in allow:
            return True
        if _course(code) is None:
            return False
        frame = frame.f_back
    return False


class CallWatch:
    """The profile function of one guarded run; :meth:`start` and :meth:`stop` bracket it.

    Args:
        forbid: what the exercise blocks besides the course package (whose harness code,
            marked with :func:`._integrity.harness`, is allowed).
        trip: ``trip(message)`` records the refusal and raises.
        allow: code of reference functions the student's code may call (the exercise's
            helpers, :mod:`._helpers`), with whatever of the course they call in turn ...
        reach: ... as long as it is in ``reach`` (what the helpers name,
            :func:`._helpers.reachable`; not the exercise's reference handed to a helper).
    """

    def __init__(self, forbid: Forbidden, trip: Callable[[str], None],
                 allow: FrozenSet[CodeType] = frozenset(),
                 reach: FrozenSet[CodeType] = frozenset()) -> None:
        self._forbid = forbid
        self._trip = trip
        self._allow = allow
        self._reach = reach
        self._code_names = {f.__code__: name for f, name in forbid.names.items()
                            if isinstance(_getattr(f, "__code__", None), CodeType)}
        self._builtin_names = {_id(f): name for f, name in forbid.names.items()}
        self._keep = list(forbid.names)
        self._seen: Dict[int, Any] = {}
        self._seen_keep: list = []
        self._cseen: Dict[str, Optional[str]] = {}
        self._saved = (None, None)
        self.hook = self._make_hook()

    def _classify(self, code: CodeType) -> Any:
        """``None`` (allowed), a refusal message, or a marker for a check at each call."""
        own = _integrity.course_code(code)
        if own is not None:
            if code in self._allow:
                return None
            return (_COURSE, f"calls {own}") if self._allow else f"calls {own}"
        if code in _OPCALLS:
            return _OPCALLS
        if code in _LIBRARY_ONLY:
            return _LIBRARY_ONLY
        name = self._code_names.get(code)
        if name is not None:
            return f"calls {name}"
        lib = _library_name(code)
        if lib is None:
            return None
        if code is _TORCH_COMPILE or (code.co_filename == _COMPILE_FILE
                                      and code.co_qualname.startswith(_COMPILE_NAMES)):
            return "compiles code (torch.compile); the checks run your code as it is written"
        if self._forbid.matches(_called_name(code)):
            return f"calls {lib}"
        return None

    def _builtin(self, fn: Any) -> Optional[str]:
        name = self._builtin_names.get(_id(fn))
        if name is not None:
            return f"calls {name}"
        qual = _getattr(fn, "__qualname__", "") or ""
        if qual in self._cseen:
            return self._cseen[qual]
        verdict = f"calls {_builtin_name(fn)}" if self._forbid.matches(qual) else None
        self._cseen[qual] = verdict
        return verdict

    def _make_hook(self) -> Callable[[Any, str, Any], None]:
        seen, keep, classify, builtin = self._seen, self._seen_keep, self._classify, self._builtin
        library = from_library
        inner: Dict[int, bool] = {}  # code id -> called from the checks' own code
        internal = _integrity.internal
        # The hook's own code is the course's: it runs as a profile function, unwatched.
        refused, trip, forbid, allow = _REFUSED, self._trip, self._forbid, self._allow
        reach = self._reach
        frame_type, sequences = FrameType, (tuple, list)  # a frame's usual carriers, checked inline

        def hook(frame, event, arg):
            try:
                look(frame, event, arg)
            except DelegationError:
                raise
            except Exception:  # noqa: BLE001 (a fault of the watch's own must not fail an answer)
                pass

        def look(frame, event, arg):
            if event == "call":
                code = frame.f_code
                verdict = seen.get(_id(code), seen)
                if verdict is seen:
                    verdict = seen[_id(code)] = classify(code)
                    keep.append(code)
                if verdict is None:
                    return
                if type(verdict) is tuple:  # the course's code: only under an allowed helper
                    if code not in reach or not within(frame.f_back, allow):
                        trip(verdict[1])
                elif verdict is _OPCALLS:
                    caller = frame.f_back.f_code
                    if inner.get(_id(caller)) or internal(caller):
                        return  # the dispatch guard running an operator it has checked
                    op = frame.f_locals.get("self")
                    name = str(_getattr(op, "_qualified_op_name", None)
                               or _getattr(op, "_name", ""))
                    if forbid.matches(name):
                        trip(f"calls torch.ops.{name.replace('::', '.')}")
                elif verdict is _LIBRARY_ONLY:
                    if not library(frame.f_back):
                        trip(f"{_LIBRARY_ONLY[code]}; the checks do not allow it while your code "
                             f"runs")
                else:
                    trip(verdict)
            elif event == "c_call":
                caller = frame.f_code
                ours = inner.get(_id(caller))
                if ours is None:
                    ours = inner[_id(caller)] = internal(caller)
                    keep.append(caller)
                if ours:
                    return
                why = refused.get(_id(arg))
                if why is not None:
                    trip(f"{why}; the checks do not allow it while your code runs")
                elif _id(arg) in _LIBRARY_ONLY_BUILTINS and not library(frame):
                    trip(f"{_LIBRARY_ONLY_BUILTINS[_id(arg)]}; the checks do not allow it while "
                         f"your code runs")
                else:
                    verdict = builtin(arg)
                    if verdict is not None:
                        trip(verdict)
            elif event == "return" and (type(arg) is frame_type or (
                    type(arg) in sequences and holds_frame(arg))):
                caller = frame.f_back
                if caller is not None and not library(caller) and not internal(caller.f_code):
                    trip(f"{_FRAMES} (a frame returned by {frame.f_code.co_qualname}); the checks "
                         f"do not allow it while your code runs")

        return hook

    @_integrity.harness
    def start(self) -> None:
        """Install the watch (and put a trace function aside: it would run unwatched)."""
        self._saved = (_getprofile(), _gettrace())
        _settrace(None)
        _setprofile(self.hook)

    @_integrity.harness
    def stop(self) -> bool:
        """Remove the watch, restore what was there; whether it was still installed."""
        intact = _getprofile() is self.hook
        _setprofile(self._saved[0])
        _settrace(self._saved[1])
        return intact

