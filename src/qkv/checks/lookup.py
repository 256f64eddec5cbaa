"""Checks for the lookup assignment: ``softmax``, ``soft_lookup``, ``additive_score``, ``luong_score``.

Each check compares the student's function with the reference in :mod:`qkv`
and, when they differ, names the mistake (the wrong variants are in
:mod:`.mistakes.lookup`). ``soft_lookup`` returns a pair ``(output, weights)``:
its check runs the harness twice, first on the weights, then on the output.
"""

from __future__ import annotations

from typing import List

import torch
import torch.nn.functional as F

import qkv

from .mistakes.attention import TORCH_ATTENTION
from .harness import (bool_mask, Case, checks_of, Exercise, pair_check, Forbidden, half_case,
                      picked, randn, make_check, via_float32)
from .mistakes.lookup import ADDITIVE_MISTAKES, LUONG_MISTAKES, SOFTMAX_MISTAKES, soft_mistakes
from . import _beyond_early as e, _beyond_experiments as x, _variations_early as v
from ._experiment import ExperimentCheck

__all__ = [
    "check_additive_score",
    "check_lookup_entropy",
    "check_luong_score",
    "check_soft_lookup",
    "check_softmax",
    "check_sparsemax_lookup",
    "check_top_k_lookup",
]

# A softmax from torch under any name, or from torch's attention (which computes one).
TORCH_SOFTMAX = Forbidden({
    torch.softmax: "torch.softmax",
    torch.Tensor.softmax: "Tensor.softmax",
    F.softmax: "torch.nn.functional.softmax (or nn.Softmax)",
    torch.special.softmax: "torch.special.softmax",
    torch.log_softmax: "torch.log_softmax",
    torch.Tensor.log_softmax: "Tensor.log_softmax",
    F.log_softmax: "torch.nn.functional.log_softmax",
    torch.special.log_softmax: "torch.special.log_softmax",
}, patterns=("softmax",)) | TORCH_ATTENTION


# --------------------------------------------------------------------------- cases


def _softmax_cases() -> List[Case]:
    def make(shape, dim, big=0.0, neg_inf=False, apart=0.0):
        def build(gen, device, dtype):
            x = randn(gen, *shape) * 2
            if big:
                x = x + big
            if apart:  # rows around +apart, 0 and -apart: one shift cannot serve them all
                x = x + apart * torch.linspace(1, -1, shape[0])[:, None]
            if neg_inf:
                m = bool_mask(gen, *shape)
                x = x.masked_fill(~m, float("-inf"))
            return (x.to(device=device, dtype=dtype),), ({} if dim is None else {"dim": dim})
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("1-D input of 5 logits", make((5,), -1), f32),
        Case("square input (4, 4) with dim=-1", make((4, 4), -1), f64),
        Case("input (3, 5) with dim=0", make((3, 5), 0), f32),
        Case("input (2, 5, 3) with dim=-2", make((2, 5, 3), -2), f64),
        Case("input (2, 3, 4, 5) with dim=1", make((2, 3, 4, 5), 1), f32),
        Case("input (3, 6) with -inf entries (masked positions)", make((3, 6), -1, neg_inf=True),
             f64),
        Case("input (3, 6) with large logits (near 1000)", make((3, 6), -1, big=1000.0), f32),
        Case("input (2, 4, 3) with large logits (near 1000) and dim=1",
             make((2, 4, 3), 1, big=1000.0), f64),
        Case("input (3, 6) whose rows lie far apart (near +500, 0 and -500)",
             make((3, 6), -1, apart=500.0), f32),
        Case("input (4, 3) with dim left out (its default is -1)", make((4, 3), None), f64),
        half_case("input (3, 6) with -inf entries (masked positions)",
                  make((3, 6), -1, neg_inf=True)),
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
        half_case("batched (B=2) L=3, S=5, E=4, Ev=3 with temperature=2.0",
                  make((2,), 3, 5, 4, 3, 2.0)),
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
        half_case("batched (B=2) L=3, S=4, Eq=4, Ek=5, A=6", make((2,), 3, 4, 4, 5, 6),
                  torch.bfloat16),
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
        half_case("general score, batched (B=2) L=3, S=4, Eq=4, Ek=5", make((2,), 3, 4, 4, 5, True)),
    ]


# --------------------------------------------------------------------------- exercises


SOFTMAX = Exercise(
    name="softmax", reference=via_float32(qkv.softmax), cases=_softmax_cases(),
    mistakes=SOFTMAX_MISTAKES, forbid=TORCH_SOFTMAX, legend="the input's shape",
)

SOFT_LOOKUP_WEIGHTS, SOFT_LOOKUP_OUTPUT = (
    Exercise(name="soft_lookup", reference=via_float32(picked(qkv.soft_lookup, i)),
             cases=_soft_cases(), mistakes=soft_mistakes(i), forbid=TORCH_ATTENTION,
             helpers={"softmax": qkv.softmax}, legend=legend)
    for i, legend in ((1, "(..., L, S) for the weights"), (0, "(..., L, Ev) for the output")))

ADDITIVE_SCORE = Exercise(
    name="additive_score", reference=via_float32(qkv.additive_score), cases=_additive_cases(),
    mistakes=ADDITIVE_MISTAKES, legend="(..., L, S)",
)

LUONG_SCORE = Exercise(
    name="luong_score", reference=via_float32(qkv.luong_score), cases=_luong_cases(),
    mistakes=LUONG_MISTAKES, forbid=TORCH_ATTENTION, legend="(..., L, S)",
)


# --------------------------------------------------------------------------- checks


#: This module's checks, by the name test cells call them (for :mod:`.grading`).
CHECKS = checks_of(
    SOFTMAX, ADDITIVE_SCORE, LUONG_SCORE, e.TOP_K_LOOKUP, ExperimentCheck(x.LOOKUP_ENTROPY),
    pair_check("check_soft_lookup", SOFT_LOOKUP_WEIGHTS, SOFT_LOOKUP_OUTPUT, "(output, weights)"),
    pair_check("check_sparsemax_lookup", v.SPARSE_WEIGHTS, v.SPARSE_OUTPUT, "(output, weights)"))


# --------------------------------------------------------------------------- the checks

check_softmax = make_check(
    CHECKS, "check_softmax", __name__,
    "Check a student's ``softmax(x, dim=-1)`` against :func:`qkv.softmax`.")

check_soft_lookup = make_check(
    CHECKS, "check_soft_lookup", __name__,
    "Check ``soft_lookup(query, keys, values, temperature=1.0) -> (output, weights)``.")

check_additive_score = make_check(
    CHECKS, "check_additive_score", __name__,
    "Check ``additive_score(query, key, W_q, W_k, v_a)`` against :func:`qkv.additive_score`.")

check_luong_score = make_check(
    CHECKS, "check_luong_score", __name__,
    "Check ``luong_score(query, key, W=None)`` (dot, or general when W is given).")

check_top_k_lookup = make_check(
    CHECKS, "check_top_k_lookup", __name__,
    "Check ``top_k_lookup(query, keys, values, k)``: a soft lookup over each query's ``k`` best "
    "keys only; a bug of the printed version left in is named.")

check_lookup_entropy = make_check(
    CHECKS, "check_lookup_entropy", __name__,
    "Check the experiment ``lookup_entropy(temperature, generator)`` as a measurement (see "
    ":mod:`._experiment`).")

check_sparsemax_lookup = make_check(
    CHECKS, "check_sparsemax_lookup", __name__,
    "Check ``sparsemax_lookup(query, keys, values, temperature=1.0) -> (output, weights)``: a "
    "lookup whose weights are the sparsemax of the scores (their projection onto the simplex), so"
    " that some are exactly 0.")
