"""Checks for assignment 10 (what heads do): ``mean_ablate`` and ``repeat_loss``.

``mean_ablate`` is a variation on the chapter's ablation, which zeroes a head's slice of the
output projection: *mean* ablation replaces the head's output by its average over the batch and
the positions, so the rest of the model still receives the head's typical contribution and only
what it computes for each token is lost. The assignment prints a version with bugs; each
:class:`Mistake` below is the right function with one bug put back. ``repeat_loss`` is the
in-context loss of :func:`qkv.measure_induction`, written by the student for the experiment.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from .harness import Case, Exercise, Mistake, checks_of, randn, run_check

__all__ = ["check_mean_ablate", "check_repeat_loss"]


def _mean_ablate(head_outputs: Tensor, heads: Sequence[int], num_heads: int, *,
                 dims=(0, 1), narrow: bool = False, zero: bool = False) -> Tensor:
    """``head_outputs`` (B, T, D), the heads side by side, with each head of ``heads`` replaced
    by its mean over the batch and the positions; or a bug of the printed version put back."""
    out = head_outputs.clone()
    d = head_outputs.shape[-1] // num_heads
    for h in heads:
        cols = slice(h, h + d) if narrow else slice(h * d, (h + 1) * d)
        part = out[..., cols]
        out[..., cols] = 0.0 if zero else part.mean(dim=dims, keepdim=True).expand_as(part)
    return out


def _ablate_case(B, T, D, heads, num_heads):
    def build(gen, device, dtype):
        return (randn(gen, B, T, D, device=device, dtype=dtype) + 1.0, list(heads),
                num_heads), {}
    return build


MEAN_ABLATE = Exercise(
    name="mean_ablate", reference=_mean_ablate, legend="(B, T, D)",
    cases=[Case("B=2, T=5, D=8, 2 heads, heads=[1]", _ablate_case(2, 5, 8, [1], 2),
                torch.float64),
           Case("B=3, T=4, D=12, 4 heads, heads=[0, 2]", _ablate_case(3, 4, 12, [0, 2], 4),
                torch.float32),
           Case("B=1, T=6, D=6, 3 heads, heads=[]", _ablate_case(1, 6, 6, [], 3),
                torch.float64)],
    mistakes=[
        Mistake("the mean over the features (dim=-1) (a bug of the printed function)",
                "average over the batch and the positions, dims (0, 1), one mean per feature",
                partial(_mean_ablate, dims=(-1,))),
        Mistake("the mean over the positions of each sequence only",
                "average over the batch too: dims (0, 1)", partial(_mean_ablate, dims=(1,))),
        Mistake("head h's columns taken as h .. h + d (a bug of the printed function)",
                "head h owns columns h * d .. (h + 1) * d, d = D // num_heads",
                partial(_mean_ablate, narrow=True)),
        Mistake("the head zeroed instead of replaced by its mean",
                "mean ablation keeps the head's average output", partial(_mean_ablate,
                                                                          zero=True)),
    ],
)


def _repeat_loss(logits: Tensor, tokens: Tensor, repeat: Tensor, *, shift: bool = True,
                 everywhere: bool = False) -> Tensor:
    """Mean cross-entropy of token t + 1 from position t, over the positions ``repeat`` marks;
    or a known mistake (no shift; every position)."""
    if shift:
        logits, target, where = logits[:, :-1], tokens[:, 1:], repeat[:, :-1]
    else:
        target, where = tokens, repeat
    loss = F.cross_entropy(logits.transpose(1, 2), target, reduction="none")
    return loss.mean() if everywhere else loss[where].mean()


def _loss_case(B, T, V):
    def build(gen, device, dtype):
        logits = randn(gen, B, T, V, device=device, dtype=dtype) * 2
        tokens = torch.randint(0, V, (B, T), generator=gen).to(device)
        repeat = torch.rand(B, T, generator=gen) < 0.4
        repeat[:, 0] = True  # every sequence has a position to score
        return (logits, tokens, repeat.to(device)), {}
    return build


REPEAT_LOSS = Exercise(
    name="repeat_loss", reference=_repeat_loss, legend="() a scalar tensor",
    cases=[Case("B=2, T=6, V=5", _loss_case(2, 6, 5), torch.float64),
           Case("B=4, T=10, V=32", _loss_case(4, 10, 32), torch.float32)],
    mistakes=[
        Mistake("position t scored on token t, not t + 1", "query t predicts token t + 1: "
                "logits[:, :-1] against tokens[:, 1:], marks repeat[:, :-1]",
                partial(_repeat_loss, shift=False)),
        Mistake("the mean over every position", "average only where repeat is True",
                partial(_repeat_loss, everywhere=True)),
    ],
)


#: This module's checks, by the name test cells call them (for :mod:`.grading`).
CHECKS = checks_of(MEAN_ABLATE, REPEAT_LOSS)


def check_mean_ablate(mean_ablate: Callable[..., Tensor], seed: Optional[int] = 0) -> None:
    """Check the fixed ``mean_ablate(head_outputs, heads, num_heads)``: the heads' outputs
    side by side, ``(B, T, D)``, with each listed head replaced by its mean over the batch and
    the positions; a bug of the printed version left in is named.

    Raises:
        CheckFailed: naming the input it fails on and what to look at.
    """
    __tracebackhide__ = True
    run_check(CHECKS["check_mean_ablate"], mean_ablate, seed)


def check_repeat_loss(repeat_loss: Callable[..., Tensor], seed: Optional[int] = 0) -> None:
    """Check ``repeat_loss(logits, tokens, repeat)``: the mean next-token cross-entropy over
    the positions ``repeat`` marks (position ``t`` predicts token ``t + 1``).

    Raises:
        CheckFailed: naming the input it fails on and what to look at.
    """
    __tracebackhide__ = True
    run_check(CHECKS["check_repeat_loss"], repeat_loss, seed)
