"""The checks cannot be rebound from a notebook: a snapshot taken at import, restored before use.

When :mod:`qkv.checks` is imported (the set-up cell, before any answer runs),
:func:`protect` records everything a verdict depends on: the modules of :mod:`qkv` and
:mod:`qkv.checks` (their entries in ``sys.modules`` and their namespaces), every function
and class defined there (code, defaults, closures, methods), the exercises, and the
namespaces of torch and Python that the reference and the harness use (``torch``,
``torch.Tensor``, ``torch.nn.functional``, ``nn.Module``, ``math``, ``builtins``, ...).
It then makes the check modules read-only and installs an audit hook
(:func:`sys.addaudithook`; an audit hook cannot be removed).

- Rebinding a check or a harness function (``qkv.checks.check_x = f``, on any check
  module) raises; writing the module's ``__dict__``, replacing a module in
  ``sys.modules``, editing an exercise, a closure or a default is undone
  (:func:`heal`) before every test cell (the audit hook sees each cell being executed)
  and at the start of every check, with a note on stdout.
- Replacing a function's code (``f.__code__ = ...``), a module's class, and executing a
  copy of the course's code (``importlib.reload``, a module loaded again from its file)
  are refused outright.
- Changes to torch and Python (``torch.Tensor.allclose = ...``, ``builtins.isinstance =
  ...``) are set aside while a check runs (:class:`._session.Session`) and put back afterwards: the
  reference and the comparisons always run on the originals.
- While the student's code runs (:func:`running`), the hook also refuses frames (tracebacks'
  ``tb_frame``, ``sys._getframe``), the garbage collector's object lists, files that are not
  Python modules, ``ctypes`` and new processes.
"""

from __future__ import annotations

import builtins
import functools
import gc
import os
import sys
from types import CodeType, FunctionType, MappingProxyType, ModuleType
from typing import Any, Callable, Dict, Iterator, List, Optional, Set

_id, _type, _isinstance = builtins.id, builtins.type, builtins.isinstance
_getattr = builtins.getattr
_setattr = object.__setattr__
_QKV_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_HARNESS: Set[CodeType] = set()
_INTERNAL: Set[CodeType] = set()  # harness code that calls no student-given callable
_CODES: Dict[CodeType, str] = {}  # the course's code (compared by content) -> readable name
_SHAPES: Dict[tuple, str] = {}  # the public API's documented code, wherever it stands
_RECORDS: list = []  # what heal() restores, see _record
_CHECK_MODULES: Set[int] = set()
_FUNCS: Set[int] = set()
_BUSY = [False]  # our own repairs are not refused by our own hook
_STATE: Set[int] = set()  # ids of the checks' own changing state, never restored
def _codes(code: CodeType) -> Iterator[CodeType]:
    yield code
    for c in code.co_consts:
        if _isinstance(c, CodeType):
            yield from _codes(c)


def state(obj: Any) -> Any:
    """Mark ``obj`` (a container of the checks) as state that changes: never restored."""
    _STATE.add(_id(obj))
    return obj


def harness(fn: Callable = None, *, calls_student: bool = False) -> Callable:
    """Mark ``fn`` as harness code: it runs inside the guard and may be called there.

    Built-ins it calls are not looked at (it is the checks' own code), unless
    ``calls_student``: it calls what the student gave (a function, a class), which could
    be a built-in itself.
    """
    if fn is None:
        return lambda f: harness(f, calls_student=calls_student)
    codes = list(_codes(fn.__code__))  # with its comprehensions and inner functions
    _HARNESS.update(codes)
    if not calls_student:
        _INTERNAL.update(codes)
    return fn


def internal(code: CodeType) -> bool:
    """Whether ``code`` is harness code calling only what the checks chose (see :func:`harness`)."""
    return code in _INTERNAL


def _shape(code: CodeType) -> tuple:
    """What a function's code says, without where it stands (file, line numbers)."""
    consts = tuple(_shape(c) if _isinstance(c, CodeType) else c for c in code.co_consts)
    return code.co_name, code.co_code, code.co_names, code.co_varnames, consts


def course_code(code: CodeType) -> Optional[str]:
    """The readable name of ``code`` if it is the course's own or a copy of it, else None.

    A copy is recognised by its content: a module loaded again from its file, or a
    function of the public API whose source was executed elsewhere (as long as it keeps
    its docstring: code written independently does not carry the reference's docstring).
    """
    if code in _HARNESS:
        return None
    name = _CODES.get(code)
    if name is None and code.co_filename.startswith(_QKV_DIR):
        name = f"qkv code ({code.co_qualname})"
    if name is None and code.co_consts and _isinstance(code.co_consts[0], str):
        name = _SHAPES.get(_shape(code))
    return name


class _ReadOnly(ModuleType):
    """A check module: its attributes cannot be rebound or deleted."""

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self.__name__} is read-only: a notebook cannot change the checks")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{self.__name__} is read-only: a notebook cannot change the checks")


_NAMESPACES: Set[int] = set()  # filled by record(): see _namespaces


def _namespaces() -> Set[int]:
    """The ids of every module's ``__dict__`` and of ``sys.modules``.

    The harness binds ``vars(builtins)`` as a default argument; recorded as the course's,
    it would be "restored" before every cell, undoing what IPython keeps there (``_``,
    ``display``) and telling an honest notebook that it had changed the checks.
    """
    found = {_id(vars(m)) for m in list(sys.modules.values()) if _isinstance(m, ModuleType)}
    return found | {_id(sys.modules), _id(vars(builtins))}


def _record(obj: Any, name: str, records: list, seen: Set[int]) -> None:
    """Record ``obj`` (reached as ``name``) and what it holds, if it belongs to the course."""
    if _id(obj) in seen or _id(obj) in _STATE or _isinstance(
            obj, (str, bytes, int, float, bool, type(None))):
        return
    seen.add(_id(obj))
    if _isinstance(obj, FunctionType):
        if not obj.__code__.co_filename.startswith(_QKV_DIR):
            return
        cells = tuple(c.cell_contents for c in obj.__closure__ or ())
        records.append(("func", obj, name, (obj.__code__, obj.__defaults__, obj.__kwdefaults__,
                                            cells)))
        _FUNCS.add(_id(obj))
        for c in _codes(obj.__code__):
            _CODES.setdefault(c, name)
        for v in (*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values(), *cells):
            _record(v, name, records, seen)
    elif _isinstance(obj, type):
        if not _getattr(obj, "__module__", "").startswith("qkv"):
            return
        records.append(("class", obj, name, dict(obj.__dict__)))
        for k, v in obj.__dict__.items():
            _record(_getattr(v, "__func__", _getattr(v, "fget", v)), f"{name}.{k}", records, seen)
    elif _isinstance(obj, functools.partial):
        records.append(("partial", obj, name, obj.__reduce__()[2]))
        for v in (obj.func, *obj.args, *obj.keywords.values()):
            _record(v, name, records, seen)
    elif _isinstance(obj, (list, dict, set)):
        if _id(obj) in _NAMESPACES:
            return  # a module's namespace (builtins, bound as a default): not the course's
        if name.startswith("qkv.checks"):  # the reference's containers may be caches
            records.append((_type(obj).__name__, obj, name, obj.copy()))
        for v in (obj.values() if _isinstance(obj, dict) else obj):
            _record(v, name, records, seen)
    elif _isinstance(obj, (tuple, frozenset, MappingProxyType)):
        if _isinstance(obj, MappingProxyType) and name.startswith("qkv.checks"):
            # Read-only only through the proxy: gc.get_referents hands out the dict behind it
            # (an exercise's forbidden names and helpers, the questions' bank).
            for d in gc.get_referents(obj):
                if _type(d) is dict:
                    records.append(("dict", d, name, d.copy()))
        for v in (obj.values() if _isinstance(obj, MappingProxyType) else obj):
            _record(v, name, records, seen)
    elif _getattr(_type(obj), "__module__", "").startswith("qkv.checks") and hasattr(
            _type(obj), "__dataclass_fields__"):
        fields = {f: _getattr(obj, f) for f in _type(obj).__dataclass_fields__}
        fields.update(_getattr(obj, "__dict__", {}))  # what __post_init__ derived, too
        records.append(("fields", obj, name, fields))
        for v in fields.values():
            _record(v, name, records, seen)


def _public_names(qkv: ModuleType) -> Dict[CodeType, str]:
    out = {}
    for n in qkv.__all__:
        obj = _getattr(qkv, n)
        for f in (obj, *(vars(obj).values() if _isinstance(obj, type) else ())):
            code = _getattr(_getattr(f, "__func__", f), "__code__", None)
            if code is not None:
                out.setdefault(code, f"qkv.{n}")
                if code.co_consts and _isinstance(code.co_consts[0], str):
                    _SHAPES.setdefault(_shape(code), f"a copy of qkv.{n}")
    return out


def _restore(kind: str, obj: Any, saved: Any, _zip=zip, _all=all, _len=len, _tuple=tuple,
             _list=list, _isinstance=_isinstance, _getattr=_getattr, _setattr=_setattr,
             _ModuleType=ModuleType, _type=type, _sys=sys, _builtins=vars(builtins)) -> bool:
    """Put ``obj`` back as ``saved`` says; whether anything had changed.

    Everything it uses is bound as a default argument (which a notebook cannot rebind:
    the audit hook refuses it), not looked up in a namespace a notebook could write.
    """
    if kind == "func":
        code, defaults, kwdefaults, cells = saved
        now = (obj.__code__, obj.__defaults__, obj.__kwdefaults__,
               _tuple(c.cell_contents for c in obj.__closure__ or ()))
        if _all(a is b for a, b in _zip(now[:3], saved[:3])) and _all(
                a is b for a, b in _zip(now[3], cells)):
            return False
        obj.__code__, obj.__defaults__, obj.__kwdefaults__ = code, defaults, kwdefaults
        for cell, v in _zip(obj.__closure__ or (), cells):
            cell.cell_contents = v
        return True
    if kind in ("module", "refmodule", "world", "class"):
        # Names added to a class shadow inherited ones; added to a check module, builtins
        # (a module added there is a submodule imported since); added to a module of the
        # reference, only the names of builtins shadow anything (it may cache what it
        # likes); added to torch or Python's modules, nothing that existed. A module's dunder
        # names (Python adds __warningregistry__ when a warning is shown) change nothing.
        now = obj.__dict__
        module = kind in ("module", "refmodule")
        extra = [] if kind == "world" else [k for k in now if k not in saved and not (
            module and (_isinstance(now[k], _ModuleType) or k.startswith("__")
                        or (kind == "refmodule" and k not in _builtins)))]
        changed = [k for k, v in saved.items() if now.get(k, saved) is not v
                   and not (module and k.startswith("__"))]
        for k in extra:
            (_type.__delattr__ if kind == "class" else _ModuleType.__delattr__)(obj, k)
        for k in changed:
            (_type.__setattr__ if kind == "class" else _ModuleType.__setattr__)(obj, k, saved[k])
        return bool(extra or changed)
    if kind == "fields":
        changed = [k for k, v in saved.items() if _getattr(obj, k) is not v]
        for k in changed:
            _setattr(obj, k, saved[k])
        return bool(changed)
    if kind == "partial":
        if obj.__reduce__()[2][:3] == saved[:3]:
            return False
        obj.__setstate__(saved)
        return True
    if kind == "sysmod":
        if _sys.modules.get(saved.__name__) is saved:
            return False
        _sys.modules[saved.__name__] = saved
        return True
    if kind == "set":
        same = obj == saved
    elif kind == "list":
        same = _len(obj) == _len(saved) and _all(a is b for a, b in _zip(obj, saved))
    else:
        same = _len(obj) == _len(saved) and _all(
            k in saved and saved[k] is v for k, v in obj.items())
    if not same:
        obj.clear()
        obj.extend(saved) if kind == "list" else obj.update(saved)
    return not same


def heal(_records=_RECORDS, _restore=_restore, _busy=_BUSY) -> List[str]:
    """Undo every change to the course's code and objects; the names of what had changed."""
    changed = []
    _busy[0] = True
    try:
        for kind, obj, name, saved in _records:
            if _restore(kind, obj, saved):
                changed.append(name)
    finally:
        _busy[0] = False
    return changed


def note(changed: List[str], _print=print, _sorted=sorted, _set=set, _len=len) -> None:
    """Say on stdout (never stderr: nbgrader fails a cell that writes there) what was restored."""
    if changed:
        shown = ", ".join(_sorted(_set(changed))[:5]) + (" ..." if _len(_set(changed)) > 5 else "")
        _print(f"note: this notebook had changed the checks ({shown}); restored before grading")


for _s in (_HARNESS, _INTERNAL, _CODES, _SHAPES, _RECORDS, _CHECK_MODULES, _FUNCS, _BUSY, _STATE,
           _NAMESPACES):
    state(_s)


def record(package: ModuleType) -> None:
    """Take the snapshot (see the module's docstring) and make ``package``'s modules read-only.

    Called once, when ``package`` (:mod:`qkv.checks`) has been imported.
    """
    import qkv
    _NAMESPACES.update(_namespaces())
    _CODES.update(_public_names(qkv))
    records: list = []
    seen: Set[int] = set()
    mods = sorted((n, m) for n, m in sys.modules.items()
                  if (n == "qkv" or n.startswith("qkv.")) and _isinstance(m, ModuleType))
    for n, m in mods:
        records.append(("sysmod", m, n, m))
        ours = n.startswith(package.__name__)
        records.append(("module" if ours else "refmodule", m, n, dict(m.__dict__)))
        for k, v in m.__dict__.items():
            if not k.startswith("__"):
                _record(v, f"{n}.{k}", records, seen)
        if ours:
            _CHECK_MODULES.add(_id(m))
            m.__class__ = _ReadOnly
    _RECORDS.extend(records)
