"""Checks for the soft-lookup assignment: ``soft_lookup``, ``additive_score``, ``luong_score``.

``soft_lookup`` returns a pair ``(output, weights)``: its check runs the
harness twice, first on the weights (where most mistakes show), then on the
output, so that each comparison is of one tensor and its messages stay precise.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, List, Sequence

import torch
from torch import Tensor

from .. import additive as _additive
from .. import lookup as _lookup
from ._harness import Case, Exercise, Mistake, run_check
from ._inputs import randn
from .scaling import QKV_ATTENTION, TORCH_ATTENTION


def pick(i: int, what: str) -> Callable[..., Any]:
    """``run_student`` for a function returning a pair: call it, check the pair, keep item ``i``."""
    def run(student, *args, **kwargs):
        result = student(*args, **kwargs)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise TypeError(f"expected a pair ({what}), got {type(result).__name__}")
        return result[i]
    return run


def picked(fn: Callable[..., Any], i: int) -> Callable[..., Any]:
    """A pair-returning variant reduced to its item ``i``."""
    return lambda *a, **k: fn(*a, **k)[i]


def _key_t(key: Tensor, key_t: Any) -> Tensor:
    if key_t is None:
        return key.transpose(-2, -1)
    if key_t == "T":
        return key.permute(*reversed(range(key.dim())))
    return key.transpose(*key_t)


KEY_HINT = ("transpose only the last two axes of the keys: keys.transpose(-2, -1) (.T reverses "
            "every axis of a batched tensor)")


# --------------------------------------------------------------------------- soft_lookup


def soft_variant(query, keys, values, temperature=1.0, *, temp="divide", sdpa="no", dim=-1,
                 stable=True, key_t=None, hard=False, swap=False):
    """``soft_lookup`` with switches that reproduce common mistakes (defaults: right)."""
    E = query.shape[-1]
    factor = {"divide": 1.0 / temperature, "multiply": temperature, "ignored": 1.0}[temp]
    if sdpa == "also":
        factor /= math.sqrt(E)
    elif sdpa == "instead":
        factor = 1.0 / math.sqrt(E)
    scores = (query @ _key_t(keys, key_t)) * factor
    if hard:
        weights = torch.zeros_like(scores).scatter(-1, scores.argmax(-1, keepdim=True), 1.0)
    elif stable:
        weights = torch.softmax(scores, dim=dim)
    else:
        e = scores.exp()
        weights = e / e.sum(dim=dim, keepdim=True)
    out = weights @ values
    return (weights, out) if swap else (out, weights)


def _soft_mistakes(i: int) -> List[Mistake]:
    v = partial(picked, i=i)
    temp_hint = "divide the scores by the temperature: softmax(query @ keys^T / temperature)"
    axis_hint = "each query's weights over the entries sum to one: softmax over the last dim (-1)"
    return [
        Mistake("returning (weights, output) instead of (output, weights)",
                "return the pair in the order (output, weights)", v(partial(soft_variant, swap=True))),
        Mistake("multiplying by the temperature instead of dividing", temp_hint,
                v(partial(soft_variant, temp="multiply"))),
        Mistake("the temperature ignored", temp_hint, v(partial(soft_variant, temp="ignored"))),
        Mistake("scaling by 1/sqrt(E) as well as the temperature",
                "a soft lookup has no 1/sqrt(E): only the temperature divides the scores",
                v(partial(soft_variant, sdpa="also"))),
        Mistake("scaling by 1/sqrt(E) instead of the temperature",
                "divide the scores by the temperature argument, not by sqrt(E)",
                v(partial(soft_variant, sdpa="instead"))),
        Mistake("a hard lookup (argmax) instead of a softmax",
                "weight every entry by the softmax of its score; argmax keeps only the best one",
                v(partial(soft_variant, hard=True))),
        Mistake("softmax over the wrong axis", axis_hint, v(partial(soft_variant, dim=-2))),
        Mistake("softmax over the wrong axis", axis_hint, v(partial(soft_variant, dim=0))),
        Mistake("a softmax that overflows on large scores",
                "subtract each row's maximum before exp (the softmax does not change, exp no "
                "longer overflows)", v(partial(soft_variant, stable=False))),
        Mistake("wrong axes transposed on the keys (keys.T)", KEY_HINT,
                v(partial(soft_variant, key_t="T"))),
        Mistake("wrong axes transposed on the keys", KEY_HINT, v(partial(soft_variant, key_t=(0, 1)))),
    ]


def _soft_cases() -> List[Case]:
    def make(batch, L, S, E, Ev, temperature=None, big=0.0):
        def build(gen, device, dtype):
            q, k, v = randn(gen, *batch, L, E), randn(gen, *batch, S, E), randn(gen, *batch, S, Ev)
            if big:  # a shared component makes every score about big**2
                q[..., 0] = big
                k[..., 0] = big
            args = tuple(t.to(device=device, dtype=dtype) for t in (q, k, v))
            return args, ({} if temperature is None else {"temperature": temperature})
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("unbatched L=3, S=5, E=4, Ev=6 with temperature=0.7", make((), 3, 5, 4, 6, 0.7), f64),
        Case("batched (B=2, H=3) L=4, S=6, E=5, Ev=2 with temperature=1.7",
             make((2, 3), 4, 6, 5, 2, 1.7), f32),
        Case("batched (B=2) L=5, S=3, E=4, Ev=4 with temperature=0.3", make((2,), 5, 3, 4, 4, 0.3), f64),
        # Default temperature last: at T=1 several temperature mistakes coincide.
        Case("one query, S=5 entries, E=4, Ev=3, default temperature", make((), 1, 5, 4, 3), f32),
        Case("large scores (near 900), L=3, S=4, E=4, Ev=2", make((2,), 3, 4, 4, 2, 1.0, big=30.0),
             f32, rtol=2e-3, atol=1e-4),
    ]


_SOFT_FORBID_REF = {**QKV_ATTENTION, _lookup.soft_lookup: "qkv.soft_lookup",
                    _lookup.hard_lookup: "qkv.hard_lookup"}

SOFT_LOOKUP_WEIGHTS = Exercise(
    name="soft_lookup", reference=picked(_lookup.soft_lookup, 1), cases=_soft_cases(),
    mistakes=_soft_mistakes(1), run_student=pick(1, "output, weights"),
    forbid_torch=TORCH_ATTENTION, forbid_ref=_SOFT_FORBID_REF,
    legend="(..., L, S) for the weights",
)
SOFT_LOOKUP_OUTPUT = Exercise(
    name="soft_lookup", reference=picked(_lookup.soft_lookup, 0), cases=_soft_cases(),
    mistakes=_soft_mistakes(0), run_student=pick(0, "output, weights"),
    forbid_torch=TORCH_ATTENTION, forbid_ref=_SOFT_FORBID_REF,
    legend="(..., L, Ev) for the output",
)


# --------------------------------------------------------------------------- additive_score


def additive_variant(query, key, W_q, W_k, v_a, *, proj="ok", act="tanh", swap=False,
                     separate=False, flip=False, softmax=False):
    """``additive_score`` with switches that reproduce common mistakes (defaults: right)."""
    if swap:
        W_q, W_k = W_k, W_q
    f = {"tanh": torch.tanh, "none": lambda x: x, "sigmoid": torch.sigmoid, "relu": torch.relu}[act]
    pq = query @ (W_q.T if proj == "ok" else W_q)
    pk = key @ (W_k.T if proj == "ok" else W_k)
    feats = f(pq).unsqueeze(-2) + f(pk).unsqueeze(-3) if separate else f(pq.unsqueeze(-2) + pk.unsqueeze(-3))
    s = feats @ v_a
    if flip:
        s = s.transpose(-2, -1)
    return torch.softmax(s, dim=-1) if softmax else s


_ADD_HINT = "the score is v_a^T tanh(W_q q + W_k k): project with query @ W_q.T and key @ W_k.T"
ADDITIVE_MISTAKES = [
    Mistake("the projections not transposed (query @ W_q)",
            "W_q has shape (A, Eq): project the queries with query @ W_q.T (and the keys with "
            "key @ W_k.T)", partial(additive_variant, proj="no")),
    Mistake("W_q and W_k swapped", "W_q projects the queries and W_k the keys",
            partial(additive_variant, swap=True)),
    Mistake("no tanh", _ADD_HINT + "; the tanh is what makes the score more than a sum of two "
            "linear terms", partial(additive_variant, act="none")),
    Mistake("sigmoid instead of tanh", _ADD_HINT, partial(additive_variant, act="sigmoid")),
    Mistake("relu instead of tanh", _ADD_HINT, partial(additive_variant, act="relu")),
    Mistake("tanh applied to each projection separately",
            "add the two projections first, then take one tanh of the sum",
            partial(additive_variant, separate=True)),
    Mistake("scores laid out (S, L) instead of (L, S)",
            "broadcast the projected queries over a new key axis (unsqueeze(-2)) and the keys "
            "over a new query axis (unsqueeze(-3)), so that row i is query i",
            partial(additive_variant, flip=True)),
    Mistake("returning softmax weights instead of scores",
            "return the unnormalised scores; the softmax comes later", partial(additive_variant, softmax=True)),
]


def _additive_cases() -> List[Case]:
    def make(batch, L, S, Eq, Ek, A):
        def build(gen, device, dtype):
            ts = (randn(gen, *batch, L, Eq), randn(gen, *batch, S, Ek), randn(gen, A, Eq) / Eq**0.5,
                  randn(gen, A, Ek) / Ek**0.5, randn(gen, A))
            return tuple(t.to(device=device, dtype=dtype) for t in ts), {}
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("unbatched L=3, S=5, Eq=4, Ek=6, A=7", make((), 3, 5, 4, 6, 7), f32),
        Case("batched (B=2) L=4, S=3, Eq=Ek=A=5", make((2,), 4, 3, 5, 5, 5), f64),
        Case("batched (B=2, H=3) L=2, S=6, Eq=3, Ek=4, A=5", make((2, 3), 2, 6, 3, 4, 5), f64),
        Case("L=1 query, S=4 keys, Eq=Ek=A=3", make((3,), 1, 4, 3, 3, 3), f32),
    ]


ADDITIVE_SCORE = Exercise(
    name="additive_score", reference=_additive.additive_score, cases=_additive_cases(),
    mistakes=ADDITIVE_MISTAKES,
    forbid_ref={_additive.additive_score: "qkv.additive_score",
                _additive.AdditiveAttention.forward: "qkv.AdditiveAttention"},
    legend="(..., L, S)",
)


# --------------------------------------------------------------------------- luong_score


def luong_variant(query, key, W=None, *, w_mode="ok", key_t=None, scale=False, softmax=False):
    """``luong_score`` with switches that reproduce common mistakes (defaults: right)."""
    kt = _key_t(key, key_t)
    if W is None or w_mode == "ignored":
        s = query @ kt
    elif w_mode == "transposed":
        s = query @ W.T @ kt
    else:
        s = query @ W @ kt
    if scale:
        s = s / math.sqrt(query.shape[-1])
    return torch.softmax(s, dim=-1) if softmax else s


LUONG_MISTAKES = [
    Mistake("W ignored (the dot score when W is given)",
            "with W the general score is query @ W @ key^T", partial(luong_variant, w_mode="ignored")),
    Mistake("W transposed (query @ W.T @ key^T)",
            "W has shape (Eq, Ek): the general score is query @ W @ key.transpose(-2, -1)",
            partial(luong_variant, w_mode="transposed")),
    Mistake("scaling by 1/sqrt(E)", "Luong's scores are not scaled; that comes with the transformer",
            partial(luong_variant, scale=True)),
    Mistake("returning softmax weights instead of scores",
            "return the unnormalised scores; the softmax comes later", partial(luong_variant, softmax=True)),
    Mistake("wrong axes transposed on the key (key.T)", KEY_HINT, partial(luong_variant, key_t="T")),
    Mistake("wrong axes transposed on the key", KEY_HINT, partial(luong_variant, key_t=(0, 1))),
]


def _luong_cases() -> List[Case]:
    def make(batch, L, S, Eq, Ek, general):
        def build(gen, device, dtype):
            ts = [randn(gen, *batch, L, Eq), randn(gen, *batch, S, Ek)]
            if general:
                ts.append(randn(gen, Eq, Ek) / Eq**0.5)
            return tuple(t.to(device=device, dtype=dtype) for t in ts), {}
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("dot score, unbatched L=3, S=5, E=4", make((), 3, 5, 4, 4, False), f32),
        Case("dot score, batched (B=2, H=3) L=4, S=6, E=5", make((2, 3), 4, 6, 5, 5, False), f64),
        Case("general score, batched (B=2) L=3, S=4, Eq=Ek=5", make((2,), 3, 4, 5, 5, True), f64),
        Case("general score, batched (B=2, H=2) L=2, S=5, Eq=3, Ek=6", make((2, 2), 2, 5, 3, 6, True), f32),
    ]


LUONG_SCORE = Exercise(
    name="luong_score", reference=_additive.luong_score, cases=_luong_cases(),
    mistakes=LUONG_MISTAKES, forbid_torch=TORCH_ATTENTION,
    forbid_ref={**QKV_ATTENTION, _additive.luong_score: "qkv.luong_score",
                _additive.LuongAttention.forward: "qkv.LuongAttention"},
    legend="(..., L, S)",
)


# --------------------------------------------------------------------------- checks


def run_pair(exercises: Sequence[Exercise], student: Any, seed: int) -> None:
    """Run the checks of a pair-returning function, weights first."""
    __tracebackhide__ = True
    for ex in exercises:
        run_check(ex, student, seed)


def check_soft_lookup(soft_lookup: Callable[..., Any], seed: int = 0) -> None:
    """Check ``soft_lookup(query, keys, values, temperature=1.0) -> (output, weights)``.

    Raises:
        AssertionError: naming the input it fails on and what to look at.
    """
    __tracebackhide__ = True
    run_pair((SOFT_LOOKUP_WEIGHTS, SOFT_LOOKUP_OUTPUT), soft_lookup, seed)


def check_additive_score(additive_score: Callable[..., Tensor], seed: int = 0) -> None:
    """Check ``additive_score(query, key, W_q, W_k, v_a)`` against :func:`qkv.additive_score`.

    Raises:
        AssertionError: naming the input it fails on and what to look at.
    """
    __tracebackhide__ = True
    run_check(ADDITIVE_SCORE, additive_score, seed)


def check_luong_score(luong_score: Callable[..., Tensor], seed: int = 0) -> None:
    """Check ``luong_score(query, key, W=None)`` (dot, or general when W is given).

    Raises:
        AssertionError: naming the input it fails on and what to look at.
    """
    __tracebackhide__ = True
    run_check(LUONG_SCORE, luong_score, seed)
