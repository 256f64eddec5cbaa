"""A check's run in an intact world: :class:`Session`.

The course itself is healed by :func:`._integrity.heal`. What the reference and the harness
rely on outside the course (torch's namespaces, ``torch.Tensor``, ``nn.Module``, ``math``,
``builtins``, ...) is the notebook's to change, so a session only sets its changes aside
while a check runs, and puts them back afterwards: the reference and the comparisons always
run on the originals, and a notebook keeps what it did to its own kernel.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import math
import operator
from typing import Any, List

import torch
import torch.nn.functional

from . import _audit, _integrity, _kernel
from ._integrity import _BUSY, _restore, heal, note
from ._seal import Quiet

# What the reference and the harness rely on outside the course. (Not ``warnings``: the
# harness's own catch_warnings changes it while the student's code runs.)
_WORLD = (torch, torch.nn, torch.nn.functional, torch.special, torch.linalg, math, builtins,
          operator, functools, contextlib, torch.Tensor, torch.nn.Module, torch.nn.Linear,
          torch.nn.Parameter)

# Taken when the checks are imported (the set-up cell), before any answer runs.
_WORLD_SAVED = _integrity.state([(ns, "class" if isinstance(ns, type) else "world",
                                  dict(ns.__dict__)) for ns in _WORLD])


class Session:
    """A check's run: the course healed, torch and Python as they were, no mode of the notebook's.

    On entry the course is healed (with a note); changes a notebook made to torch's and
    Python's namespaces (:data:`_WORLD`) are set aside, and so are the torch function and
    dispatch modes it left on (they would see, and could answer, every comparison), and
    torch's default dtype. On exit everything of the notebook's is put back.
    :meth:`changed` says what moved since entry: the student's code changed it while it ran.
    """

    def __enter__(self, _heal=heal, _note=note, _restore=_restore, _busy=_BUSY) -> "Session":
        _note(_heal())
        self._theirs = []
        _busy[0] = True
        try:
            for ns, kind, saved in _WORLD_SAVED:
                now = dict(ns.__dict__)
                if _restore(kind, ns, saved):
                    self._theirs.append((ns, kind, now))
        finally:
            _busy[0] = False
        self._modes = ([torch._C._pop_torch_function_stack()
                        for _ in range(torch._C._len_torch_function_stack())],
                       [torch._C._pop_torch_dispatch_stack(None)  # None: the top
                        for _ in range(torch._C._len_torch_dispatch_stack())])
        self._dtype = torch.get_default_dtype()
        torch.set_default_dtype(torch.float32)
        # A trace function, signal handler, gc callback, nn.Module hook... of the notebook's
        # would run inside the check, where it could rewrite the harness's variables.
        self._quiet = Quiet()
        self._quiet.set_aside()
        _audit.CHECKING[0] += 1
        return self

    def reseal(self, _heal=heal, _restore=_restore, _busy=_BUSY) -> None:
        """Just before judging: undo, silently, whatever the notebook's code changed since
        the student's code returned (the harness formats its warnings and writes stdout
        after the guard is off, which may run the student's code), and set aside again
        every hook it may have installed meanwhile (:mod:`._seal`)."""
        _heal()
        _busy[0] = True
        try:
            for ns, kind, saved in _WORLD_SAVED:
                _restore(kind, ns, saved)
        finally:
            _busy[0] = False
        while torch._C._len_torch_function_stack():
            torch._C._pop_torch_function_stack()
        while torch._C._len_torch_dispatch_stack():
            torch._C._pop_torch_dispatch_stack(None)
        self._quiet.set_aside()

    def changed(self, _heal=heal, _restore=_restore, _busy=_BUSY, _getattr=getattr) -> List[str]:
        """What moved since entry (and is now put back): the course, torch or Python."""
        moved = _heal()
        _busy[0] = True
        try:
            for ns, kind, saved in _WORLD_SAVED:
                if _restore(kind, ns, saved):
                    moved.append(_getattr(ns, "__qualname__", None)
                                 or _getattr(ns, "__name__", "?"))
        finally:
            _busy[0] = False
        return moved

    def __exit__(self, *exc: Any) -> None:
        _audit.CHECKING[0] -= 1
        self._quiet.put_back()
        _kernel.restore()  # an error leaving the check must reach the notebook as an error
        torch.set_default_dtype(self._dtype)
        for mode in reversed(self._modes[1]):
            torch._C._push_on_torch_dispatch_stack(mode)
        for mode in reversed(self._modes[0]):
            torch._C._push_on_torch_function_stack(mode)
        _BUSY[0] = True
        try:
            for ns, kind, theirs in self._theirs:
                _restore(kind, ns, theirs)
        finally:
            _BUSY[0] = False
