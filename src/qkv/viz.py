"""Matplotlib pictures of attention weights.

Small functions that draw on a given ``Axes`` (or make a figure) and return it,
so that a chapter can arrange them as it likes. Rows are queries, columns keys,
as in the weight matrix ``(L, S)``.
"""

from __future__ import annotations

from typing import Optional, Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch import Tensor

from . import _validate as v


def plot_attention(
    weights: Tensor,
    keys: Optional[Sequence[str]] = None,
    queries: Optional[Sequence[str]] = None,
    ax: Optional[Axes] = None,
    title: Optional[str] = None,
    vmax: Optional[float] = 1.0,
    annotate: bool = False,
) -> Axes:
    """Heat map of one attention matrix.

    Args:
        weights: the weights of one head (rows: queries, columns: keys).
        keys: labels of the columns (default: indices).
        queries: labels of the rows (default: ``keys`` when the matrix is square).
        ax: where to draw (default: a new figure).
        title: title of the axes.
        vmax: weight shown darkest (``None``: the largest weight).
        annotate: write each weight in its cell (for small matrices).

    Returns:
        The axes drawn on.

    Shape:
        - weights: ``(L, S)``
    """
    v.require_tensor("weights", weights)
    if weights.dim() != 2:
        raise ValueError(f"weights must have shape (L, S), got {v.shape_str(weights)}")
    L, S = weights.shape
    if queries is None and keys is not None and L == S:
        queries = keys
    for name, labels, n in (("keys", keys, S), ("queries", queries, L)):
        if labels is not None and len(labels) != n:
            raise ValueError(f"{name} has {len(labels)} labels for {n} positions")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.4 * S + 1.5, 0.4 * L + 1))
    w = weights.detach().float().cpu()
    ax.imshow(w.numpy(), cmap="Blues", vmin=0.0, vmax=vmax, aspect="auto")
    ax.set_xticks(range(S), keys if keys is not None else range(S), rotation=90)
    ax.set_yticks(range(L), queries if queries is not None else range(L))
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if annotate:
        top = float(w.max()) if vmax is None else vmax
        for i in range(L):
            for j in range(S):
                x = float(w[i, j])
                ax.text(j, i, f"{x:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if x > 0.6 * top else "black")
    if title:
        ax.set_title(title)
    return ax


def plot_head_grid(
    weights: Tensor,
    labels: Optional[Sequence[Sequence[str]]] = None,
    tokens: Optional[Sequence[str]] = None,
    cell: float = 1.3,
) -> Figure:
    """A grid of heat maps: one row per layer, one column per head.

    Args:
        weights: every layer and head on one sentence.
        labels: ``labels[layer][head]`` written under each map (e.g. from
            :func:`qkv.heads.label_heads`).
        tokens: when given, the tokens label the axes of the first column and
            of the bottom row only (the maps are too small for more).
        cell: size of one map in inches.

    Returns:
        The figure.

    Shape:
        - weights: ``(layers, H, T, T)``
    """
    v.require_tensor("weights", weights)
    if weights.dim() != 4:
        raise ValueError(f"weights must have shape (layers, H, T, T), got {v.shape_str(weights)}")
    layers, H, L, S = weights.shape
    fig, axes = plt.subplots(layers, H, figsize=(cell * H, cell * layers * 1.15), squeeze=False)
    w = weights.detach().float().cpu()
    for i in range(layers):
        for h in range(H):
            ax = axes[i][h]
            ax.imshow(w[i, h].numpy(), cmap="Blues", vmin=0.0, vmax=1.0)
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_title(f"head {h}", fontsize=8)
            if h == 0:
                ax.set_ylabel(f"layer {i}", fontsize=8)
            if labels is not None:
                ax.set_xlabel(labels[i][h], fontsize=6)
    if tokens is not None and len(tokens) == S == L:
        ax = axes[layers - 1][0]
        ax.set_xticks(range(S), tokens, rotation=90, fontsize=5)
        ax.set_yticks(range(L), tokens, fontsize=5)
    fig.tight_layout()
    return fig
