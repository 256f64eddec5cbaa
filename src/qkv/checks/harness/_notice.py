"""A teaching notice for a call the exercise asks the student not to make.

While the student's code runs, :class:`CallNotice` (a ``torch.overrides.TorchFunctionMode``,
torch's public API for seeing torch calls) records the torch functions it calls that the
exercise forbids (``torch.softmax`` in the softmax exercise, ``F.scaled_dot_product_attention``
in an attention exercise). :func:`reference_names` looks, without running anything, at the
names the student's functions use: one bound to the course's own version of the exercise
(``qkv.softmax``) is noticed too. A notice teaches; it never fails a check and it is no
defence (code in a notebook can change anything in its own kernel).
"""

from __future__ import annotations

import contextlib
import dis
import sys
import weakref
from functools import partial
from types import CodeType, FunctionType, ModuleType
from typing import Any, Callable, Dict, Iterator, List, Mapping, Sequence, Set, Tuple

from torch import Tensor
from torch.overrides import TorchFunctionMode

from ._exercise import Forbidden
from ._helpers import _functions

__all__: list = []


class CallNotice(TorchFunctionMode):
    """Records the names of the forbidden torch functions called while it is on."""

    def __init__(self, forbid: Forbidden) -> None:
        super().__init__()
        self.forbid = forbid
        self.calls: List[str] = []
        self._paused = 0

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None
                           ) -> Any:
        if not self._paused:
            name = self.forbid.name_of(func)
            if name and name not in self.calls:
                self.calls.append(name)
        return func(*args, **(kwargs or {}))

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Nothing is recorded inside (a reference helper the exercise gives the student)."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1


class _Widths(TorchFunctionMode):
    """Records the first floating-point ``(..., L, S)`` result a torch call computes from
    ``sources`` (the query and the key) out of tensors none of which is ``(..., L, S)``
    already: scores, not a bias or a mask made whole from a factory (``torch.zeros(L, S)``),
    from positions (``arange(S) - arange(L)[:, None]`` in floats), a float mask exponentiated
    into a factor, or a bias's logsumexp, which the exercise allows. A softmax (or an exp) of
    theirs over a whole ``(..., L, S)`` tensor is scores too, however it was filled."""

    def __init__(self, L: int, S: int, sources: Sequence[Tensor]) -> None:
        super().__init__()
        self.size = (L, S)
        self.seen: Any = None
        self._from: Dict[int, Any] = {}
        for t in sources:
            self._mark(t)

    def _mark(self, t: Any) -> None:
        if isinstance(t, Tensor):
            self._from[id(t)] = weakref.ref(t)

    def _derived(self, t: Tensor) -> bool:
        ref = self._from.get(id(t))
        return ref is not None and ref() is t

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None
                           ) -> Any:
        out = func(*args, **(kwargs or {}))
        if self.seen is None:
            inputs = [t for a in (*args, *(kwargs or {}).values())
                      for t in (a if isinstance(a, (tuple, list)) else (a,))
                      if isinstance(t, Tensor)]
            outs = out if isinstance(out, (tuple, list)) else (out,)
            name = getattr(func, "__name__", "")
            if not any(self._derived(t) for t in _carriers(name, args, inputs)):
                return out
            # written in place (buf[..., j0:j1] = s, buf.copy_(s), out=buf): buf is scores
            changed = (args[:1] if name == "__setitem__" or name.endswith("_") else ()) + \
                ((kwargs or {}).get("out"),)
            for t in (*outs, *changed):
                self._mark(t)
            if name == "__setitem__" and self._wide(args[0]):
                self.seen = tuple(args[0].shape)
            if name in _OVER_A_ROW and inputs and self._wide(inputs[0]):
                self.seen = tuple(inputs[0].shape)
            elif inputs and not any(self._wide(t, any_dtype=True) for t in inputs):
                self.seen = next((tuple(t.shape) for t in outs if self._wide(t)), None)
        return out

    def _wide(self, t: Any, any_dtype: bool = False) -> bool:
        return isinstance(t, Tensor) and (any_dtype or t.is_floating_point()) and \
            t.dim() >= 2 and tuple(t.shape[-2:]) == self.size


#: Calls whose result holds none of a tensor argument's values: the argument gives only a
#: dtype, a device or a shape (``query.new_zeros(L, S)``, ``torch.zeros_like(query)``).
_TEMPLATES = ("new_zeros", "new_ones", "new_full", "new_empty", "zeros_like", "ones_like",
              "full_like", "empty_like")
#: Calls whose result holds the values of their first argument only, the others giving a
#: dtype, a device or a shape (``rel.to(query)``, ``mask.type_as(query)``).
_LIKE = ("to", "type_as", "view_as", "reshape_as", "expand_as")


def _carriers(name: str, args: tuple, inputs: List[Tensor]) -> List[Tensor]:
    """The tensor arguments of a call named ``name`` whose values its result may hold."""
    if name in _TEMPLATES:
        return []
    if name in _LIKE:
        return [a for a in args[:1] if isinstance(a, Tensor)]
    return inputs


#: What a softmax over a row computes: over a whole (L, S) tensor, it is the scores'. (A
#: maximum or a sum over a mask's float copy, or over a bias, is no score: it counts a query's
#: allowed keys, or finds one with none; only scores are exponentiated.)
_OVER_A_ROW = ("softmax", "log_softmax", "_softmax", "exp", "exp_", "exp2", "logsumexp")


def whole_scores(call: Callable[[], Any], L: int, S: int,
                 sources: Sequence[Tensor]) -> Tuple[Any, Any]:
    """``call()``'s result, and the shape of the first ``(..., L, S)`` floating-point tensor a
    torch function computed from ``sources`` (the query and the key) during it (``None`` if
    none did; a mask or a bias made whole never counts): an exercise that visits the keys a
    chunk at a time never needs one. A teaching aid, like the notice."""
    watch = _Widths(L, S, sources)
    with watch:
        out = call()
    return out, watch.seen


def _codes(code: CodeType) -> Iterator[CodeType]:
    yield code
    for c in code.co_consts:
        if isinstance(c, CodeType):
            yield from _codes(c)


_LOADS = ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE")


def _names(code: CodeType) -> Tuple[Set[str], Dict[str, Set[str]], Set[str]]:
    """The global names a function's code reads, the attribute names it reads on each name
    (``{"qkv": {"softmax"}, "qkv.lookup": {...}}`` for ``qkv.softmax`` and
    ``qkv.lookup.softmax``; ``scores.softmax`` is an attribute of ``scores``, not of the
    course) and the modules it imports."""
    globals_: Set[str] = set()
    attributes: Dict[str, Set[str]] = {}
    imports: Set[str] = set()
    for c in _codes(code):
        chain = None  # the dotted name the instruction before loaded, if any
        for ins in dis.get_instructions(c):
            if ins.opname in ("EXTENDED_ARG", "NOP", "CACHE"):
                continue
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                globals_.add(ins.argval)
            if ins.opname in ("LOAD_ATTR", "LOAD_METHOD", "IMPORT_FROM"):
                base = chain if ins.opname != "IMPORT_FROM" else "<import>"
                attributes.setdefault(base or "", set()).add(ins.argval)
                chain = f"{chain}.{ins.argval}" if chain and ins.opname != "IMPORT_FROM" else None
                continue
            chain = ins.argval if ins.opname in _LOADS and isinstance(ins.argval, str) else None
            if ins.opname == "IMPORT_NAME":
                imports.add(ins.argval)
    return globals_, attributes, imports


def _module_attributes(module: ModuleType, name: str,
                       attributes: Mapping[str, Set[str]]) -> List[Any]:
    """What the code reads on ``module`` (bound to ``name``): ``name.x`` and ``name.sub.x``."""
    found = []
    for base, attrs in attributes.items():
        if base != name and not base.startswith(name + "."):
            continue
        owner: Any = module
        for part in base.split(".")[1:]:
            owner = getattr(owner, part, None)
        found += [getattr(owner, a, None) for a in attrs] if owner is not None else []
    return found


def _contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a cell not filled yet
        return None


def _course(value: Any) -> bool:
    """Whether ``value`` is the course's code: :mod:`qkv`'s, or the checks' own (whose
    exercises hold the references), but for the public checks a notebook calls."""
    module = getattr(value, "__module__", "") or ""
    name = getattr(value, "__name__", "") or ""
    return module.split(".")[0] == "qkv" and not (
        module.startswith("qkv.checks") and (name.startswith("check_") or name in _PUBLIC))


#: The checks' names a notebook uses besides ``check_*``.
_PUBLIC = ("in_notebook", "CheckFailed", "CheckResult")


def reference_names(student: Any, forbid: Forbidden, helpers: Mapping[str, Any]) -> List[str]:
    """``["qkv.softmax"]``: the course's functions and classes the student's code names,
    except the helpers the exercise gives (the course's code does the work it asks for),
    torch's functions whose names the exercise forbids, and the student's own functions it
    asks not to build on (``"your linear_attention"``).

    It reads the names the student's functions use (and the functions of theirs those
    name, up to :data:`_MOST` of them), and the classes a student's class inherits from.
    """
    found: List[str] = []
    allowed = set(helpers) | {getattr(h, "__name__", "") for h in helpers.values()}
    kind = student if isinstance(student, type) else type(student)
    for base in kind.__mro__[1:] if not isinstance(student, FunctionType) else ():
        if _course(base) and base.__name__ not in allowed:
            found.append(f"qkv.{base.__name__}")
    todo, seen = list(_functions(student)), set()
    while todo and len(seen) < _MOST:
        f = todo.pop()
        if f.__code__ in seen:
            continue
        seen.add(f.__code__)
        globals_, attributes, imports = _names(f.__code__)
        named = [(n, f.__globals__.get(n)) for n in globals_]
        named += [(n, sys.modules.get(n)) for n in imports]
        named += [(n, _contents(c)) for n, c in zip(f.__code__.co_freevars, f.__closure__ or ())]
        every = set().union(*attributes.values()) if attributes else set()
        for name, value in named:
            while isinstance(value, partial):  # partial(qkv.softmax, dim=-1) is qkv.softmax
                value = value.func
            candidates = []
            if isinstance(value, ModuleType) and value.__name__.split(".")[0] == "qkv":
                # What is read on this name; a module imported inside the function may be
                # bound to another name (import ... as), so all its code's attributes then.
                candidates = _module_attributes(value, name, attributes) if name in globals_ or \
                    any(b == name or b.startswith(name + ".") for b in attributes) else \
                    [getattr(value, a, None) for a in every]
            elif isinstance(value, (dict, list, tuple)):  # a table of the checks' objects
                candidates = list(value.values() if isinstance(value, dict) else value)[:_MOST]
            elif value is not None:
                candidates = [value]
            for c in candidates:
                said = _said(c, forbid, allowed)
                if said and said not in found:
                    found.append(said)
                elif isinstance(c, FunctionType) and _students(c):
                    if c.__name__ in forbid.own and f"your {c.__name__}" not in found:
                        found.append(f"your {c.__name__}")
                    todo.append(c)  # a function of the student's own, called by the answer
    return found


#: How many of the student's functions :func:`reference_names` reads at most.
_MOST = 50


def _students(f: FunctionType) -> bool:
    module = str(f.__globals__.get("__name__", "")).split(".")[0]
    return module not in ("qkv", "torch", "builtins", "functools", "numpy")


def _said(c: Any, forbid: Forbidden, allowed: set) -> Any:
    """How a notice names ``c`` when the exercise asks not to call it, else ``None``."""
    name = getattr(c, "__name__", "")
    if isinstance(c, (FunctionType, type)) and _course(c) and name not in allowed:
        return f"qkv.{name}"
    if not isinstance(c, (FunctionType, type, ModuleType)) and _course(type(c)) and \
            type(c).__module__.startswith("qkv.checks"):  # a check's own object, its reference
        return "the checks' own exercises (qkv.checks: their references)"
    if str(getattr(c, "__module__", "")).split(".")[0] == "torch" and name and \
            forbid.matches(name):  # torch's ready-made version, by its name
        return f"{c.__module__}.{name}"
    return None


#: How a note on what the answer built (not called) begins (see :class:`._harness.Noted`).
BUILT = "built "


def notice_text(calls: List[str]) -> str:
    """The notice a result carries, ``""`` when nothing forbidden was called (or built)."""
    if not calls:
        return ""
    built = [c for c in calls if c.startswith(BUILT)]
    called = [c for c in calls if not c.startswith(BUILT)]
    # An earlier answer of the student's own is theirs: the exercise asks for another way.
    asks = ("this exercise asks for another way (read its text)"
            + (", not your earlier answer" if called else "")
            if all(c.startswith("your ") for c in called)
            else "this exercise asks you to write it yourself")
    did = ([f"called {', '.join(called)}"] if called else []) + built
    return (f"you {' and '.join(did)}; {asks} (the check compares results only: this is "
            f"a note for you, and a grader may read it)")
