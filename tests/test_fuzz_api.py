"""Hypothesis fuzz over ``qkv.__all__``: bad input is refused in the user's terms, never deep in torch.

Every public function and class (and each class's ``forward``) is called with arguments drawn
from its annotations: tensors of any rank, size (zero included), dtype and value; sizes that are
negative, zero, huge, bools or floats; scales that are negative, NaN or infinite; strings where
numbers belong. A call may succeed (many draws are valid) or raise ``TypeError``/``ValueError``
whose message names one of the function's arguments. Anything else (an ``IndexError`` from
inside torch, a ``RuntimeError`` from a matmul, an attempt to allocate terabytes) fails the test.

The recipe is read from the signatures, so a function added to ``qkv.__all__`` is fuzzed
without touching this file.
"""

from __future__ import annotations

import inspect
import math
import typing

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qkv

#: Sizes a user might pass, good and bad: huge ones must be refused before allocating.
SIZES = st.one_of(st.integers(-2, 6), st.sampled_from([100, 10**12, True, 2.0, "3", None]))
#: Scales, probabilities, temperatures.
NUMBERS = st.one_of(
    st.floats(-2, 3), st.sampled_from([0, 1, 0.0, math.nan, math.inf, -math.inf, True, "1", None])
)
DTYPES = st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                          torch.int32, torch.bool, torch.complex64])
#: Anything but True/False is wrong for a flag: "no" and 1 are true to `if`.
FLAGS = st.one_of(st.booleans(), st.sampled_from([None, "yes", "False", 1, 0.0]))


@st.composite
def tensors(draw) -> object:
    """A tensor of rank 0-5, each dim 0-5, any dtype the course meets, in any layout (transposed,
    broadcast, on the shape-only 'meta' device); sometimes not a tensor (a NumPy array, a list)."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.sampled_from([None, [[1.0, 2.0]], "q", 3.0, np.ones((2, 3), np.float32)]))
    shape = draw(st.lists(st.integers(0, 5), min_size=0, max_size=5))
    dtype = draw(DTYPES)
    if dtype == torch.bool:
        t = torch.rand(shape) > 0.5
    elif not (dtype.is_floating_point or dtype.is_complex):
        t = torch.randint(-3, 4, shape, dtype=dtype)
    else:
        t = torch.randn(shape, dtype=dtype)
        if draw(st.integers(0, 9)) == 0 and t.numel():
            t.view(-1)[0] = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    layout = draw(st.sampled_from(["plain"] * 6 + ["transposed", "expanded", "meta"]))
    if layout == "transposed" and t.dim() >= 2:
        t = t.mT.contiguous().mT  # the same values, column-major storage
    elif layout == "expanded" and t.dim() >= 1 and t.shape[0]:
        t = t[:1].expand(t.shape)  # a broadcast view: stride 0
    elif layout == "meta":
        t = t.to("meta")
    return t


def _strategy(param: inspect.Parameter):
    """A strategy for one parameter, from its annotation (and name, for the untyped ones)."""
    note = str(param.annotation)
    if "Tensor" in note:
        return tensors()
    if "dtype" in note:
        return st.one_of(DTYPES, st.just("float32"))
    if "Generator" in note:
        return st.one_of(st.builds(lambda s: torch.Generator().manual_seed(s), st.integers(0, 9)),
                         st.just(0))
    if "device" in note:
        return st.sampled_from([None, "cpu", torch.device("cpu"), 7])
    if "bool" in note:
        return FLAGS
    if "float" in note:
        return NUMBERS
    if "int" in note:
        return SIZES
    if "str" in note:
        return st.sampled_from(["dot", "general", "concat", "", 3])
    if "Callable" in note or "Step" in note:
        return st.sampled_from([qkv.bahdanau_attention, None, "bahdanau"])
    return st.one_of(tensors(), SIZES)


def _call_args(target) -> st.SearchStrategy:
    """Keyword arguments for ``target``: every required parameter, and optional ones at random."""
    params = [p for p in inspect.signature(target).parameters.values()
              if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    required = {p.name: _strategy(p) for p in params if p.default is inspect.Parameter.empty}
    optional = {p.name: _strategy(p) for p in params if p.default is not inspect.Parameter.empty}
    return st.fixed_dictionaries(required, optional=optional)


def _names(target) -> typing.List[str]:
    return [p for p in inspect.signature(target).parameters if p != "self"]


def _assert_refused_well(target, kwargs: dict, error: BaseException) -> None:
    """A refusal is a TypeError or ValueError that names one of the arguments."""
    where = f"{getattr(target, '__qualname__', target)}(**{ {k: _short(v) for k, v in kwargs.items()} })"
    assert isinstance(error, (TypeError, ValueError)), (
        f"{where} raised {type(error).__name__}: {error}"
    )
    message = str(error)
    named = [n for n in _names(target) if n in message]
    assert named, f"{where} raised a message that names no argument: {message}"


def _surely_wrong(target, kwargs: dict) -> typing.List[str]:
    """The arguments no function may accept: a non-bool for a flag, a string for a non-string."""
    params = inspect.signature(target).parameters
    wrong = []
    for name, value in kwargs.items():
        note = str(params[name].annotation)
        if "bool" in note and "Tensor" not in note and not isinstance(value, bool):
            wrong.append(name)
        elif isinstance(value, str) and not any(w in note for w in ("str", "dtype", "device")):
            wrong.append(name)
    return wrong


def _short(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor{tuple(value.shape)} {value.dtype}"
    return repr(value)


def _call(target, kwargs: dict):
    try:
        return target(**kwargs), None
    except Exception as error:  # noqa: BLE001 - judged below
        return None, error



FUZZ = settings(max_examples=120, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("name", qkv.__all__)
def test_fuzz_public_api(name):
    obj = getattr(qkv, name)
    target = obj.__init__ if inspect.isclass(obj) else obj
    forward = getattr(obj, "forward", None) if inspect.isclass(obj) else None

    @FUZZ
    @given(data=st.data())
    def run(data):
        kwargs = data.draw(_call_args(target), label="arguments")
        result, error = _call(obj, kwargs)
        if error is not None:
            _assert_refused_well(target, kwargs, error)
            return
        assert not _surely_wrong(target, kwargs), f"{name} accepted {_surely_wrong(target, kwargs)}"
        if forward is not None and isinstance(result, torch.nn.Module):
            call_kwargs = data.draw(_call_args(forward), label="forward arguments")
            _, error = _call(result, call_kwargs)
            if error is not None:
                _assert_refused_well(forward, call_kwargs, error)
            else:
                assert not _surely_wrong(forward, call_kwargs), f"{name}.forward accepted {call_kwargs}"

    run()
