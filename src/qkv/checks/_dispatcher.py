"""torch's dispatcher as the checks found it: no kernel of a notebook's own for torch's operators.

``torch.library`` lets Python code register a kernel for an existing operator
(``Library("aten", "IMPL").impl("allclose", lambda *a: True, "CPU")``). Every call of that
operator then runs it, torch's C functions included, so a notebook could make the checks'
comparisons agree, or the reference compute the student's wrong answer. Two layers:

- :func:`guard_registrations` (when :mod:`qkv.checks` is imported) wraps the registration
  methods of torch's library objects: registering a kernel for an operator that existed
  then, or a fallback for a whole dispatch key, from a notebook's code is refused. A
  notebook may still define and implement operators of its own (``torch.library.custom_op``).
- :func:`tampered` (when every check starts) compares what the dispatcher holds for the
  operators the comparisons and the references run with a snapshot taken at import, in case
  the wrapper was taken off: a check refuses to run on a changed dispatcher.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Optional

import torch

from ._calls import _LIBRARY_DIRS, from_library
from ._integrity import _BUSY, _QKV_DIR, state

_Module = torch._C._DispatchModule
_dump = torch._C._dispatch_dump
# What the comparisons (:mod:`._compare`) and the references run most: a kernel of the
# notebook's for any of them changes a verdict.
_WATCHED = (
    "allclose", "equal", "isnan", "isclose", "argmax", "abs", "where.self", "zeros_like",
    "sub.Tensor", "_to_copy", "clone", "detach", "ne.Tensor", "eq.Tensor", "any", "sum",
    "sum.dim_IntList", "item", "_local_scalar_dense", "exp", "amax", "max.dim", "div.Tensor",
    "mul.Tensor", "mul.Scalar", "add.Tensor", "matmul", "mm", "bmm", "_softmax",
    "_safe_softmax", "softmax.int", "masked_fill.Scalar", "masked_fill.Tensor", "tril", "triu",
    "copy_", "expand", "cat", "sqrt", "sin", "cos", "pow.Tensor_Scalar", "logical_not",
    "bitwise_not", "var", "mean", "randn", "normal_", "uniform_", "transpose.int", "view",
    "reshape", "permute", "arange.start_step", "full", "ones", "zeros", "empty.memory_format",
    "linear", "addmm", "repeat_interleave.self_int", "stack", "split.Tensor", "neg",
)
_EXISTING = frozenset(torch._C._dispatch_get_all_op_names())
_LIBRARIES = _LIBRARY_DIRS
# id(library object) -> (its namespace, the object, kept alive); changes: never restored.
_NAMESPACES: dict = state({})


_TORCH = os.path.dirname(torch.__file__) + os.sep
# torch's registration machinery: who calls it is who registers (torch's own modules register
# kernels lazily, also while a notebook's cell imports them: those are let through).
_MACHINERY = tuple(_TORCH + p for p in ("library.py", "_library" + os.sep, "_custom_op",
                                         "_ops.py")) + (os.path.dirname(os.__file__) + os.sep,)


def _from_notebook() -> bool:
    """Whether the code registering (the first caller outside torch's registration
    machinery and the standard library) is a notebook's, not a library's or the course's."""
    _BUSY[0] = True  # the checks' audit hook would see sys._getframe
    try:
        frame = sys._getframe(2)
    finally:
        _BUSY[0] = False
    while frame is not None and frame.f_code.co_filename.startswith(_MACHINERY):
        frame = frame.f_back
    return frame is not None and not from_library(frame) and not (
        frame.f_code.co_filename.startswith(_QKV_DIR))


def _refuse(what: str) -> None:
    raise RuntimeError(f"{what}: the checks refuse a kernel of a notebook's own for torch's "
                       f"operators (it would change what the checks compute)")


def _wrap_library(original: Callable[..., Any]) -> Callable[..., Any]:
    def library(kind, ns, *args, **kwargs):
        m = original(kind, ns, *args, **kwargs)
        _NAMESPACES[id(m)] = (ns, m)
        return m
    return library


def _wrap_impl(original: Callable[..., Any]) -> Callable[..., Any]:
    def impl(self, name, *args, **kwargs):
        ns = _NAMESPACES.get(id(self), ("?",))[0]
        op = name if "::" in str(name) else f"{ns}::{name}"
        if (op in _EXISTING or ns == "?") and _from_notebook():
            _refuse(f"registering a kernel for {op}")
        return original(self, name, *args, **kwargs)
    return impl


def _wrap_fallback(original: Callable[..., Any]) -> Callable[..., Any]:
    def fallback(self, *args, **kwargs):
        if _from_notebook():
            _refuse("registering a fallback kernel")
        return original(self, *args, **kwargs)
    return fallback


def guard_registrations() -> None:
    """Wrap torch's registration methods (once; see the module's docstring)."""
    if getattr(torch._C._dispatch_library, "_qkv_guarded", False):
        return
    library = _wrap_library(torch._C._dispatch_library)
    library._qkv_guarded = True
    torch._C._dispatch_library = library
    for name in ("impl", "impl_t_t", "impl_with_aoti_compile"):
        if hasattr(_Module, name):
            setattr(_Module, name, _wrap_impl(getattr(_Module, name)))
    for name in ("fallback", "fallback_fallthrough"):
        if hasattr(_Module, name):
            setattr(_Module, name, _wrap_fallback(getattr(_Module, name)))


def _lines(name: str) -> frozenset:
    try:
        return frozenset(_dump(f"aten::{name}").splitlines())
    except RuntimeError:  # not an operator of this version of torch
        return frozenset()


_SNAPSHOT = tuple(_lines(n) for n in _WATCHED)


# The keys whose kernels compute on the CPU (or decompose for it); Meta kernels compute no values.
_KEYS = ("CPU", "CUDA", "MPS", "Composite", "Autograd", "BackendSelect", "ADInplaceOrView",
         "Python", "Functionalize", "Undefined")
_FALLBACKS = frozenset(k for k in torch._C.DispatchKey.__members__.values()
                       if torch._C._dispatch_has_backend_fallback(k))


def tampered(_lines=_lines, _watched=_WATCHED, _snapshot=_SNAPSHOT) -> Optional[str]:
    """The first watched operator with a kernel registered since the checks were imported
    (whatever file it claims to come from: a notebook can compile code under a library's
    file name), or a new fallback kernel; None when the dispatcher is as it was."""
    for name, saved in zip(_watched, _snapshot):
        for line in _lines(name) - saved:
            if line.startswith(_KEYS):
                return f"aten::{name}"
    for key in torch._C.DispatchKey.__members__.values():
        if key not in _FALLBACKS and torch._C._dispatch_has_backend_fallback(key):
            return f"every operator (a fallback for {key.name})"
    return None
