"""Chapter 8's GPU cell on a results file like the one benchmarks/attention_gpu.py writes.

No GPU has to be present: the file is made here, with the benchmark's own summary
(:func:`qkv.bench.gpu_goals`), and the cell's code is taken from the chapter as it stands,
so the page is known to draw its figure before the first real results file arrives.
"""

from __future__ import annotations

import json
import os
import pathlib

import jupytext
import matplotlib
import pytest

from qkv_course.config import ROOT

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from qkv.bench import gpu_goals  # noqa: E402
from qkv.viz import plot_gpu_results  # noqa: E402


def _gpu_cell() -> str:
    nb = jupytext.read(ROOT / "book" / "08-efficient.md")
    cells = [c.source for c in nb.cells if c.cell_type == "code" and "results_dir" in c.source]
    assert len(cells) == 1, "chapter 8 should have one cell that reads benchmarks/results/"
    return cells[0]


def _results(date: str, device: str) -> dict:
    runs = [
        {"method": m, "B": 4, "H": 32, "E": E, "n": n, "causal": c, "dtype": "float16",
         "ms": ms * (0.55 if c else 1.0), "peak_mib": 10.0, "error": None, "tflops": 100.0 / ms}
        for m, ms in (("triton", 1.5), ("sdpa_flash", 1.0), ("chunked", 9.0))
        for E in (64, 128) for n in (1024, 4096) for c in (False, True)
    ]
    memory = {"reference": {"peak_mib": 4096.0}, "chunked": {"peak_mib": 40.0}}
    long = {"reference": {"ms": None, "peak_mib": None, "error": "out of memory: ..."},
            "chunked": {"ms": 900.0, "peak_mib": 600.0, "error": None}}
    return {"device": device, "capability": "9.0", "torch": "2.11.0", "cuda": "13.0", "triton": "3.6.0",
            "date": date, "dtype": "float16", "B": 4, "H": 32, "chunk_size": 1024, "repeat": 5,
            "runs": runs, "memory_16384_B1_H8": memory, "long_context_65536_B1_H16": long,
            "goals": gpu_goals(runs, memory)}


def _run_cell(tmp_path: pathlib.Path, capsys) -> str:
    (tmp_path / "book").mkdir()
    # What the chapter's first cell imported, for this cell.
    namespace = {"json": json, "pathlib": pathlib, "plot_gpu_results": plot_gpu_results}
    cwd = os.getcwd()
    os.chdir(tmp_path / "book")  # the chapter runs in book/ and reads ../benchmarks/results
    try:
        exec(_gpu_cell(), namespace)
    finally:
        os.chdir(cwd)
    return capsys.readouterr().out


def test_without_results_the_page_says_so(tmp_path, capsys):
    out = _run_cell(tmp_path, capsys)
    assert "No GPU results file" in out and "benchmarks/gpu_run.sh" in out
    assert not plt.get_fignums()


def test_with_results_the_newest_is_plotted_with_its_provenance(tmp_path, capsys):
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / "b.json").write_text(json.dumps(_results("2026-01-01T00:00:00+00:00", "old GPU")))
    (results / "a.json").write_text(json.dumps(_results("2026-11-23T00:00:00+00:00", "NVIDIA H100")))
    out = _run_cell(tmp_path, capsys)
    fig = plt.figure(plt.get_fignums()[-1])
    try:
        title = fig._suptitle.get_text()
        assert "NVIDIA H100" in title and "2026-11-23" in title and "a.json" in title
        assert "triton / sdpa_flash TFLOP/s at n=4096" in out
        assert "non-causal: 0.667 (goal" in out  # 1.0 / 1.5, through the benchmark's goals()
        assert "n=16384 (B=1, H=8): 0.010" in out
        assert "out of memory" in out and "900.0 ms" in out
    finally:
        plt.close("all")


@pytest.fixture(autouse=True)
def _no_open_figures():
    plt.close("all")
    yield
    plt.close("all")
