"""A toy retrieval task and a one-head attention model small enough to train in seconds.

The task separates *what is matched* from *what is retrieved*: every item of a
sequence carries an address (random, ``d_addr`` numbers) and a content (random,
``d_content`` numbers, independent of the address). The query is the address of
one item; the answer is that item's content. An attention head solves it when
its queries and keys compare addresses and its values carry contents.

Used by the chapters "Query, Key and Value" (tying keys to values) and "Why
scale by sqrt(d_k)" (training with and without the scale).
"""

from __future__ import annotations

import math
from typing import List, NamedTuple, Optional, Tuple

import torch
from torch import Tensor, nn

from . import _validate as v
from .scaling import scaled_dot_product_attention


class RetrievalBatch(NamedTuple):
    """One batch of the retrieval task.

    Shape:
        - query: ``(B, 1, d_addr + d_content)``, the target's address and zeros
        - items: ``(B, S, d_addr + d_content)``, address then content per item
        - target: ``(B, d_content)``, the content of item ``index``
        - index: ``(B,)``, which item the query asks for
        - contents: ``(B, S, d_content)``, every item's content (for accuracy)
    """

    query: Tensor
    items: Tensor
    target: Tensor
    index: Tensor
    contents: Tensor


def retrieval_batch(
    batch_size: int,
    num_items: int,
    d_addr: int,
    d_content: int,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float32,
) -> RetrievalBatch:
    """Draw a batch: addresses and contents are independent N(0, 1) numbers.

    Args:
        batch_size: number of sequences ``B``.
        num_items: items per sequence ``S``.
        d_addr: width of an address.
        d_content: width of a content.
        generator: source of randomness (its device is used).
        dtype: floating-point dtype of the tensors.

    Returns:
        A :class:`RetrievalBatch`.
    """
    for name, n in (("batch_size", batch_size), ("num_items", num_items), ("d_addr", d_addr),
                    ("d_content", d_content)):
        v.require_int(name, n)
    v.require_instance("generator", generator, torch.Generator, "a torch.Generator")
    v.require_float_dtype("dtype", dtype)
    f = {"generator": generator, "device": generator.device}
    addr = torch.randn(batch_size, num_items, d_addr, dtype=dtype, **f)
    contents = torch.randn(batch_size, num_items, d_content, dtype=dtype, **f)
    index = torch.randint(num_items, (batch_size,), **f)
    rows = torch.arange(batch_size, device=generator.device)
    query = torch.cat([addr[rows, index], torch.zeros_like(contents[:, 0])], dim=-1)
    return RetrievalBatch(
        query[:, None], torch.cat([addr, contents], dim=-1), contents[rows, index], index, contents
    )


class RetrievalHead(nn.Module):
    """One attention head, ``x_q W_q^T``, ``items W_k^T``, ``items W_v^T``, then ``W_o``.

    Weights use the course's layout, ``nn.Linear``'s ``(out_features, in_features)`` (as
    :func:`qkv.self_attention`), and are drawn N(0, 1/in_features), so that inputs
    with unit-variance components give queries and keys with unit-variance
    components: the assumption of the sqrt(d_k) argument.

    Args:
        d_in: width of a token (``d_addr + d_content``).
        d_out: width of the answer (``d_content``).
        width: the head width ``E`` of queries, keys and values.
        tie_kv: use the key vectors as the values (one matrix ``W_k`` for both).
        scale: factor on the scores; ``None`` means ``1 / sqrt(width)``, ``1.0`` none.
        generator: source of the initial weights.

    Shape:
        - query: ``(B, 1, d_in)``, items: ``(B, S, d_in)``
        - output: ``(B, d_out)``
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        width: int,
        tie_kv: bool = False,
        scale: Optional[float] = None,
        generator: Optional[torch.Generator] = None,
    ) -> None:
        super().__init__()
        for name, n in (("d_in", d_in), ("d_out", d_out), ("width", width)):
            v.require_int(name, n)

        def matrix(n_in: int, n_out: int) -> nn.Parameter:
            # Drawn (in, out) and stored transposed: (out, in), the same numbers as before.
            w = torch.randn(n_in, n_out, generator=generator) / math.sqrt(n_in)
            return nn.Parameter(w.T.contiguous())

        self.W_q, self.W_k = matrix(d_in, width), matrix(d_in, width)
        self.W_v = None if tie_kv else matrix(d_in, width)
        self.W_o = matrix(width, d_out)
        self.scale = scale

    def forward(self, query: Tensor, items: Tensor) -> Tensor:
        keys = items @ self.W_k.T
        values = keys if self.W_v is None else items @ self.W_v.T
        out = scaled_dot_product_attention(query @ self.W_q.T, keys, values, scale=self.scale)
        return (out @ self.W_o.T)[:, 0]


def train_retrieval(
    model: RetrievalHead,
    steps: int,
    num_items: int,
    d_addr: int,
    d_content: int,
    generator: torch.Generator,
    batch_size: int = 128,
    lr: float = 3e-3,
) -> List[float]:
    """Train ``model`` with Adam on fresh batches; return the loss of every step.

    The loss is the mean squared error between the answer and the target content
    (0 is perfect; always answering zeros gives about 1).
    """
    v.require_instance("model", model, RetrievalHead, "a qkv.retrieval.RetrievalHead")
    v.require_int("steps", steps, minimum=0)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        b = retrieval_batch(batch_size, num_items, d_addr, d_content, generator)
        loss = (model(b.query, b.items) - b.target).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@torch.no_grad()
def evaluate_retrieval(
    model: RetrievalHead, batch: RetrievalBatch
) -> Tuple[float, float]:
    """Mean squared error, and accuracy: how often the answer is closest (cosine) to the right item."""
    v.require_instance("model", model, RetrievalHead, "a qkv.retrieval.RetrievalHead")
    v.require_instance("batch", batch, RetrievalBatch, "a qkv.retrieval.RetrievalBatch")
    answer = model(batch.query, batch.items)
    mse = (answer - batch.target).square().mean().item()
    cos = torch.cosine_similarity(answer[:, None], batch.contents, dim=-1)
    return mse, (cos.argmax(dim=-1) == batch.index).float().mean().item()
