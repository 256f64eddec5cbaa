"""Bad input to the plots and bertviz views is refused in the user's terms, before matplotlib sees it."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from qkv import bertviz_views as bv
from qkv import viz

W = torch.rand(2, 2, 3, 3)
CASES = [
    (lambda: viz.attention_heatmap(np.ones((3, 3))), TypeError, ["weights", "ndarray"]),
    (lambda: viz.attention_heatmap(torch.rand(3, 3).to(torch.complex64)), TypeError, ["weights", "real"]),
    (lambda: viz.attention_heatmap(torch.rand(3, 3, device="meta")), ValueError, ["weights", "meta"]),
    (lambda: viz.attention_heatmap(torch.zeros(1, 1).expand(10**5, 10**5)), ValueError,
     ["weights", "cells", "slice"]),
    (lambda: viz.attention_heatmap(torch.rand(3, 3), x_labels="abc"), TypeError, ["x_labels", "list('abc')"]),
    (lambda: viz.attention_heatmap(torch.rand(3, 3), y_labels=["a"]), ValueError, ["y_labels", "3", "1"]),
    (lambda: viz.attention_heatmap(torch.rand(3, 3), x_labels=3), TypeError, ["x_labels", "int"]),
    (lambda: viz.attention_heatmap(torch.rand(3, 3), ax="ax"), TypeError, ["ax", "Axes"]),
    (lambda: viz.attention_heatmap(torch.rand(3, 3), colorbar="no"), TypeError, ["colorbar"]),
    (lambda: viz.plot_curves([1, 2], "x", "y"), TypeError, ["curves", "list"]),
    (lambda: viz.plot_curves({"a": [1, 2]}, "x", "y"), TypeError, ["curves['a']", "list"]),
    (lambda: viz.plot_head_grid(W, heads=[5]), ValueError, ["heads", "0..1", "[5]"]),
    (lambda: viz.plot_head_grid(W, heads=1), TypeError, ["heads"]),
    (lambda: viz.plot_head_grid(W, labels=[["a"]]), ValueError, ["labels", "layer"]),
    (lambda: viz.plot_head_grid(W, labels=[["a"], ["b", "c"]]), ValueError, ["labels[0]", "head"]),
    (lambda: viz.plot_head_grid(W, tokens=["a"]), ValueError, ["tokens", "3"]),
    (lambda: viz.plot_head_grid(W, cell="1"), ValueError, ["cell", "'1'"]),
    (lambda: viz.plot_head_grid(torch.zeros(1, 1, 1, 1).expand(100, 100, 3, 3)), ValueError,
     ["weights", "maps", "heads=[...]"]),
    (lambda: viz.plot_gpu_results([1]), TypeError, ["results", "list"]),
    (lambda: viz.plot_gpu_results({}), ValueError, ["results", "lacks"]),
    (lambda: bv.as_bertviz_attention(np.ones((2, 3, 3))), TypeError, ["attention", "ndarray"]),
    (lambda: bv.as_bertviz_attention(None), TypeError, ["attention", "NoneType"]),
    (lambda: bv.as_bertviz_attention(torch.ones(2, 3, 3, device="meta")), ValueError, ["attention[0]", "meta"]),
    (lambda: bv.as_bertviz_attention([torch.rand(2, 3, 3), torch.rand(1, 3, 3)]), ValueError,
     ["attention[1]", "(1, 3, 3)", "(2, 3, 3)"]),
    (lambda: bv.view_html("head_view", torch.rand(2, 3, 3), "abc"), TypeError, ["tokens", "list('abc')"]),
    (lambda: bv.view_html("head_view", torch.rand(2, 3, 3), None), TypeError, ["tokens", "NoneType"]),
    (lambda: bv.view_html("head_view", torch.rand(2, 3, 3), list("abc"), lib_url=3), TypeError, ["lib_url"]),
]


@pytest.mark.parametrize("call, exc, words", CASES, ids=[str(i) for i in range(len(CASES))])
def test_bad_plot_input_is_named(call, exc, words):
    before = plt.get_fignums()
    with pytest.raises(exc) as e:
        call()
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    assert plt.get_fignums() == before, "a refused call must not leave a figure behind"
