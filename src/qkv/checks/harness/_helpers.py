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
back. What the reference helpers call is not noticed as a forbidden call
(:class:`._notice.CallNotice` is paused inside them).

A student's own helper may take more than the reference's (an extra option, a dict with more
keys than it reads): a call the reference refuses goes to the student's own helper; and an
answer that raises on the course's helpers (it relies on its own returning a contiguous tensor,
say) is run again on its own (:func:`on_helpers`), so a right answer built on a right helper
of the student's own design is never refused for the course's narrower one.
"""

from __future__ import annotations

import contextlib
import functools
from types import FunctionType
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

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


def _names_used(student: Any) -> set:
    """The names the student's code uses (its functions' and their nested code's
    ``co_names``: globals and attributes alike, so a helper's name used only as an attribute
    is bound too, for nothing, and removed again)."""
    found: set = set()
    codes = [f.__code__ for f in _functions(student)]
    while codes:
        code = codes.pop()
        found.update(code.co_names)
        codes += [c for c in code.co_consts if hasattr(c, "co_names")]
    return found


def _swaps(student: Any, helpers: Mapping[str, Callable[..., Any]]
           ) -> List[Tuple[Dict[str, Any], str, Callable[..., Any]]]:
    """``(namespace, name, reference)`` for each of ``helpers`` the notebook defines (and has
    not bound to the reference itself), or that the student's code calls though the notebook
    never defined it (its cell did not run: a syntax error): what :func:`reference_helpers`
    binds. A helper whose cell failed costs its own test, not also this one."""
    if not helpers:
        return []
    used = _names_used(student)
    return [(ns, name, reference) for ns in namespaces(student)
            for name, reference in helpers.items()
            if (name in ns and ns[name] is not reference) or (name not in ns and name in used)]


def on_helpers(student: Any, helpers: Mapping[str, Callable[..., Any]],
               attempt: Callable[[], Any], paused: Optional[Callable[[], Any]] = None) -> Any:
    """``attempt()`` with the reference's helpers bound (:func:`reference_helpers`); where it
    raises and the notebook defines one of ``helpers``, ``attempt()`` again on the student's
    own: the answer relies on its own (a contiguous result, an extra value returned) and runs
    as in the notebook; its error, if it raises again, is the one shown."""
    try:
        with reference_helpers(student, helpers, paused):
            return attempt()
    except Exception:
        if not any(name in ns for ns, name, _ in _swaps(student, helpers)):
            raise  # no helper of the student's own to run it on
        return attempt()


@contextlib.contextmanager
def reference_helpers(student: Any, helpers: Mapping[str, Callable[..., Any]],
                      paused: Optional[Callable[[], Any]] = None) -> Iterator[None]:
    """While inside, the student's code finds the reference under each helper's name.

    Names the notebook defines are bound, and names the student's code calls that the
    notebook lacks (the helper's cell raised before defining it); all of them are put back
    (or removed) on the way out, also when the check fails.

    Args:
        paused: a context manager factory entered around each call of a reference helper
            (the forbidden-call notice is paused there).
    """
    saved = []
    try:
        for ns, name, reference in _swaps(student, helpers):
            saved.append((ns, name, ns.get(name, _ABSENT)))
            ns[name] = _quietly(reference, paused, ns.get(name))
        yield
    finally:
        for ns, name, value in reversed(saved):
            if value is _ABSENT:
                ns.pop(name, None)
            else:
                ns[name] = value


_ABSENT = object()  # a helper the notebook never defined: removed again afterwards


def _quietly(reference: Callable[..., Any], paused: Optional[Callable[[], Any]],
             own: Any = None) -> Callable[..., Any]:
    """``reference`` in the student's namespace: run with the notice paused, and a call it
    refuses (it raises) handed to the student's ``own`` helper, whose error, if it raises
    too, is the one the student sees (it is about their code)."""
    @functools.wraps(reference)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            with paused() if paused is not None else contextlib.nullcontext():
                return reference(*args, **kwargs)
        except Exception:
            if not callable(own):
                raise
        return own(*args, **kwargs)
    return run
