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
    assert abs(float(axes[5].get_images()[0].get_array()[0, 0]) - float(w[1, 2, 0, 0])) < 1e-6
    plt.close(fig)
    with pytest.raises(ValueError):
        viz.plot_head_grid(torch.rand(3, 5, 5))
