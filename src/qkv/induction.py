"""Induction heads, grown on the page: a task, a tiny model, head scores and ablation.

The task is next-token prediction on random tokens in which one segment is repeated:
the first time the segment appears its tokens cannot be predicted, the second time
each one can, by finding the previous occurrence of the current token and copying the
token that followed it. A two-layer attention-only transformer learns to do exactly
that with two kinds of head (Elhage et al., 2021; Olsson et al., 2022): a
*previous-token head* in layer 0 and an *induction head* in layer 1.
:func:`measure_induction` follows both through their scores in :mod:`qkv.heads`;
:func:`ablate_heads` removes heads to test what the weights only suggest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ContextManager, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import _validate as v
from ._ablation import check_heads, zero_columns
from .heads import induction_score, previous_token_score
from .multi_head import MultiHeadAttention

__all__ = [
    "AttentionOnlyTransformer",
    "InductionTask",
    "ablate_heads",
    "measure_induction",
    "train_induction",
]


class InductionBatch(NamedTuple):
    """Sequences with a repeated segment, and where its two copies are.

    Shape:
        - tokens: ``(B, T)``, token ids
        - first: ``(B, T)`` bool, the query positions whose *next* token is the
          segment's, seen for the first time (unpredictable)
        - repeat: ``(B, T)`` bool, the query positions whose next token is the
          segment's second time (predictable by copying from the first)
    """

    tokens: Tensor
    first: Tensor
    repeat: Tensor


@dataclass(frozen=True)
class InductionTask:
    """Random distinct tokens in which a segment of ``min_repeat..max_repeat`` tokens is repeated.

    Every token of a sequence is distinct except the segment's second copy, so the
    only way to predict a token is to find where the current token was seen before.
    The segment's length and place vary per sequence, so no fixed offset finds it.

    Args:
        vocab_size: number of token ids ``V`` (at least ``length``).
        length: tokens per sequence ``T``.
        min_repeat: shortest segment.
        max_repeat: longest segment (two copies must fit: ``2 * max_repeat <= T``).
    """

    vocab_size: int = 32
    length: int = 20
    min_repeat: int = 5
    max_repeat: int = 10

    def __post_init__(self) -> None:
        v.require_int("length", self.length, minimum=4)
        v.require_int(f"vocab_size (at least length={self.length})", self.vocab_size, self.length)
        v.require_int("min_repeat", self.min_repeat, minimum=2)
        v.require_int(f"max_repeat (at least min_repeat={self.min_repeat})", self.max_repeat,
                      self.min_repeat)
        if 2 * self.max_repeat > self.length:
            raise ValueError(f"two copies of max_repeat={self.max_repeat} tokens do not fit in "
                             f"length={self.length}")

    def sample(self, batch_size: int, generator: torch.Generator) -> InductionBatch:
        """Draw a batch on the generator's device.

        Args:
            batch_size: number of sequences ``B``.
            generator: source of randomness (its device is used).

        Returns:
            An :class:`InductionBatch`.
        """
        v.require_int("batch_size", batch_size)
        v.require_instance("generator", generator, torch.Generator, "a torch.Generator")
        v.require_fits(f"the (batch_size, vocab_size) permutations for batch_size={batch_size}",
                       (batch_size, self.vocab_size), torch.float32, generator.device,
                       hint="check batch_size and vocab_size")
        B, T, dev = batch_size, self.length, generator.device
        f = {"generator": generator, "device": dev}
        # T distinct tokens per sequence: the first T of a random permutation of the vocabulary
        fresh = torch.rand(B, self.vocab_size, **f).argsort(-1)[:, :T]
        n = torch.randint(self.min_repeat, self.max_repeat + 1, (B, 1), **f)
        start = (torch.rand(B, 1, **f) * (T - 2 * n + 1)).long()  # uniform in 0..T-2n
        pos = torch.arange(T, device=dev)[None]
        copy = (pos >= start + n) & (pos < start + 2 * n)
        tokens = fresh.gather(1, torch.where(copy, pos - n, pos))
        # query t predicts token t + 1: in the first copy for t in [s, s+n-2], the second for [s+n, s+2n-2]
        first = (pos >= start) & (pos < start + n - 1)
        repeat = (pos >= start + n) & (pos < start + 2 * n - 1)
        return InductionBatch(tokens, first, repeat)


class AttentionOnlyTransformer(nn.Module):
    """A causal transformer without MLPs: embeddings, attention layers on a residual stream, unembedding.

    ``x_0 = embed(tokens)``; ``x_{l+1} = x_l + attention_l(x_l + pos, x_l + pos, x_l)``
    (query, key, value) with a causal :class:`qkv.MultiHeadAttention` per layer;
    ``logits = unembed(x_L)``. The learned positions ``pos`` enter queries and keys only
    (position-infused attention, Press et al., 2021): they steer where a head looks, while
    the values, and so the residual stream, carry tokens alone. Without MLPs or layer
    norms everything the model computes goes through attention, which keeps its heads
    readable (Elhage et al., 2021).

    Args:
        vocab_size: number of token ids ``V``.
        max_len: longest sequence ``T``.
        d_model: width of the residual stream ``D``.
        num_layers: attention layers.
        num_heads: heads per layer ``H``; must divide ``d_model``.
        device: where to create the parameters.
        dtype: dtype of the parameters.

    Shape:
        - tokens: ``(B, T)``
        - logits: ``(B, T, V)``; weights ``(layers, B, H, T, T)``
    """

    def __init__(
        self,
        vocab_size: int,
        max_len: int,
        d_model: int = 64,
        num_layers: int = 2,
        num_heads: int = 2,
        device: Optional[torch.device] = None,
        dtype: Optional[torch.dtype] = None,
    ) -> None:
        super().__init__()
        sizes = {"vocab_size": vocab_size, "max_len": max_len, "d_model": d_model,
                 "num_layers": num_layers, "num_heads": num_heads}
        for name, n in sizes.items():
            v.require_int(name, n)
        if d_model % num_heads:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
        f = {"device": v.require_device("device", device),
             "dtype": dtype if dtype is None else v.require_float_dtype("dtype", dtype)}
        # embedding, unembedding, positions and 4 projections per layer, with their biases
        count = (2 * vocab_size + max_len) * d_model + vocab_size + num_layers * 4 * (d_model + 1) * d_model
        v.require_weights_fit("AttentionOnlyTransformer", sizes, count, dtype, f["device"])
        self.embed = nn.Embedding(vocab_size, d_model, **f)
        self.pos = nn.Parameter(torch.randn(max_len, d_model, **f))
        self.layers = nn.ModuleList(MultiHeadAttention(d_model, num_heads, **f) for _ in range(num_layers))
        self.unembed = nn.Linear(d_model, vocab_size, **f)

    def forward(self, tokens: Tensor) -> Tuple[Tensor, Tensor]:
        """Next-token logits at every position, and every head's attention weights.

        Args:
            tokens: token ids.

        Returns:
            ``(logits, weights)``.
        """
        v.require_tokens("tokens", tokens, self.embed.num_embeddings, "(B, T)")
        T = tokens.shape[1]
        if T > self.pos.shape[0]:
            raise ValueError(f"tokens has {T} positions, the model was built for max_len={self.pos.shape[0]}")
        x = self.embed(tokens)
        weights = []
        for attention in self.layers:
            where = x + self.pos[:T]  # positions steer queries and keys; values carry no position
            out, w = attention(where, where, x, need_weights=True, average_attn_weights=False,
                               is_causal=True)
            x = x + out  # each layer adds what its heads gathered to the residual stream
            weights.append(w)
        return self.unembed(x), torch.stack(weights)


class InductionMeasurement(NamedTuple):
    """What :func:`measure_induction` finds on a batch (each field gains a leading ``(N,)`` in a log).

    Shape:
        - loss_first, loss_repeat, accuracy: ``()``; the mean cross-entropy of the
          next token on the segment's first copy and on its repeat, and how often the
          most likely token is right on the repeat
        - previous, induction: ``(layers, H)``, every head's
          :func:`qkv.heads.previous_token_score` and :func:`qkv.heads.induction_score`
    """

    loss_first: Tensor
    loss_repeat: Tensor
    accuracy: Tensor
    previous: Tensor
    induction: Tensor


@torch.no_grad()
def measure_induction(model: AttentionOnlyTransformer, batch: InductionBatch) -> InductionMeasurement:
    """In-context losses, accuracy on the repeat and head scores of ``model`` on ``batch``.

    Args:
        model: the model to measure (its mode is left as it is).
        batch: sequences from :meth:`InductionTask.sample`.

    Returns:
        A :class:`InductionMeasurement`.
    """
    v.require_instance("model", model, AttentionOnlyTransformer, "a qkv.AttentionOnlyTransformer")
    v.require_instance("batch", batch, InductionBatch, "a qkv.InductionBatch")
    logits, weights = model(batch.tokens)
    # query t predicts token t + 1: the last position has nothing to predict
    loss = F.cross_entropy(logits[:, :-1].transpose(1, 2), batch.tokens[:, 1:], reduction="none")
    first, repeat = batch.first[:, :-1], batch.repeat[:, :-1]
    right = logits[:, :-1].argmax(-1) == batch.tokens[:, 1:]
    return InductionMeasurement(
        loss[first].mean(), loss[repeat].mean(), right[repeat].to(loss.dtype).mean(),
        previous_token_score(weights), induction_score(weights, batch.tokens),
    )


def train_induction(
    model: AttentionOnlyTransformer,
    task: InductionTask,
    steps: int,
    probe: InductionBatch,
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    every: int = 25,
) -> Tuple[Tensor, InductionMeasurement]:
    """Train on fresh batches (next-token cross-entropy at every position), measuring as it goes.

    The batches depend only on ``task`` and ``seed``; they are drawn on the model's device.

    Args:
        model: the model to train, in place.
        task: where the batches come from.
        steps: optimiser steps (Adam).
        probe: a fixed batch on which :func:`measure_induction` runs every ``every`` steps.
        batch_size: sequences per step.
        lr: Adam's learning rate.
        seed: seed of the batches.
        every: steps between two measurements (the last step is always measured).

    Returns:
        ``(at, log)``: the steps measured, and a :class:`InductionMeasurement` whose fields
        are stacked over them.

    Shape:
        - at: ``(N,)``; every field of log: ``(N, ...)``
    """
    v.require_instance("model", model, AttentionOnlyTransformer, "a qkv.AttentionOnlyTransformer")
    v.require_instance("task", task, InductionTask, "a qkv.InductionTask")
    v.require_int("steps", steps, minimum=0)
    v.require_int("every", every)
    v.require_positive_number("lr", lr)
    device = next(model.parameters()).device
    gen = torch.Generator(device=device).manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    at, log = [], []
    for step in range(steps + 1):
        if step % every == 0 or step == steps:
            at.append(step)
            log.append(measure_induction(model, probe))
        if step == steps:
            break
        tokens = task.sample(batch_size, gen).tokens
        logits, _ = model(tokens)
        loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.tensor(at), InductionMeasurement(*(torch.stack(field) for field in zip(*log)))


def ablate_heads(model: AttentionOnlyTransformer, heads: Sequence[Tuple[int, int]]) -> ContextManager[None]:
    """Remove heads for the duration of a ``with`` block, then put them back exactly.

    A head reaches the rest of the model only through its slice of the output
    projection ``W^O``: the columns that read its output. Zeroing those columns
    removes the head (its output is replaced by zero) and nothing else.

    Args:
        model: the model whose heads to remove.
        heads: ``(layer, head)`` pairs.

    Returns:
        A context manager: ``with ablate_heads(model, [(1, 0)]): ...``.
    """
    v.require_instance("model", model, AttentionOnlyTransformer, "a qkv.AttentionOnlyTransformer")
    heads = check_heads(heads, len(model.layers), model.layers[0].num_heads)
    return zero_columns(model.layers, heads)
