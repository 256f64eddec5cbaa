"""The checks' guard: nothing that computes the answer is available to the student's code.

:class:`Guard` is switched on (:meth:`Guard.start`) just before the harness calls the
student's code and off (:meth:`Guard.stop`) just after. While on, four layers refuse
what the exercise forbids (a :class:`~._exercise.Forbidden`) and the course's own code:

1. a torch function mode sees every torch function called (``torch.softmax``,
   ``F.scaled_dot_product_attention``, ``torch.ops.aten...``), under any name;
2. a torch dispatch mode sees every ``aten`` operator that runs, also inside other
   functions (``nn.MultiheadAttention`` calling SDPA calling ``aten._safe_softmax``);
3. a profile function (:class:`._calls.CallWatch`) sees every Python and built-in call
   at any depth: :mod:`qkv`, :mod:`qkv.checks`, library functions by name, torch
   operators called through ``torch.ops``, and ways around the guard;
4. the audit hook of :mod:`._audit` refuses frames, the garbage collector, files, ctypes
   and processes; TorchScript functions cannot be called.

A refusal raises :class:`DelegationError` inside the student's code and is recorded in
:attr:`Guard.tripped`, so catching it does not help. :meth:`Guard.stop` also reports a
guard that the student's code took apart. :class:`DeviceWatch` follows tensors created
without ``device=``.
"""

from __future__ import annotations

import builtins
from typing import Any, FrozenSet, List, Optional, Sequence, Tuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from . import _audit
from ._calls import CallWatch, DelegationError
from ._exercise import Forbidden
from ._integrity import harness

_isinstance = builtins.isinstance
_Tensor = torch.Tensor
_SCRIPTED = (torch._C.ScriptFunction, torch._C.ScriptMethod)

_WRONG_DEVICE = ("pass device= taken from the inputs (e.g. device=query.device) to every "
                 "torch.ones/zeros/full/arange/tensor you create, or use the *_like functions")


@harness
def _torch_name(func: Any) -> str:
    return str(getattr(func, "__name__", None) or func)


class _FunctionGuard(TorchFunctionMode):
    def __init__(self, guard: "Guard") -> None:
        super().__init__()
        self._guard = guard
        self._verdicts: dict = {}
        self._keep: list = []

    @harness
    def __torch_function__(self, func, types, args=(), kwargs=None):
        g = self._guard
        verdict = self._verdicts.get(id(func), self)
        if verdict is self:  # first time: by name, else by pattern (kept, with func, by id)
            verdict = g._forbid.names.get(func)
            if verdict is None and g._forbid.matches(_torch_name(func)):
                verdict = f"torch's {_torch_name(func)}"
            self._verdicts[id(func)] = verdict
            self._keep.append(func)
        if verdict is not None:
            g.trip(f"calls {verdict}")
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        for observe in g._observe:
            observe(func, args, kwargs, out)
        return out


class _DispatchGuard(TorchDispatchMode):
    def __init__(self, guard: "Guard") -> None:
        super().__init__()
        self._guard = guard
        self._refused: dict = {}

    @harness
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        g = self._guard
        refused = self._refused.get(id(func))
        if refused is None:  # operators live as long as torch: their ids stay theirs
            name = func.name()
            refused = self._refused[id(func)] = g._forbid.matches(name) and name
        if refused:
            g.trip(f"calls torch's {refused.replace('::', '.')} (inside another torch function)")
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        for observe in g._observe_op:
            observe(func, args, kwargs, out)
        return out


# TorchDispatchMode wraps each subclass's handler in torch._dynamo.disable, whose first call
# imports torch._dynamo (seconds, in every fresh kernel: every graded notebook); nothing here is
# ever compiled, so the handler is put back as written.
_DispatchGuard.__torch_dispatch__ = _DispatchGuard.__dict__["__torch_dispatch__"].__wrapped__


class Guard:
    """Everything that is refused while the student's code runs, for one exercise.

    Args:
        exercise: its name, for messages.
        forbid: what it forbids besides the course package.
        watchers: objects shown what the student's code does: ``observe(func, args,
            kwargs, out)`` for each torch function, ``observe_op(op, args, kwargs, out)``
            for each aten operator (both optional; mark them with :func:`harness`).
        allow: code of the reference helpers the student's code may call, and
        reach: the course's code that may run inside them (see :mod:`._helpers`).
    """

    def __init__(self, exercise: str, forbid: Forbidden, watchers: Sequence[Any] = (),
                 allow: FrozenSet[Any] = frozenset(), reach: FrozenSet[Any] = frozenset()
                 ) -> None:
        self.tripped: Optional[str] = None
        self._exercise = exercise
        self._forbid = forbid
        self.watch(watchers)
        self._modes = (_FunctionGuard(self), _DispatchGuard(self))
        self._trip = self.trip  # one bound method, recognised again in stop()
        self._calls = CallWatch(forbid, self._trip, allow, reach)
        self._scripted: List[Tuple[type, Any]] = []

    @harness
    def trip(self, what: str) -> None:
        """Record the first refusal and raise it in the student's code."""
        if what.startswith("calls "):
            what += ("; this exercise asks you to write it yourself (it is blocked while the "
                     "check runs)")
        message = f"{self._exercise} {what}"
        self.tripped = self.tripped or message
        raise DelegationError(message)

    @harness
    def watch(self, watchers: Sequence[Any]) -> None:
        """Show the student's next call to ``watchers`` (see the class's docstring)."""
        self._observe = [w.observe for w in watchers if hasattr(w, "observe")]
        self._observe_op = [w.observe_op for w in watchers if hasattr(w, "observe_op")]

    @harness
    def _scripted_call(self, *args: Any, **kwargs: Any) -> None:
        self.trip("calls a TorchScript function (torch.jit); the checks run your code as it is "
                  "written")

    @harness
    def start(self) -> None:
        """Switch every layer on (the harness calls this just before the student's code)."""
        for mode in self._modes:
            mode.__enter__()
        blocked = self._scripted_call
        for t in _SCRIPTED:
            self._scripted.append((t, t.__dict__["__call__"]))
            setattr(t, "__call__", harness(lambda *a, **k: blocked()))
        self._calls.start()
        _audit.register(self._trip)

    @harness
    def stop(self) -> List[str]:
        """Switch every layer off; what the student's code did to them (empty: intact).

        The audit registration goes first and the call watch next, each in one step that
        cannot be refused, so that nothing the harness does afterwards is mistaken for the
        student's.
        """
        problems = []
        if not _audit.unregister(self._trip):
            problems.append("the checks' audit registration")
        if not self._calls.stop():
            problems.append("the checks' call watch (sys.setprofile)")
        for t, call in self._scripted:
            setattr(t, "__call__", call)
        self._scripted.clear()
        stacks = ((torch._C._len_torch_function_stack, torch._C._get_function_stack_at,
                   torch._C._pop_torch_function_stack),
                  (torch._C._len_torch_dispatch_stack, torch._C._get_dispatch_stack_at,
                   _pop_dispatch_mode))
        for mode, (length, at, pop) in zip(self._modes, stacks):
            if [at(i) for i in range(length())] != [mode]:
                problems.append("torch's mode stack (the guard's modes)")
            while length() and at(length() - 1) is not mode:
                pop()
            if length():
                mode.__exit__(None, None, None)
        return problems


def _pop_dispatch_mode() -> Any:
    """Pop the top of torch's dispatch-mode stack (this torch's pop takes a mode key; None is the top)."""
    return torch._C._pop_torch_dispatch_stack(None)


_FACTORIES = {
    torch.zeros, torch.ones, torch.full, torch.empty, torch.arange, torch.tensor, torch.as_tensor,
    torch.eye, torch.rand, torch.randn, torch.randint, torch.linspace, torch.tril_indices,
    torch.triu_indices,
}
_MOVERS = {torch.Tensor.to, torch.Tensor.type_as, torch.Tensor.cuda, torch.Tensor.copy_}


@harness
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

    @harness
    def _add(self, ids: set, out: Any) -> None:
        for t in _tensors(out, []):
            if t.dim() > 0:
                ids.add(id(t))
                self._keep.append(t)

    def follows(self, out: Any) -> bool:
        """Whether ``out`` came only from tensors created without ``device=``."""
        return _isinstance(out, _Tensor) and id(out) in self._ids

    @harness
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
        # Flat loops, no helper calls: this runs for every torch call the answer makes.
        ids, inputs = self._ids, self._inputs
        followed = derived = False
        for a in (*args, *kwargs.values()):
            for t in (a if type(a) in (list, tuple) else (a,)):
                if type(t) is _Tensor and t.dim() > 0:
                    if id(t) in ids:
                        followed = True
                    elif id(t) in inputs:
                        derived = True
        if followed and derived:
            self.problem = ("a tensor created without device= is combined with the inputs",
                            _WRONG_DEVICE)
        elif followed or derived:
            for t in (out if type(out) in (list, tuple) else (out,)):
                if type(t) is _Tensor and t.dim() > 0:
                    (ids if followed else inputs).add(id(t))
                    self._keep.append(t)
