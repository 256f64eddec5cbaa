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
(:attr:`Helpers.codes`, see :class:`._calls.CallWatch`); nothing else of :mod:`qkv`.
"""

from __future__ import annotations

import contextlib
from types import FunctionType
from typing import Any, Callable, Dict, FrozenSet, Iterator, List, Mapping

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


class Helpers:
    """The helpers of one exercise: name -> reference function."""

    def __init__(self, helpers: Mapping[str, Callable[..., Any]]) -> None:
        self.helpers = dict(helpers)
        #: The code of each reference helper: the guard lets the student's code call these.
        self.codes: FrozenSet[Any] = frozenset(f.__code__ for f in self.helpers.values())


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
