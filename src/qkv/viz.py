"""Plotting helpers for the book (matplotlib only).

Each function draws on the ``ax`` it is given (or a new one) and returns it, so a
chapter can arrange several plots in one figure.
"""

from __future__ import annotations

import textwrap

from typing import List, Mapping, Optional, Sequence, Tuple

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from . import _drawing as d
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
    vmin: Optional[float] = 0.0,
    vmax: Optional[float] = None,
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
        vmin, vmax: the values at the two ends of the colour scale (``None``: the data's
            own). The default 0 suits weights; a matrix of scores or biases, which are
            negative, needs its own ``vmin``, or every cell below 0 gets the bottom colour.

    Returns:
        The axes drawn on.

    Shape:
        - weights: ``(L, S)`` (or ``(1, ..., 1, L, S)``)
    """
    d.require_drawable("weights", weights)
    v.require_flag("colorbar", colorbar)
    if ax is not None:
        v.require_instance("ax", ax, Axes, "a matplotlib Axes or None")
    w = weights.detach()
    while w.dim() > 2 and w.shape[0] == 1:
        w = w[0]
    if w.dim() != 2:
        raise ValueError(f"weights must be (L, S) after dropping size-one dims, got {tuple(weights.shape)}")
    w = w.to("cpu", torch.float32)
    x_labels = d.require_labels("x_labels", x_labels, w.shape[1], "key (column)")
    y_labels = d.require_labels("y_labels", y_labels, w.shape[0], "query (row)")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.3 * w.shape[1] + 2, 0.3 * w.shape[0] + 1.5))
    im = ax.imshow(w.numpy(), cmap="viridis", vmin=vmin, vmax=vmax, aspect="auto")
    for labels, set_ticks, set_labels, n in (
        (x_labels, ax.set_xticks, ax.set_xticklabels, w.shape[1]),
        (y_labels, ax.set_yticks, ax.set_yticklabels, w.shape[0]),
    ):
        if labels is not None:
            set_ticks(range(n))
            set_labels(labels)
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
    d.require_mapping("curves", curves, "a dict {label: {x: y}}")
    if ax is not None:
        v.require_instance("ax", ax, Axes, "a matplotlib Axes or None")
    for label, points in curves.items():
        d.require_mapping(f"curves[{label!r}]", points, "a dict {x: y} of numbers")
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
        heads: the heads to draw, one column each (default: all ``H``). A phone
            shows about three maps a row legibly (the book's chapters draw three
            heads a grid); draw a model with more heads as several grids.

    Returns:
        The figure.

    Shape:
        - weights: ``(layers, H, T, T)``
    """
    heads, labels, tokens = _check_grid(weights, labels, tokens, cell, heads)
    layers, _, L, S = weights.shape
    # Room beside and below the maps for the axis labels, so that each map keeps about ``cell``
    # inches however few heads a row holds.
    fig, axes = plt.subplots(
        layers, len(heads), figsize=(cell * len(heads) + 0.9, cell * layers * 1.15 + 0.6), squeeze=False
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
                ax.set_xlabel(labels[i][h], fontsize=8)
    if tokens is not None:
        ax = axes[layers - 1][0]
        ax.set_xticks(range(S), tokens, rotation=90, fontsize=6)
        ax.set_yticks(range(L), tokens, fontsize=6)
    # Each map is queries down, keys across: said once for the whole grid.
    fig.supxlabel("keys (columns of each map)", fontsize=9)
    fig.supylabel("queries (rows of each map)", fontsize=9)
    fig.tight_layout()
    return fig


def _check_grid(weights: object, labels: object, tokens: object, cell: object,
                heads: object) -> Tuple[List[int], Optional[List[List[str]]], Optional[List[str]]]:
    """:func:`plot_head_grid`'s arguments, checked; returns the heads, labels and tokens to draw."""
    v.require_dim("weights", weights, 4, "(layers, H, T, T)")
    layers, H, L, S = weights.shape
    heads = list(range(H)) if heads is None else d.require_indices("heads", heads, H, "heads")
    d.require_drawable("weights", weights, cells=layers * len(heads) * L * S)
    if layers * len(heads) > d.MAX_MAPS:
        raise ValueError(f"weights {v.shape_str(weights)} would need {layers} x {len(heads)} maps, more "
                         f"than the {d.MAX_MAPS} a page can hold; choose a few with heads=[...] or "
                         f"draw weights[:4]")
    v.require_positive_number("cell", cell, " (inches)")
    if labels is not None:
        d.require_sequence("labels", labels, layers, "layer")
        labels = [d.require_labels(f"labels[{i}]", labels[i], H, "head") for i in range(layers)]
    # The tokens label a square map's axes only (self-attention); they are ignored otherwise.
    tokens = d.require_labels("tokens", tokens, S, "key") if L == S else None
    return heads, labels, tokens


_RESULTS_KEYS = ("device", "torch", "triton", "cuda", "date", "forward", "backward", "training_memory")


def plot_gpu_results(results: Mapping, E: int = 64, dtype: str = "float16", source: str = "") -> Figure:
    """The GPU benchmark's numbers, from a results file of ``benchmarks/attention_gpu.py``.

    Four panels: forward TFLOP/s against sequence length without and with a causal mask,
    backward TFLOP/s (non-causal), one line per method, at head dimension ``E`` and ``dtype``;
    and the peak memory of one training step (forward and backward) per method, where a
    method that ran out of memory is marked with an ``x`` on the top edge. The title carries
    the provenance (device, versions, date, and ``source``), so a figure is never shown
    without where its numbers came from.

    Args:
        results: the parsed JSON the benchmark wrote.
        E: the head dimension to plot.
        dtype: ``"float16"`` or ``"bfloat16"``.
        source: the results file's name, shown in the title.

    Returns:
        The figure.
    """
    d.require_mapping("results", results, "the parsed JSON of a benchmarks/attention_gpu.py results file")
    v.require_int("E", E)
    missing = [k for k in _RESULTS_KEYS if k not in results]
    if missing:
        raise ValueError(f"results is not a results file of benchmarks/attention_gpu.py: it lacks "
                         f"{missing}")
    # One column of four panels, so that a phone shows it at a readable size, with one legend
    # below them all (the same colour is the same method in every panel) covering no data.
    fig, axes = plt.subplots(4, 1, figsize=(5.5, 14), layout="constrained")
    # One colour per method across the four panels.
    every = sorted({r["method"] for t in ("forward", "backward", "training_memory") for r in results[t]})
    colors = {m: f"C{i}" for i, m in enumerate(every)}
    panels = [(axes[0], "forward", False), (axes[1], "forward", True), (axes[2], "backward", False)]
    for ax, table, causal in panels:
        rows = [r for r in results[table] if r["causal"] == causal and r["E"] == E and r["dtype"] == dtype]
        for method in sorted({r["method"] for r in rows}):
            points = sorted((r["n"], r["tflops"]) for r in rows if r["method"] == method and r.get("tflops"))
            if points:
                ax.plot(*zip(*points), "o-", color=colors[method], label=method)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length n")
        ax.set_ylabel(f"{table} TFLOP/s")
        ax.set_title(f"{table}, E={E}, {dtype}, causal={causal}", fontsize=10)
        ax.grid(alpha=0.3)
    _plot_training_memory(axes[3], results["training_memory"], colors)
    legend = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    fig.legend(legend.values(), legend.keys(), loc="outside lower center", ncol=2, fontsize=9)
    title = (f"{results['device']}: torch {results['torch']}, triton {results['triton']}, "
             f"CUDA {results['cuda']}, measured {results['date']}" + (f" ({source})" if source else ""))
    fig.suptitle(textwrap.fill(title, 70), fontsize=9)
    return fig


def _plot_training_memory(ax: Axes, rows: Sequence[Mapping], colors: Mapping[str, str]) -> None:
    """Peak MiB of one forward + backward against n, log-log; failures as an ``x`` at the top."""
    methods = sorted({r["method"] for r in rows})
    top = max((r["peak_mib"] for r in rows if r.get("peak_mib")), default=1.0) * 3
    for method in methods:
        color = colors[method]
        points = sorted((r["n"], r["peak_mib"]) for r in rows if r["method"] == method and r.get("peak_mib"))
        if points:
            ax.plot(*zip(*points), "o-", color=color, label=method)
        failed = [r["n"] for r in rows if r["method"] == method and r.get("error")]
        if failed:
            ax.plot(failed, [top] * len(failed), "x", color=color, markersize=10, mew=2,
                    label=f"{method}: out of memory" if all("memory" in r["error"] for r in rows
                                                          if r["method"] == method and r.get("error"))
                    else f"{method}: failed")
    first = rows[0] if rows else {}
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("peak extra memory (MiB)")
    ax.set_title(f"one training step, B={first.get('B')}, H={first.get('H')}, E={first.get('E')}, "
                 f"{first.get('dtype')}", fontsize=10)
    ax.grid(alpha=0.3)
