"""Removing heads from a model and putting them back: what :func:`qkv.ablate_heads` does.

A head reaches the rest of the model only through its columns of the output projection,
so zeroing them removes the head and nothing else; the saved columns are written back
when the ``with`` block ends, even after an error.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, List, Sequence, Tuple

import torch
from torch import nn


def check_heads(heads: object, num_layers: int, num_heads: int) -> List[Tuple[int, int]]:
    """``heads`` as a list of ``(layer, head)`` int pairs inside the model, or a clear error."""
    want = f"heads must be a sequence of (layer, head) pairs of ints, got {heads!r}"
    try:
        pairs = [(layer, head) for layer, head in heads]
    except (TypeError, ValueError):
        raise TypeError(want) from None
    if any(isinstance(i, bool) or not isinstance(i, int) for pair in pairs for i in pair):
        raise TypeError(want)
    for layer, head in pairs:
        if not (0 <= layer < num_layers and 0 <= head < num_heads):
            raise ValueError(f"head ({layer}, {head}) is not in the model's {num_layers} layers "
                             f"of {num_heads} heads")
    return pairs


@contextlib.contextmanager
def zero_columns(layers: Sequence[nn.Module], heads: Sequence[Tuple[int, int]]) -> Iterator[None]:
    """Zero each head's columns of its layer's ``out_proj`` inside the block; restore them after.

    Args:
        layers: the model's attention layers (each with ``out_proj`` and ``head_dim``).
        heads: checked ``(layer, head)`` pairs.
    """
    saved = []
    try:
        with torch.no_grad():
            for layer, head in heads:
                out_proj = layers[layer].out_proj
                width = layers[layer].head_dim
                cols = slice(head * width, (head + 1) * width)
                saved.append((out_proj, cols, out_proj.weight[:, cols].clone()))
                out_proj.weight[:, cols] = 0
        yield
    finally:
        with torch.no_grad():
            for out_proj, cols, w in reversed(saved):
                out_proj.weight[:, cols] = w
