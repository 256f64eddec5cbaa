"""The checks' guards: no delegating to the answer, no tensors made on a fixed device.

:class:`Guard` blocks, while a student's code runs, the torch built-ins and
``qkv`` references that would answer the exercise for it. :class:`DeviceWatch`
follows tensors created without ``device=`` and notices when they meet the
inputs, a mistake that passes on a CPU-only machine and fails on a GPU.
"""

from __future__ import annotations

import builtins
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch.overrides import TorchFunctionMode

# Bound at import, like the harness's primitives, so a notebook cannot rebind them.
_isinstance = builtins.isinstance
_Tensor = torch.Tensor

_WRONG_DEVICE = ("pass device= taken from the inputs (e.g. device=query.device) to every "
                 "torch.ones/zeros/full/arange/tensor you create, or use the *_like functions")


class DelegationError(RuntimeError):
    """Raised inside the student's code when it calls something the exercise forbids."""


def _blocked_code(message: str):
    """Code object that records and raises a delegation; swapped into a reference function."""
    src = (
        "def blocked(*args, **kwargs):\n"
        "    __import__('sys').modules['qkv.checks._guard']._trip(" + repr(message) + ")\n"
    )
    namespace: dict = {}
    exec(src, {"__builtins__": builtins}, namespace)  # noqa: S102 (fixed source)
    return namespace["blocked"].__code__


_ACTIVE: List["Guard"] = []


def _trip(message: str) -> None:
    if _ACTIVE:
        _ACTIVE[-1].tripped = _ACTIVE[-1].tripped or message
    raise DelegationError(message)


class Guard(TorchFunctionMode):
    """While active, forbidden torch callables and ``qkv`` references raise.

    Torch callables are caught by a :class:`~torch.overrides.TorchFunctionMode`,
    which sees every torch function whatever name it was imported under. A
    reference function has its ``__code__`` swapped for one that raises, so that
    an alias taken before the check (``from qkv import softmax as s``) is caught
    too; the code is restored on exit. A caught-and-ignored call is still
    reported, through :attr:`tripped`.
    """

    def __init__(self, exercise: str, forbid_torch: Dict[Any, str], forbid_ref: Dict[Any, str],
                 watchers: Sequence[Any] = ()):
        super().__init__()
        self.tripped: Optional[str] = None
        self._watchers = list(watchers)
        self._torch = {id(f): name for f, name in forbid_torch.items()}
        self._keep = list(forbid_torch)  # keep ids valid
        self._refs = [(f, name) for f, name in forbid_ref.items()]
        self._saved: List[Tuple[Any, Any]] = []
        self._exercise = exercise

    def _message(self, name: str) -> str:
        return (f"{self._exercise} calls {name}; this exercise asks you to write it yourself "
                f"(it is blocked while the check runs)")

    def __enter__(self):
        for f, name in self._refs:
            self._saved.append((f, f.__code__))
            f.__code__ = _blocked_code(self._message(name))
        _ACTIVE.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            _ACTIVE.remove(self)
            for f, code in self._saved:
                f.__code__ = code
            self._saved.clear()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = self._torch.get(id(func))
        if name is not None:
            self.tripped = self.tripped or self._message(name)
            raise DelegationError(self._message(name))
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        for w in self._watchers:
            w.observe(func, args, kwargs, out)
        return out


_FACTORIES = {
    torch.zeros, torch.ones, torch.full, torch.empty, torch.arange, torch.tensor, torch.as_tensor,
    torch.eye, torch.rand, torch.randn, torch.randint, torch.linspace, torch.tril_indices,
    torch.triu_indices,
}
_MOVERS = {torch.Tensor.to, torch.Tensor.type_as, torch.Tensor.cuda, torch.Tensor.copy_}


def _tensors(x: Any, found: list) -> list:
    if _isinstance(x, _Tensor):
        found.append(x)
    elif _isinstance(x, (list, tuple)):
        for v in x:
            _tensors(v, found)
    elif _isinstance(x, dict):
        for v in x.values():
            _tensors(v, found)
    return found


class DeviceWatch:
    """Notices a tensor created without ``device=`` meeting one derived from the inputs.

    On a CPU-only machine such code gives right answers, but it fails for a
    student on a GPU. Tensors made by a factory (``torch.ones``, ``torch.full``,
    ...) without ``device=`` are followed through the calls that use them, and
    so are the inputs; a call that mixes the two is the mistake. ``.to(...)``
    ends the trail. Zero-dim tensors are exempt: PyTorch moves those itself.
    """

    def __init__(self, args: tuple, kwargs: dict) -> None:
        self.problem: Optional[Tuple[str, str]] = None
        self._ids: set = set()  # followed: created without device=
        self._inputs: set = set()  # derived from the inputs
        self._keep: list = []  # holds followed tensors so that their ids are not reused
        self._add(self._inputs, (args, kwargs))

    def _add(self, ids: set, out: Any) -> None:
        for t in _tensors(out, []):
            if t.dim() > 0:
                ids.add(id(t))
                self._keep.append(t)

    def follows(self, out: Any) -> bool:
        """Whether ``out`` came only from tensors created without ``device=``."""
        return _isinstance(out, _Tensor) and id(out) in self._ids

    def observe(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        if self.problem is not None:
            return
        if func in _FACTORIES:
            # torch.as_tensor(t) of a tensor keeps t's device: only fresh data is followed.
            if kwargs.get("device") is None and not _tensors(args, []):
                self._add(self._ids, out)
            return
        if func in _MOVERS:  # .to(device) may return the very same object: stop following it
            for t in _tensors(out, []):
                self._ids.discard(id(t))
            return
        tensors = [t for t in _tensors((args, kwargs), []) if t.dim() > 0]
        followed = any(id(t) in self._ids for t in tensors)
        derived = any(id(t) in self._inputs and id(t) not in self._ids for t in tensors)
        if followed and derived:
            self.problem = ("a tensor created without device= is combined with the inputs",
                            _WRONG_DEVICE)
        elif followed:
            self._add(self._ids, out)
        elif derived:
            self._add(self._inputs, out)
