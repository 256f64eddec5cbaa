"""qkv.viz.plot_head_grid: one heat map per layer and head, drawn from the given weights."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from qkv import viz  # noqa: E402


def test_plot_head_grid_has_one_map_per_head():
    w = torch.softmax(torch.randn(2, 3, 5, 5), -1)
    labels = [[f"l{i}h{h}" for h in range(3)] for i in range(2)]
    fig = viz.plot_head_grid(w, labels=labels, tokens=list("abcde"))
    axes = fig.get_axes()
    assert len(axes) == 6
    assert axes[4].get_xlabel() == "l1h1"
    assert fig.get_supxlabel().startswith("keys") and fig.get_supylabel().startswith("queries")
    assert abs(float(axes[5].get_images()[0].get_array()[0, 0]) - float(w[1, 2, 0, 0])) < 1e-6
    plt.close(fig)
    with pytest.raises(ValueError):
        viz.plot_head_grid(torch.rand(3, 5, 5))



def test_plot_head_grid_draws_only_the_heads_asked_for():
    w = torch.softmax(torch.randn(2, 4, 5, 5), -1)
    fig = viz.plot_head_grid(w, heads=[2, 3])
    axes = fig.get_axes()
    assert len(axes) == 4
    assert axes[0].get_title() == "head 2" and axes[0].get_ylabel() == "layer 0"
    assert abs(float(axes[3].get_images()[0].get_array()[0, 0]) - float(w[1, 3, 0, 0])) < 1e-6
    plt.close(fig)
    with pytest.raises(ValueError, match="heads"):
        viz.plot_head_grid(w, heads=[4])

def test_a_grid_of_three_heads_fits_a_phone_and_keeps_its_map_size():
    """Three heads a row (as the book draws them) make a figure under 5.5 in wide, the width the
    book's stacked figures use, and each map keeps about ``cell`` inches, as in a wider grid."""
    w = torch.softmax(torch.randn(6, 12, 14, 14), -1)
    sizes = {}
    for k in (3, 6):
        fig = viz.plot_head_grid(w, tokens=[f"t{i}" for i in range(14)], heads=range(k))
        fig.canvas.draw()
        width = fig.get_size_inches()[0]
        sizes[k] = (width, fig.get_axes()[0].get_window_extent().width / fig.dpi)
        plt.close(fig)
    assert sizes[3][0] <= 5.5
    assert sizes[3][1] >= 0.8 * 1.3 and abs(sizes[3][1] - sizes[6][1]) < 0.15


def test_attention_heatmap_takes_a_colour_range_for_negative_matrices():
    """A bias matrix is <= 0: with the default vmin=0 every cell got the bottom colour (ch07's
    ALiBi figure drew four flat maps); vmin/vmax set the scale."""
    bias = -torch.arange(16.0).reshape(4, 4)
    ax = viz.attention_heatmap(bias, colorbar=False, vmin=-15.0, vmax=0.0)
    assert ax.get_images()[0].get_clim() == (-15.0, 0.0)
    plt.close(ax.figure)
    ax = viz.attention_heatmap(torch.rand(3, 3), colorbar=False)
    assert ax.get_images()[0].get_clim()[0] == 0.0
    plt.close(ax.figure)


def _results(runs, memory=()):
    return {"device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0", "triton": "3.6.0", "cuda": "13.0",
            "date": "2026-11-23T00:00:00+00:00", "forward": runs, "backward": runs, "training_memory": list(memory)}


def test_plot_gpu_results_draws_each_method_with_provenance():
    runs = [
        {"method": m, "n": n, "E": E, "dtype": dt, "causal": c, "tflops": t, "ms": 1.0}
        for m, t in (("triton", 300.0), ("sdpa_flash", 400.0))
        for n in (1024, 4096) for E in (64, 128) for c in (False, True) for dt in ("float16", "bfloat16")
    ]
    runs.append({"method": "sdpa_cudnn", "n": 4096, "E": 64, "dtype": "float16", "causal": False,
                 "tflops": None, "ms": None, "error": "error: refused"})
    memory = [{"method": m, "n": n, "B": 1, "H": 8, "E": 64, "dtype": "float16",
               "peak_mib": None if (m, n) == ("reference", 65536) else float(n if m != "reference" else n * n / 1e4),
               "error": "out of memory: ..." if (m, n) == ("reference", 65536) else None}
              for m in ("reference", "memory_efficient") for n in (4096, 16384, 65536)]
    fig = viz.plot_gpu_results(_results(runs, memory), source="x.json")
    fwd, fwd_causal, bwd, mem = fig.get_axes()
    assert sorted(line.get_label() for line in fwd.get_lines()) == ["sdpa_flash", "triton"]
    assert list(fwd.get_lines()[1].get_xdata()) == [1024, 4096]
    assert "causal=True" in fwd_causal.get_title() and "backward" in bwd.get_title()
    labels = [line.get_label() for line in mem.get_lines()]
    assert labels == ["memory_efficient", "reference", "reference: out of memory"]
    assert list(mem.get_lines()[1].get_xdata()) == [4096, 16384]
    assert list(mem.get_lines()[2].get_xdata()) == [65536]
    title = fig._suptitle.get_text()
    assert "H100" in title and "2026-11-23" in title and "triton 3.6.0" in title and "x.json" in title
    plt.close(fig)


def test_plot_gpu_results_rejects_other_files():
    with pytest.raises(ValueError, match="lacks"):
        viz.plot_gpu_results({"runs": []})
