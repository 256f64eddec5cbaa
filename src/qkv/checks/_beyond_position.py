"""Assignment 7: exercises that copying a page cannot answer (see :mod:`._beyond`): a debugging
exercise, RoPE with position interpolation (``apply_rope_scaled``), and an experiment,
``alibi_far_weight``, the weight ALiBi leaves on keys far back. Assignment 7's variation,
``apply_partial_rope``, is in :mod:`._beyond_mid`.
"""

from __future__ import annotations

from functools import partial

import torch
from torch import Tensor

import qkv

from ._beyond_early import F32, F64, _inputs
from ._experiment import Experiment
from .harness import Case, Exercise, half_case, Mistake, via_float32


def rope_scaled(x: Tensor, factor: float, *, inverse: bool = False, wrong_freq: bool = False,
                sign: int = 1) -> Tensor:
    """RoPE with position interpolation: row ``t`` at position ``t / factor`` (interleaved
    pairs, base 10000); or a bug of the printed version put back."""
    L, E = x.shape[-2], x.shape[-1]
    pos = torch.arange(L, dtype=F64, device=x.device) * (factor if inverse else 1.0 / factor)
    i = torch.arange(E // 2, dtype=F64, device=x.device)
    freq = 10000.0 ** (-(i if wrong_freq else 2 * i) / E)
    angles = pos[:, None] * freq[None, :]
    cos, sin = angles.cos(), sign * angles.sin()
    a, b = x.to(F64)[..., 0::2], x.to(F64)[..., 1::2]
    out = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    return out.to(x.dtype)


APPLY_ROPE_SCALED = Exercise(
    name="apply_rope_scaled", reference=via_float32(rope_scaled), legend="(..., L, E)",
    cases=[Case("x (L=5, E=4), factor=2.0", _inputs((5, 4), extra=(2.0,)), F64),
           Case("x (B=2, H=2, L=6, E=8), factor=4.0", _inputs((2, 2, 6, 8), extra=(4.0,)), F32),
           Case("x (L=3, E=6), factor=1.0 (plain RoPE)", _inputs((3, 6), extra=(1.0,)), F64),
           half_case("x (B=2, H=2, L=5, E=8), factor=2.0", _inputs((2, 2, 5, 8), extra=(2.0,)))],
    mistakes=[
        Mistake("positions multiplied by the factor instead of divided (a bug of the printed "
                "function)", "interpolation squeezes positions: t / factor",
                partial(rope_scaled, inverse=True)),
        Mistake("frequencies base^(-i/E) instead of base^(-2i/E) (a bug of the printed "
                "function)", "pair i turns at base ** (-2 * i / E)",
                partial(rope_scaled, wrong_freq=True)),
        Mistake("rotation the wrong way (sin negated) (a bug of the printed function)",
                "(a cos - b sin, a sin + b cos)", partial(rope_scaled, sign=-1)),
    ],
)


def alibi_far_weight(head: int, generator: torch.Generator, *, causal: bool = True,
                     reach: int = 17, first: int = 32) -> float:
    """With ALiBi (8 heads) added to random scores of 64 queries and keys (E=16), the mean
    weight the last 32 queries give to keys more than 16 positions back, in ``head``; or with a
    slip (``causal=False``: no causal mask; ``reach``: the nearest distance counted as far;
    ``first``: the first query averaged over)."""
    q = torch.randn(64, 16, generator=generator)
    k = torch.randn(64, 16, generator=generator)
    scores = q @ k.T / 4 + qkv.alibi_bias(8, 64)[head]
    if causal:
        scores = scores.masked_fill(~qkv.causal_mask(64), float("-inf"))
    w = torch.softmax(scores, dim=-1)[first:]
    far = (torch.arange(64)[:, None] - torch.arange(64)[None, :] >= reach)[first:]
    return (w * far).sum(dim=-1).mean().item()


ALIBI_FAR_WEIGHT = Experiment(
    name="alibi_far_weight", reference=alibi_far_weight, settings=((0,), (4,), (7,)),
    helpers={"alibi_bias": qkv.alibi_bias},
    quantity="mean weight beyond 16 positions",
    mistakes=(
        Mistake("no causal mask", "mask the future (key j > query i) before the softmax",
                partial(alibi_far_weight, causal=False)),
        *(Mistake(f"queries {first}..63 averaged instead of the last 32, 32..63", "average over "
                  "the last 32 queries, rows 32..63 of the weights: w[32:]",
                  partial(alibi_far_weight, first=first)) for first in (31, 33, 0)),
        Mistake("keys 16 positions back counted as far (>= 16 instead of > 16)",
                "far means i - j > 16", partial(alibi_far_weight, reach=16)),
    ),
    hint="draw q then k (64, 16) from the generator; scores q @ k.T / 4 plus your ALiBi bias of "
         "8 heads for that head, causal mask; return, over queries 32..63, the mean total weight "
         "on keys more than 16 positions back")
