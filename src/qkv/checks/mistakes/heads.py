"""The right and wrong versions of assignment 10's ``mean_ablate`` and ``repeat_loss``, for
:mod:`..heads`'s mistakes and :mod:`.._ablation_experiment`'s reference.

With its default switches each gives the right answer; a switch puts one mistake back.
"""

from __future__ import annotations

from typing import Sequence

import torch.nn.functional as F
from torch import Tensor


def mean_ablate(head_outputs: Tensor, heads: Sequence[int], num_heads: int, *,
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


def repeat_loss(logits: Tensor, tokens: Tensor, repeat: Tensor, *, shift: bool = True,
                everywhere: bool = False, per_sequence: bool = False, roll: bool = False,
                marks_of_target: bool = False, zeros_counted: bool = False,
                probabilities: bool = False, backwards: bool = False, summed: bool = False,
                raw_nll: bool = False) -> Tensor:
    """Mean cross-entropy of token t + 1 from position t, over the positions ``repeat`` marks;
    or a known mistake (no shift; every position; the mean of each sequence's mean; ``roll``:
    the targets ``tokens.roll(-1)``, so the last position is scored on token 0;
    ``marks_of_target``: the marks of the target, ``repeat[:, 1:]``; ``zeros_counted``: the
    losses times the marks, averaged over every position, ``(loss * marks).mean()``;
    ``probabilities``: the softmax's probabilities handed to cross_entropy, which wants logits;
    ``backwards``: the shift the wrong way, position t + 1 scored on token t, ``logits[:, 1:]``
    against ``tokens[:, :-1]``, with the marks of the position scored, ``repeat[:, 1:]``, or
    with ``marks_of_target`` those of the target, ``repeat[:, :-1]``; ``summed``: the marked
    losses summed, not averaged; ``raw_nll``: ``F.nll_loss`` on the logits themselves, without
    the log_softmax it expects)."""
    if backwards:
        logits, target = logits[:, 1:], tokens[:, :-1]
        where = repeat[:, :-1] if marks_of_target else repeat[:, 1:]
    elif roll:
        logits, target, where = logits, tokens.roll(-1, dims=1), repeat
    elif shift:
        logits, target = logits[:, :-1], tokens[:, 1:]
        where = repeat[:, 1:] if marks_of_target else repeat[:, :-1]
    else:
        target, where = tokens, repeat
    if probabilities:
        logits = logits.softmax(-1)
    lose = F.nll_loss if raw_nll else F.cross_entropy
    loss = lose(logits.transpose(1, 2), target, reduction="none")
    if zeros_counted:
        return (loss * where).mean()
    if per_sequence:
        return ((loss * where).sum(-1) / where.sum(-1)).mean()
    if summed:
        return loss[where].sum()
    return loss.mean() if everywhere else loss[where].mean()
