"""A failing check reaches the notebook as an error: the kernel's error path, restored.

nbgrader scores a test cell by its outputs: an ``error`` output is zero points, none is
full points. In a Jupyter kernel the notebook can change what happens to an exception
that leaves a cell: ``get_ipython().set_custom_exc((BaseException,), swallow)`` makes
IPython hand it to the notebook's handler instead of showing it, and replacing the
shell's ``showtraceback``, the display hook's session or ``sys.stdout`` (flushed on the
way) can drop the error message. Every check would then "pass".

:func:`record` (when :mod:`qkv.checks` is imported, in the set-up cell) notes the shell's
error path; :func:`restore` puts it back, before every test cell (the audit hook) and when
a check ends. Outside IPython (a script, the regrade) there is nothing to do.
"""

from __future__ import annotations

import sys
from typing import Any, List, Tuple

from ._integrity import harness, state

# What an exception leaving a cell goes through, on the shell and on its display hook.
_SHELL = ("custom_exceptions", "CustomTB", "showtraceback", "_showtraceback", "_get_exc_info",
          "InteractiveTB", "showsyntaxerror", "displayhook")
_HOOK = ("session", "pub_socket", "topic", "parent_header")
_SAVED: List[Tuple[Any, str, Any]] = state([])  # (owner, name, value)
_MISSING = object()


def _note(owner: Any, names: Tuple[str, ...]) -> None:
    """Record ``owner``'s attributes ``names`` (the instance's own, or absent) and, for each
    class of its type's MRO that defines one, the class's."""
    here = getattr(owner, "__dict__", {})
    for n in names:
        _SAVED.append((owner, n, here.get(n, _MISSING)))
        for cls in type(owner).__mro__:
            if n in vars(cls):
                _SAVED.append((cls, n, vars(cls)[n]))


def record() -> None:
    """Note the shell's error path (nothing outside IPython)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or _SAVED:
        return
    _note(shell, _SHELL)
    hook = getattr(shell, "displayhook", None)
    _note(hook, _HOOK)
    session = getattr(hook, "session", None)
    if session is not None:
        _note(session, ("send",))
    _SAVED.append((sys, "stdout", sys.stdout))


@harness
def restore(_saved=_SAVED, _missing=_MISSING, _type=type, _setattr=setattr,
            _dict=vars) -> List[str]:
    """Put the error path back as recorded; the names that had changed."""
    changed = []
    for owner, name, value in _saved:
        try:
            here = _dict(owner)
            if _type(owner) is type or owner is sys:
                if here.get(name, _missing) is not value:
                    _setattr(owner, name, value)  # a class or sys: its own attribute
                    changed.append(name)
            elif value is _missing:
                if name in here:
                    del here[name]
                    changed.append(name)
            elif here.get(name, _missing) is not value:
                here[name] = value
                changed.append(name)
        except Exception:  # noqa: BLE001 (a broken shell must not break the check)
            pass
    return changed
