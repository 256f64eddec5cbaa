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
    def row(method, ms, causal, n=4096, E=64, dtype="float16"):
        ms = ms * (0.55 if causal else 1.0)
        return {"method": method, "B": 4, "H": 32, "E": E, "n": n, "causal": causal, "dtype": dtype,
                "ms": ms, "tflops": 100.0 / ms, "error": None}

    forward = [row(m, ms, c, n, E, dt) for m, ms in (("triton", 1.5), ("sdpa_flash", 1.0))
               for E in (64, 128) for n in (1024, 4096) for c in (False, True) for dt in ("float16", "bfloat16")]
    forward.append({**row("sdpa_cudnn", 1.0, False), "ms": None, "tflops": None, "error": "error: refused"})
    backward = [row(m, ms, c) for m, ms in (("triton", 5.0), ("sdpa_flash", 4.0)) for c in (False, True)]
    memory = [{"method": m, "n": n, "B": 1, "H": 8, "E": 64, "dtype": "float16", "ms": 1.0,
               "peak_mib": peak, "error": None if peak else "out of memory: CUDA out of memory"}
              for m, n, peak in (("reference", 16384, 4096.0), ("memory_efficient", 16384, 40.0),
                                 ("reference", 65536, None), ("memory_efficient", 65536, 150.0))]
    results = {"device": device, "capability": "9.0", "torch": "2.11.0", "cuda": "13.0", "triton": "3.6.0",
               "date": date, "forward": forward, "backward": backward, "training_memory": memory,
               "tutorial_kernel": "not measured"}
    return dict(results, goals=gpu_goals(results))


def _run_cell(tmp_path: pathlib.Path, capsys, where: str = "book") -> str:
    (tmp_path / "book").mkdir(exist_ok=True)
    # What the chapter's first cell imported, for this cell.
    namespace = {"json": json, "pathlib": pathlib, "plot_gpu_results": plot_gpu_results}
    cwd = os.getcwd()
    # The book is built in book/ (the cell reads ../benchmarks/results); a reader may run
    # the notebook from the repository's root, or from a folder with no repository (Colab).
    os.chdir(tmp_path / where)
    try:
        exec(_gpu_cell(), namespace)
    finally:
        os.chdir(cwd)
    return capsys.readouterr().out


def test_without_results_the_page_says_so(tmp_path, capsys):
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    out = _run_cell(tmp_path, capsys)
    assert "No GPU results file" in out and "benchmarks/gpu_run.sh" in out
    assert not plt.get_fignums()


def test_outside_the_repository_the_page_says_where_the_figure_is(tmp_path, capsys):
    out = " ".join(_run_cell(tmp_path, capsys).split())  # no benchmarks/ anywhere: Colab
    assert "outside the course repository" in out and "book's page" in out, out
    assert "No GPU results file" not in out and "rebuild" not in out
    assert not plt.get_fignums()


def test_run_from_the_repository_root_the_results_are_found(tmp_path, capsys):
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / "a.json").write_text(json.dumps(_results("2026-11-23T00:00:00+00:00", "NVIDIA H100")))
    _run_cell(tmp_path, capsys, where=".")
    assert "a.json" in plt.figure(plt.get_fignums()[-1])._suptitle.get_text()


def test_with_results_the_newest_is_plotted_with_its_provenance(tmp_path, capsys):
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / "b.json").write_text(json.dumps(_results("2026-01-01T00:00:00+00:00", "old GPU")))
    (results / "a.json").write_text(json.dumps(_results("2026-11-23T00:00:00+00:00", "NVIDIA H100")))
    printed = _run_cell(tmp_path, capsys)
    # The sentences are wrapped to fit the book's column (80 characters at 1280 px); read
    # them with the line breaks undone.
    assert max(len(line) for line in printed.splitlines()) <= 80, printed
    out = " ".join(printed.split())
    fig = plt.figure(plt.get_fignums()[-1])
    try:
        title = fig._suptitle.get_text()
        assert "NVIDIA H100" in title and "2026-11-23" in title and "a.json" in title
        assert len(fig.get_axes()) == 4
        # The ratios, through the benchmark's goals(): 1.0 / 1.5 forward, 4.0 / 5.0 backward;
        # the course's goals for its kernels are its maintainers' business, not the reader's.
        assert "SDPA-flash forward TFLOP/s at n=4096, E=64, float16, non-causal: 0.667." in out
        assert "causal / non-causal, at n=4096, E=64, float16: 0.550." in out
        assert "backward TFLOP/s at n=4096, E=64, float16, non-causal: 0.800." in out
        assert "goal" not in out.lower()
        assert "memory-efficient / reference, at n=16384: 0.010" in out
        assert "n=65536 / n=16384 (linear: 4): 3.750" in out
        assert "reference out of memory" in out and "sdpa_cudnn did not run" in out
        assert "forward, n=4096, E=64, float16, non-causal, fastest first: sdpa_flash 1.00 ms, triton 1.50 ms" in out
    finally:
        plt.close("all")


def test_the_h100_run_is_plotted_beside_the_h100_roofline_though_another_is_newer(tmp_path,
                                                                                   capsys):
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / "h100.json").write_text(json.dumps(_results("2026-11-23T00:00:00+00:00",
                                                           "NVIDIA H100 80GB HBM3")))
    (results / "h200.json").write_text(json.dumps(_results("2026-11-24T00:00:00+00:00",
                                                           "NVIDIA H200")))
    printed = " ".join(_run_cell(tmp_path, capsys).split())
    assert "Measured on NVIDIA H100 80GB HBM3" in printed, printed
    title = plt.figure(plt.get_fignums()[-1])._suptitle.get_text()
    assert "h100.json" in title


@pytest.fixture(autouse=True)
def _no_open_figures():
    plt.close("all")
    yield
    plt.close("all")


def test_the_committed_newest_results_file_measures_every_goal():
    files = sorted((ROOT / "benchmarks" / "results").glob("*.json"), key=lambda p: json.loads(p.read_text())["date"])
    if not files:
        pytest.skip("no GPU results file committed")
    res = json.loads(files[-1].read_text())
    assert res["goals"] == gpu_goals(res)  # the file's verdicts are today's code's verdicts
    assert all(line.endswith(("met", "not met")) for line in res["goals"]["lines"]), res["goals"]["lines"]
    for key in ("device", "torch", "triton", "cuda", "date"):
        assert res[key], key
