"""Assignment 9: exercises that copying a page cannot answer (see :mod:`._beyond`): linear
attention, a FlexAttention ``mask_mod`` for a pattern the reference does not contain, and an
experiment on how far linear attention is from softmax attention."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import torch
from torch import Tensor

import qkv

from ._experiment import Experiment
from .harness import Case, Exercise, Mistake
from .mistakes.attention import TORCH_ATTENTION, qkv_inputs

# --------------------------------------------------------------- assignment 9: linear, flex


def _linear_cases():
    def make(batch, L, S, E, Ev, **kw):
        def build(gen, device, dtype):
            return qkv_inputs(gen, device, dtype, batch, L, S, E, Ev), kw
        return build
    f32, f64 = torch.float32, torch.float64
    return [
        Case("unbatched input with L=3, S=5, E=4, Ev=6", make((), 3, 5, 4, 6), f64),
        Case("batched input (B=2, H=2) with L=S=6, E=8, Ev=3 and is_causal=True",
             make((2, 2), 6, 6, 8, 3, is_causal=True), f64),
        Case("batched input (B=2) with L=4, S=7, E=4, Ev=5", make((2,), 4, 7, 4, 5), f32),
    ]


def _linear_variant(q, k, v, is_causal=False, *, phi=None, normalise=True, causal=True):
    phi = phi or qkv.elu_feature_map
    sim = phi(q) @ phi(k).transpose(-2, -1)
    if is_causal and causal:
        sim = sim.tril()
    if normalise:
        sim = sim / (sim.sum(dim=-1, keepdim=True) + 1e-6)
    return sim @ v


LINEAR_ATTENTION = Exercise(
    name="linear_attention", reference=qkv.linear_attention, cases=_linear_cases(),
    forbid=TORCH_ATTENTION, legend="(..., L, Ev)",
    mistakes=[
        Mistake("feature map elu(x) without the + 1", "phi(x) = elu(x) + 1 is positive, so no "
                "weight is negative", partial(_linear_variant, phi=torch.nn.functional.elu)),
        Mistake("no normaliser", "divide by phi(q_i) . sum_j phi(k_j) (+ 1e-6)",
                partial(_linear_variant, normalise=False)),
        Mistake("is_causal ignored", "when causal, query i sums over keys 0..i only",
                partial(_linear_variant, causal=False)),
    ],
)


def linear_gap(E: int, generator: torch.Generator) -> float:
    """The mean absolute difference between softmax attention and linear attention (``elu + 1``)
    on 64 random queries, keys and values of width ``E``."""
    q, k, v = (torch.randn(64, E, generator=generator) for _ in range(3))
    exact = torch.softmax(q @ k.T / math.sqrt(E), dim=-1) @ v
    return (exact - qkv.linear_attention(q, k, v)).abs().mean().item()


LINEAR_GAP = Experiment(
    name="linear_gap", reference=linear_gap, settings=((4,), (32,)),
    helpers={"linear_attention": qkv.linear_attention},
    quantity="mean gap between softmax and linear attention",
    hint="draw q, k and v (64, E) from the generator in that order, compute softmax attention "
         "(scale 1/sqrt(E)) and your linear_attention on them, and return the mean absolute "
         "difference of the two outputs")


def dilated_window(L: int, S: int, window: int, dilation: int) -> Tensor:
    """(L, S) bool: query ``i`` sees key ``j`` when ``0 <= i - j < window * dilation`` and
    ``i - j`` is a multiple of ``dilation``."""
    gap = torch.arange(L)[:, None] - torch.arange(S)[None, :]
    return (gap >= 0) & (gap < window * dilation) & (gap % dilation == 0)


def _run_mask_mod(student: Any, window: int, dilation: int, L: int, S: int) -> Tensor:
    """Build the student's ``mask_mod`` and evaluate it on every (query, key) pair at once, as
    FlexAttention's ``create_mask`` does (broadcast index tensors)."""
    mask_mod = student(window, dilation)
    if not callable(mask_mod):
        raise TypeError(f"dilated_window_mask_mod should return a function "
                        f"mask_mod(b, h, q_idx, kv_idx), got {type(mask_mod).__name__}")
    zero = torch.zeros((), dtype=torch.long)
    return mask_mod(zero, zero, torch.arange(L)[:, None], torch.arange(S)[None, :])


def _mask_mod_cases():
    def make(window, dilation, L, S):
        def build(gen, device, dtype):
            return (window, dilation, L, S), {}
        return build
    return [Case(f"window={w}, dilation={d}, L={L}, S={S}", make(w, d, L, S), None)
            for w, d, L, S in ((3, 2, 8, 8), (2, 3, 10, 10), (4, 1, 6, 6), (1, 5, 7, 7))]


def _dilated_variant(window, dilation, L, S, *, span=None, strict=False):
    gap = torch.arange(L)[:, None] - torch.arange(S)[None, :]
    reach = window * dilation if span is None else span(window, dilation)
    return (gap >= 0) & ((gap <= reach) if strict else (gap < reach)) & (gap % dilation == 0)


DILATED_WINDOW_MASK_MOD = Exercise(
    name="dilated_window_mask_mod", run_student=_run_mask_mod,
    reference=lambda window, dilation, L, S: dilated_window(L, S, window, dilation),
    cases=_mask_mod_cases(), legend="(L, S) bool",
    mistakes=[
        Mistake("the window counts positions, not kept keys (reach window instead of "
                "window * dilation)", "each query keeps `window` keys, dilation apart",
                partial(_dilated_variant, span=lambda w, d: w)),
        Mistake("one key too many (<= instead of <)", "keys i - j = 0, d, ..., (window-1)*d",
                partial(_dilated_variant, strict=True)),
    ],
)
