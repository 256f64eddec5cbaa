"""Points follow the mistake: a check tests one function, with the reference for its helpers.

Some exercises are written on top of others: assignment 4's ``scaled_dot_product_attention``
calls the student's ``attention_scores`` and ``softmax``, assignment 6's calls their
``causal_mask``, assignment 5's ``MultiHeadAttention`` their ``split_heads`` and
``merge_heads``, assignment 2's ``soft_lookup`` their ``softmax``. Each of those helpers has
its own test cell; a wrong helper must cost that cell's points only, not also those of
every function built on it, and the message must name the function that is wrong.

So an :class:`~._exercise.Exercise` lists its ``helpers`` (the names its assignment invites
the student to call, with the reference for each), and while its check runs the student's
code, :func:`reference_helpers` binds each of those names, where the student's code looks
it up (the module globals of the student's function, or of their class's methods: the
notebook's namespace), to the reference. Afterwards the notebook's own values are put
back. The guard lets the student's code call those reference functions
(:attr:`Helpers.codes`, see :class:`._calls.CallWatch`); nothing else of :mod:`qkv`. Inside a
helper, only the course's code that helper can reach by name (:func:`reachable`) may run: a
helper given a ``functools.partial`` of the exercise's reference as an argument's method (or
its code run with globals of the student's) would otherwise call that reference for them.
"""

from __future__ import annotations

import contextlib
import functools
from types import CodeType, FunctionType, ModuleType
from typing import Any, Callable, Dict, FrozenSet, Iterator, List, Mapping, Set

_MODULES_OF_LIBRARIES = ("torch", "builtins", "qkv")


def _functions(student: Any) -> List[FunctionType]:
    """The student's function, or the functions their class (or callable object) defines."""
    seen = student
    while isinstance(getattr(seen, "__wrapped__", None), FunctionType):
        seen = seen.__wrapped__
    if isinstance(seen, FunctionType):
        return [seen]
    cls = seen if isinstance(seen, type) else type(seen)
    out = []
    for klass in cls.__mro__:
        if (getattr(klass, "__module__", "") or "").split(".")[0] in _MODULES_OF_LIBRARIES:
            continue
        for value in vars(klass).values():
            value = getattr(value, "__func__", getattr(value, "fget", value))
            if isinstance(value, FunctionType):
                out.append(value)
    return out


def namespaces(student: Any) -> List[Dict[str, Any]]:
    """The global namespaces the student's code looks its helpers up in (each once)."""
    out: Dict[int, Dict[str, Any]] = {}
    for f in _functions(student):
        module = str(f.__globals__.get("__name__", "")).split(".")[0]
        if module not in _MODULES_OF_LIBRARIES:  # the reference's own modules stay as they are
            out.setdefault(id(f.__globals__), f.__globals__)
    return list(out.values())


def _codes(code: CodeType) -> Iterator[CodeType]:
    yield code
    for c in code.co_consts:
        if isinstance(c, CodeType):
            yield from _codes(c)


def _named(f: FunctionType) -> Iterator[Any]:
    """What ``f``'s code can name: its globals (and their attributes, for modules and
    classes: ``v.require_float_tensor``), its closure's contents, its defaults."""
    names = {n for c in _codes(f.__code__) for n in c.co_names}
    cells = [c.cell_contents for c in f.__closure__ or () if c.cell_contents is not c]
    for value in (*(f.__globals__.get(n) for n in names), *cells, *(f.__defaults__ or ())):
        yield value
        if isinstance(value, (ModuleType, type)):
            yield from (vars(value).get(n) for n in names)
            if isinstance(value, type):
                yield from vars(value).values()


def reachable(functions: List[Any]) -> FrozenSet[CodeType]:
    """The code of the course's functions that ``functions`` can call, at any depth, by name."""
    seen: Set[CodeType] = set()
    todo = list(functions)
    while todo:
        f = todo.pop()
        f = getattr(f, "__func__", f)  # a method
        if isinstance(getattr(f, "__wrapped__", None), FunctionType):
            todo.append(f.__wrapped__)  # what a decorator wraps (the wrapper is looked at too)
        if isinstance(f, functools.partial):
            todo.extend((f.func, *f.args, *f.keywords.values()))
            continue
        if not isinstance(f, FunctionType) or f.__code__ in seen:
            continue
        if str(f.__globals__.get("__name__", "")).split(".")[0] != "qkv":
            continue  # torch's and Python's own code is the guard's other layers' business
        seen.update(_codes(f.__code__))
        todo.extend(v for v in _named(f) if v is not None)
    return frozenset(seen)


class Helpers:
    """The helpers of one exercise: name -> reference function."""

    def __init__(self, helpers: Mapping[str, Callable[..., Any]]) -> None:
        self.helpers = dict(helpers)
        #: The code of each reference helper: the guard lets the student's code call these.
        self.codes: FrozenSet[Any] = frozenset(f.__code__ for f in self.helpers.values())
        #: The course's code that may run inside them (:func:`reachable`).
        self.reach: FrozenSet[CodeType] = reachable(list(self.helpers.values()))


@contextlib.contextmanager
def reference_helpers(student: Any, helpers: Mapping[str, Callable[..., Any]]
                      ) -> Iterator[Helpers]:
    """While inside, the student's code finds the reference under each helper's name.

    Only names the notebook defines are bound (a student who never wrote the helper gets
    the ``NameError`` they would get anyway); all of them are put back on the way out,
    also when the check fails.
    """
    found = Helpers(helpers)
    saved = []
    try:
        for ns in namespaces(student) if helpers else ():
            for name, reference in found.helpers.items():
                if name in ns and ns[name] is not reference:
                    saved.append((ns, name, ns[name]))
                    ns[name] = reference
        yield found
    finally:
        for ns, name, value in reversed(saved):
            ns[name] = value
