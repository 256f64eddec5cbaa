"""Plotting helpers for the book (matplotlib only).

Each function draws on the ``ax`` it is given (or a new one) and returns it, so a
chapter can arrange several plots in one figure.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from . import _validate as v


def attention_heatmap(
    weights: torch.Tensor,
    x_labels: Optional[Sequence[str]] = None,
    y_labels: Optional[Sequence[str]] = None,
    ax: Optional[Axes] = None,
    title: Optional[str] = None,
    xlabel: str = "key (attended to)",
    ylabel: str = "query (attending)",
    colorbar: bool = True,
) -> Axes:
    """Draw one attention matrix, queries as rows and keys as columns.

    Args:
        weights: the weights; any leading dimensions must be of size one.
        x_labels: one label per key (column).
        y_labels: one label per query (row).
        ax: where to draw; a new figure when ``None``.
        title: the plot's title.
        xlabel, ylabel: axis labels.
        colorbar: add a colour bar.

    Returns:
        The axes drawn on.

    Shape:
        - weights: ``(L, S)`` (or ``(1, ..., 1, L, S)``)
    """
    w = v.require_tensor("weights", weights).detach().to("cpu", torch.float32)
    v.require_flag("colorbar", colorbar)
    while w.dim() > 2 and w.shape[0] == 1:
        w = w[0]
    if w.dim() != 2:
        raise ValueError(f"weights must be (L, S) after dropping size-one dims, got {tuple(weights.shape)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.3 * w.shape[1] + 2, 0.3 * w.shape[0] + 1.5))
    im = ax.imshow(w.numpy(), cmap="viridis", vmin=0.0, aspect="auto")
    for labels, set_ticks, set_labels, n in (
        (x_labels, ax.set_xticks, ax.set_xticklabels, w.shape[1]),
        (y_labels, ax.set_yticks, ax.set_yticklabels, w.shape[0]),
    ):
        if labels is not None:
            if len(labels) != n:
                raise ValueError(f"expected {n} labels, got {len(labels)}")
            set_ticks(range(n))
            set_labels(list(labels))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return ax


def plot_curves(
    curves: Mapping[str, Mapping[float, float]],
    xlabel: str,
    ylabel: str,
    ax: Optional[Axes] = None,
    title: Optional[str] = None,
    marker: str = "o",
) -> Axes:
    """Draw one line per named curve, each given as ``{x: y}``.

    Args:
        curves: ``{label: {x: y}}``.
        xlabel, ylabel: axis labels.
        ax: where to draw; a new figure when ``None``.
        title: the plot's title.
        marker: matplotlib marker for the points.

    Returns:
        The axes drawn on.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    for label, points in curves.items():
        xs = sorted(points)
        ax.plot(xs, [points[x] for x in xs], marker=marker, markersize=3, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


def plot_head_grid(
    weights: torch.Tensor,
    labels: Optional[Sequence[Sequence[str]]] = None,
    tokens: Optional[Sequence[str]] = None,
    cell: float = 1.3,
    heads: Optional[Sequence[int]] = None,
) -> Figure:
    """A grid of heat maps: one row per layer, one column per head.

    Args:
        weights: every layer and head on one sentence.
        labels: ``labels[layer][head]`` written under each map (e.g. from
            :func:`qkv.heads.label_heads`).
        tokens: when given, the tokens label the axes of the bottom-left map
            only (the maps are too small for more).
        cell: size of one map in inches.
        heads: the heads to draw, one column each (default: all ``H``). A page
            column holds about six maps a row legibly; draw a model with more
            heads as several grids.

    Returns:
        The figure.

    Shape:
        - weights: ``(layers, H, T, T)``
    """
    v.require_dim("weights", weights, 4, "(layers, H, T, T)")
    layers, H, L, S = weights.shape
    heads = list(range(H)) if heads is None else list(heads)
    if not heads or any(not 0 <= h < H for h in heads):
        raise ValueError(f"heads must be a non-empty selection of 0..{H - 1}, got {heads}")
    fig, axes = plt.subplots(
        layers, len(heads), figsize=(cell * len(heads), cell * layers * 1.15), squeeze=False
    )
    w = weights.detach().float().cpu()
    for i in range(layers):
        for col, h in enumerate(heads):
            ax = axes[i][col]
            ax.imshow(w[i, h].numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_title(f"head {h}", fontsize=9)
            if col == 0:
                ax.set_ylabel(f"layer {i}", fontsize=9)
            if labels is not None:
                ax.set_xlabel(labels[i][h], fontsize=7)
    if tokens is not None and len(tokens) == S == L:
        ax = axes[layers - 1][0]
        ax.set_xticks(range(S), tokens, rotation=90, fontsize=5)
        ax.set_yticks(range(L), tokens, fontsize=5)
    fig.tight_layout()
    return fig


_RESULTS_KEYS = ("device", "torch", "triton", "cuda", "date", "dtype", "B", "H", "runs")


def plot_gpu_results(results: Mapping, E: int = 64, source: str = "") -> Figure:
    """Forward TFLOP/s against sequence length, from a results file of ``benchmarks/attention_gpu.py``.

    Two panels, non-causal and causal, one line per method; the title carries the
    provenance (device, versions, date, and ``source``), so a figure is never shown
    without where its numbers came from.

    Args:
        results: the parsed JSON the benchmark wrote.
        E: the head dimension to plot.
        source: the results file's name, shown in the title.

    Returns:
        The figure.
    """
    missing = [k for k in _RESULTS_KEYS if k not in results]
    if missing:
        raise ValueError(f"not a results file of benchmarks/attention_gpu.py: it lacks {missing}")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    methods = sorted({r["method"] for r in results["runs"]})
    for ax, causal in zip(axes, (False, True)):
        for method in methods:
            points = sorted((r["n"], r["tflops"]) for r in results["runs"]
                            if r["method"] == method and r["causal"] == causal and r["E"] == E
                            and r.get("tflops"))
            if points:
                ax.plot(*zip(*points), "o-", label=method)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length n = L = S")
        ax.set_title(f"E={E}, B={results['B']}, H={results['H']}, {results['dtype']}, causal={causal}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("forward TFLOP/s")
    fig.suptitle(f"{results['device']}: torch {results['torch']}, triton {results['triton']}, "
                 f"CUDA {results['cuda']}, measured {results['date']}"
                 + (f" ({source})" if source else ""), fontsize=9)
    fig.tight_layout()
    return fig
