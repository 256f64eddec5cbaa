"""Nothing of the notebook's runs while a check judges: :class:`Quiet` and :func:`freeze`.

The guard covers the student's code while the harness calls it. But Python and torch
also run a notebook's code on their own, later, wherever the interpreter happens to be:
a signal handler (it is even handed the current frame, the harness's), a garbage
collector callback or finalizer, a trace function, a global ``nn.Module`` hook (it runs
inside the reference's ``forward`` and may replace its output), a saved-tensors hook.
And the harness itself touches what the student's code handed back after the guard is
off (a warning's message is formatted, stdout is written). Code that runs there, guard
off, can compute the answer and write it into the tensor the student returned, or find
the expected result in the harness's frames.

So: each result is copied (:func:`freeze`) the moment the guard is off, before anything
of the student's can run, and the verdict is taken on the copy; and :class:`Quiet` sets
all of the above aside when a check starts and again just before it judges (whatever the
student's code installed meanwhile is dropped), and puts the notebook's back at the end.
Everything it calls is captured here, at import (the set-up cell).
"""

from __future__ import annotations

import gc
import signal
import sys
import warnings
from typing import Any, List

import torch
import torch.nn.modules.module as _module

from ._integrity import harness

_Tensor, _type = torch.Tensor, type
_clone, _detach = torch._C.TensorBase.clone, torch._C.TensorBase.detach
_settrace, _setprofile = sys.settrace, sys.setprofile
_gettrace, _getprofile = sys.gettrace, sys.getprofile
_signal, _getsignal, _IGNORE = signal.signal, signal.getsignal, signal.SIG_IGN
_SIGNALS = tuple(signal.valid_signals())
_callable = callable
# Handlers present when the checks were imported (Python's, the kernel's): left alone.
_HANDLERS = {s: _getsignal(s) for s in _SIGNALS}
_CALLBACKS = gc.callbacks  # the list the collector itself reads (the attribute may be rebound)
_gc_on, _gc_enable, _gc_disable = gc.isenabled, gc.enable, gc.disable
# nn.Module's global hooks (register_module_forward_hook, ...): dicts every module call reads.
_MODULE_HOOKS = tuple(v for k, v in vars(_module).items()
                      if k.startswith("_global_") and _type(v) is not bool and hasattr(v, "clear"))
# warnings' functions, which the harness's catch_warnings calls (the module is the notebook's).
_WARNINGS = warnings
_WARNING_FUNCS = {k: v for k, v in vars(warnings).items() if _callable(v)}
_top_saved = torch._C._autograd._top_saved_tensors_default_hooks
_pop_saved = torch._C._autograd._pop_saved_tensors_default_hooks
_push_saved = torch._C._autograd._push_saved_tensors_default_hooks


@harness
def freeze(x: Any) -> Any:
    """A copy of a plain tensor (or a tuple or list of them) that nothing else holds.

    Anything else is returned as it is, untouched: its kind is what fails it, and calling
    its methods would run the student's code.
    """
    if _type(x) is _Tensor:
        return _clone(_detach(x))
    if _type(x) in (tuple, list):
        return _type(x)(freeze(v) for v in x)
    return x


@harness
def _warnings() -> tuple:
    """warnings' functions, its filter list and ``sys.modules`` entry as they were at import."""
    now = vars(_WARNINGS)
    taken = ({k: now.get(k) for k in _WARNING_FUNCS}, now.get("filters"),
             sys.modules.get("warnings"))
    now.update(_WARNING_FUNCS)
    if _type(now.get("filters")) is not list:
        now["filters"] = []
    sys.modules["warnings"] = _WARNINGS
    return taken


@harness
def _signals() -> List[tuple]:
    """Take off every Python signal handler set since the checks were imported."""
    taken = []
    for s in _SIGNALS:
        try:
            h = _getsignal(s)
            if _callable(h) and h is not _HANDLERS[s]:
                was = _HANDLERS[s]
                _signal(s, was if _callable(was) else _IGNORE)  # SIG_DFL could end the kernel
                taken.append((s, h))
        except (ValueError, OSError, TypeError):  # not the main thread, or not settable
            pass
    return taken


class Quiet:
    """The notebook's hooks set aside for a check (see the module's docstring)."""

    def __init__(self) -> None:
        self._theirs: Any = None

    @harness
    def set_aside(self) -> None:
        """Take the hooks off; the first time, keep them to put back (later: drop them)."""
        theirs = (_gettrace(), _getprofile(), _signals(), list(_CALLBACKS), _gc_on(),
                  [dict(d) for d in _MODULE_HOOKS], [], _warnings())
        _settrace(None)
        _setprofile(None)
        _CALLBACKS.clear()
        _gc_disable()  # a finalizer of the notebook's garbage would run inside the check
        for d in _MODULE_HOOKS:
            d.clear()
        while _top_saved(True) is not None:
            theirs[6].append(_top_saved(True))
            _pop_saved()
        if self._theirs is None:
            self._theirs = theirs

    @harness
    def put_back(self) -> None:
        """Put the notebook's hooks back as they were when the check started."""
        if self._theirs is None:
            return
        trace, profile, signals, callbacks, gc_on, hooks, saved, warned = self._theirs
        self._theirs = None
        for s, h in signals:
            try:
                _signal(s, h)
            except (ValueError, OSError, TypeError):
                pass
        _CALLBACKS[:] = callbacks
        if gc_on:
            _gc_enable()
        for d, h in zip(_MODULE_HOOKS, hooks):
            d.clear()
            d.update(h)
        for pack, unpack in reversed(saved):
            _push_saved(pack, unpack)
        funcs, filters, module = warned
        vars(_WARNINGS).update((k, v) for k, v in funcs.items() if v is not None)
        vars(_WARNINGS)["filters"] = filters
        sys.modules["warnings"] = module
        _settrace(trace)
        _setprofile(profile)
