"""Measure what attention heads do: simple statistics that label heads.

A head's weights on one sentence form an ``(T, T)`` matrix. A few numbers
summarise its habits: how much weight goes, on average over the queries, to the
previous token, the next token, the token itself, the first token ([CLS] in BERT)
and the last one ([SEP]); and how spread out each row is (its entropy, divided by
``log T`` so that 0 means all weight on one key and 1 means uniform). Averaged
over a handful of sentences they give each head a label such as "previous" or
"[CLS], sharp". They describe behaviour on those sentences, nothing more: a label
is a measurement, not an explanation of what the head is for.

Two scores test a head for a job rather than a habit: :func:`previous_token_score`
(the weight on the token just before) and :func:`induction_score` (the weight on the
token that followed the previous occurrence of the current token), the two heads of
the induction circuit that :mod:`qkv.induction` grows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import List, Sequence, Tuple

import torch
from torch import Tensor

from . import _validate as v

#: A handful of sentences of different shapes on which heads are measured.
SENTENCES: Tuple[str, ...] = (
    "The animal didn't cross the street because it was too tired",
    "The cat that I saw yesterday sat on the mat.",
    "She gave the book to her brother because he asked for it.",
    "Attention lets every word look at every other word in the sentence.",
    "The keys to the cabinet are on the table.",
    "After the storm passed, the children ran outside to play.",
)

#: The positional patterns a head is tested for, in the order of :class:`HeadStats`.
PATTERNS: Tuple[str, ...] = ("previous", "next", "itself", "first", "last")


@dataclass
class HeadStats:
    """Per-head statistics, each a tensor of shape ``(layers, heads)``.

    Attributes:
        previous: mean weight from query ``i`` to key ``i - 1``.
        next: mean weight from query ``i`` to key ``i + 1``.
        itself: mean weight on the diagonal (each token on itself).
        first: mean weight on key 0 ([CLS] for BERT).
        last: mean weight on the last key ([SEP] for BERT).
        entropy: mean row entropy divided by ``log T`` (0 = one key, 1 = uniform).
    """

    previous: Tensor
    next: Tensor
    itself: Tensor
    first: Tensor
    last: Tensor
    entropy: Tensor

    def as_dict(self) -> dict:
        """The statistics by name, in field order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def stack_layers(attentions: Sequence[Tensor]) -> Tensor:
    """Stack per-layer weights of one sentence into one tensor.

    Args:
        attentions: one tensor per layer, ``(1, H, T, T)`` as Hugging Face
            returns them (``output_attentions=True``) or ``(H, T, T)``.

    Returns:
        The weights of every layer and head.

    Shape:
        - output: ``(layers, H, T, T)``
    """
    if len(attentions) == 0:
        raise ValueError("attentions must hold at least one layer, got an empty sequence")
    out = []
    for i, a in enumerate(attentions):
        v.require_tensor(f"attentions[{i}]", a)
        if a.dim() == 4:
            if a.shape[0] != 1:
                raise ValueError(
                    f"attentions[{i}] must hold one sentence, shape (1, H, T, T), "
                    f"got {v.shape_str(a)}"
                )
            a = a[0]
        if a.dim() != 3 or a.shape[-1] != a.shape[-2]:
            raise ValueError(
                f"attentions[{i}] must have shape (1, H, T, T) or (H, T, T), got {v.shape_str(a)}"
            )
        out.append(a)
    return torch.stack(out)


def _one_sentence(weights: Tensor) -> Tensor:
    """The six statistics of one sentence, stacked: ``(6, layers, H)``."""
    T = weights.shape[-1]
    if T < 2:
        raise ValueError(f"each sentence needs at least 2 tokens, got T={T}")
    row_entropy = -(weights * weights.clamp_min(torch.finfo(weights.dtype).tiny).log()).sum(-1)
    return torch.stack(
        (
            weights.diagonal(-1, -2, -1).mean(-1),  # queries 1..T-1 looking one step back
            weights.diagonal(1, -2, -1).mean(-1),  # queries 0..T-2 looking one step ahead
            weights.diagonal(0, -2, -1).mean(-1),
            weights[..., 0].mean(-1),
            weights[..., -1].mean(-1),
            row_entropy.mean(-1) / math.log(T),
        )
    )


def head_statistics(weights: Sequence[Tensor]) -> HeadStats:
    """Average the head statistics over several sentences.

    Sentences may have different lengths, so each is measured on its own and
    the results are averaged (every sentence counts the same).

    Args:
        weights: one tensor per sentence, as :func:`stack_layers` returns.

    Returns:
        The statistics, each of shape ``(layers, H)``.

    Shape:
        - weights[i]: ``(layers, H, T_i, T_i)``
    """
    if isinstance(weights, Tensor) or len(weights) == 0:
        raise TypeError(
            "weights must be a non-empty sequence of (layers, H, T, T) tensors, one per sentence"
        )
    per = []
    for i, w in enumerate(weights):
        v.require_tensor(f"weights[{i}]", w)
        if w.dim() != 4 or w.shape[-1] != w.shape[-2] or w.shape[:2] != weights[0].shape[:2]:
            raise ValueError(
                f"weights[{i}] must have shape (layers, H, T, T) with the same layers and H as "
                f"weights[0] {v.shape_str(weights[0])}, got {v.shape_str(w)}"
            )
        per.append(_one_sentence(w))
    mean = torch.stack(per).mean(0)
    return HeadStats(*mean.unbind(0))


def label_heads(
    stats: HeadStats, threshold: float = 0.5, sharp: float = 0.3, broad: float = 0.7
) -> List[List[str]]:
    """Name each head after its dominant habit.

    A head is called after the pattern of :data:`PATTERNS` that gets the most
    weight, if that weight is at least ``threshold``, and "mixed" otherwise;
    "sharp" or "broad" is added when its normalised entropy is below ``sharp``
    or above ``broad``. With BERT, "first" is [CLS] and "last" is [SEP].

    Args:
        stats: from :func:`head_statistics`.
        threshold: mean weight a pattern needs to name the head.
        sharp: normalised entropy below which a head is "sharp".
        broad: normalised entropy above which a head is "broad".

    Returns:
        ``labels[layer][head]``, e.g. ``"previous, sharp"``.
    """
    v.require_instance("stats", stats, HeadStats, "a qkv.heads.HeadStats (from head_statistics)")
    if not 0 <= sharp <= broad <= 1:
        raise ValueError(f"need 0 <= sharp <= broad <= 1, got sharp={sharp}, broad={broad}")
    pattern = torch.stack([getattr(stats, name) for name in PATTERNS])  # (5, layers, H)
    best, which = pattern.max(0)
    labels = []
    for layer in range(best.shape[0]):
        row = []
        for head in range(best.shape[1]):
            name = PATTERNS[int(which[layer, head])] if best[layer, head] >= threshold else "mixed"
            e = float(stats.entropy[layer, head])
            if e < sharp:
                name += ", sharp"
            elif e > broad:
                name += ", broad"
            row.append(name)
        labels.append(row)
    return labels


def token_index(tokens: Sequence[str], word: str, occurrence: int = 0) -> int:
    """Position of ``word`` in ``tokens`` (its ``occurrence``-th appearance, from 0).

    Args:
        tokens: word pieces, e.g. from :func:`qkv.pretrained.attentions_and_hidden_states`.
        word: the token to find.
        occurrence: which appearance to return when it appears several times.

    Returns:
        The index into ``tokens``.
    """
    v.require_int("occurrence", occurrence, minimum=0)
    hits = [i for i, t in enumerate(tokens) if t == word]
    if occurrence >= len(hits):
        raise ValueError(
            f"token {word!r} appears {len(hits)} time(s) in {list(tokens)}, "
            f"cannot take occurrence {occurrence}"
        )
    return hits[occurrence]


def top_heads(weights: Tensor, query: int, key: int, k: int = 3) -> List[Tuple[int, int, float]]:
    """The heads that put the most weight from one query on one key.

    Args:
        weights: every layer and head on one sentence (see :func:`stack_layers`).
        query: index of the query token (the row).
        key: index of the key token (the column).
        k: how many heads to return.

    Returns:
        ``[(layer, head, weight), ...]``, largest weight first.

    Shape:
        - weights: ``(layers, H, T, T)``
    """
    v.require_dim("weights", weights, 4, "(layers, H, T, T)")
    layers, H, L, S = weights.shape
    v.require_int("query", query, minimum=0)
    v.require_int("key", key, minimum=0)
    v.require_int("k", k)
    if not (0 <= query < L and 0 <= key < S):
        raise ValueError(f"query={query} and key={key} must index a ({L}, {S}) weight matrix")
    if not 1 <= k <= layers * H:
        raise ValueError(f"k must be between 1 and layers * heads = {layers * H}, got {k}")
    values, flat = weights[:, :, query, key].flatten().topk(k)
    return [(int(i) // H, int(i) % H, float(w)) for w, i in zip(values, flat)]


def previous_token_score(weights: Tensor) -> Tensor:
    """How much weight each head puts on the previous token, averaged over queries and batch.

    A perfect previous-token head scores 1; a head that spreads its weight evenly over
    the ``t + 1`` keys a causal query ``t`` may see scores about ``log(T) / T``.

    Args:
        weights: attention weights of one or more layers.

    Returns:
        The mean weight from query ``t`` on key ``t - 1`` (queries ``1 .. T-1``).

    Shape:
        - weights: ``(..., B, H, T, T)``
        - output: ``(..., H)``
    """
    v.require_min_dim("weights", weights, 4, "(..., B, H, T, T)")
    return weights.diagonal(-1, -2, -1).mean(-1).mean(-2)


def induction_targets(tokens: Tensor) -> Tensor:
    """For every position, the key an induction head attends to, or -1.

    Query ``t`` whose token appeared before, last at ``j < t``, should look at ``j + 1``:
    the token that followed the current token last time, which is the best guess
    for the token that follows it now.

    Args:
        tokens: token ids.

    Returns:
        ``j + 1`` for the most recent earlier occurrence ``j`` of ``tokens[b, t]``, else -1.

    Shape:
        - tokens: ``(B, T)``
        - output: ``(B, T)``
    """
    v.require_dim("tokens", tokens, 2, "(B, T)")
    T = tokens.shape[1]
    earlier = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril(-1)  # key j < query t
    same = (tokens[:, :, None] == tokens[:, None, :]) & earlier
    j = torch.arange(T, device=tokens.device)
    last = torch.where(same, j, -1).amax(-1)  # most recent earlier occurrence, -1 if none
    return torch.where(last >= 0, last + 1, -1)


def induction_score(weights: Tensor, tokens: Tensor) -> Tensor:
    """How much weight each head puts on the token after the previous occurrence of the current one.

    Averaged over the queries that have such a token (see :func:`induction_targets`)
    and over the batch. A perfect induction head scores 1.

    Args:
        weights: attention weights of one or more layers on ``tokens``.
        tokens: the sequences the weights were computed on.

    Returns:
        The mean weight on the induction target.

    Shape:
        - weights: ``(..., B, H, T, T)``, tokens: ``(B, T)``
        - output: ``(..., H)``
    """
    v.require_min_dim("weights", weights, 4, "(..., B, H, T, T)")
    target = induction_targets(tokens)
    if weights.shape[-4] != tokens.shape[0] or weights.shape[-1] != tokens.shape[1]:
        raise ValueError(f"weights {v.shape_str(weights)} do not match tokens {v.shape_str(tokens)}")
    has = target >= 0
    if not has.any():
        raise ValueError("no token repeats in tokens: there is nothing to score an induction head on")
    index = target.clamp_min(0)[:, None, :, None].expand(*weights.shape[:-1], 1)
    on_target = weights.gather(-1, index)[..., 0]  # (..., B, H, T)
    mask = has[:, None, :].to(weights.dtype)
    return (on_target * mask).sum((-3, -1)) / mask.sum((-3, -1))
