"""Small, honest measuring tools shared by chapter 8 and ``benchmarks/``.

Times are medians of several runs after a warm-up, and competing functions are
run in interleaved rounds, so that a burst of load on a shared machine hits all
of them alike. CPU peak memory is read from PyTorch's own allocation events (the
profiler's ``profile_memory``), because :mod:`tracemalloc` does not see tensors
and the process's resident size does not shrink when memory is freed.
"""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import sys
import textwrap
import time
from collections.abc import Mapping
from typing import Callable, Dict, Iterator, List, Optional

import torch

from . import _validate as v


def attention_flops(
    B: int, H: int, L: int, S: int, E: int, Ev: Optional[int] = None, is_causal: bool = False
) -> float:
    """Floating-point operations of one attention forward pass.

    ``Q @ K^T`` costs ``2 * L * S * E`` (a multiply and an add per term) and
    ``P @ V`` costs ``2 * L * S * Ev``, per batch element and head: ``4 * B * H *
    L * S * E`` when ``Ev = E``. The softmax's ``O(L * S)`` is left out, as is
    customary. A causal mask needs only about half the scores.

    Args:
        B: batch size.
        H: heads.
        L: queries.
        S: keys.
        E: query/key width.
        Ev: value width (default ``E``).
        is_causal: count only the scores below the diagonal (half, for ``L = S``).

    Returns:
        The count, as a float.
    """
    for name, n in (("B", B), ("H", H), ("L", L), ("S", S), ("E", E)):
        v.require_int(name, n, minimum=0)
    Ev = E if Ev is None else v.require_int("Ev", Ev, minimum=0)
    v.require_flag("is_causal", is_causal)
    flops = 2.0 * B * H * L * S * (E + Ev)
    return flops / 2 if is_causal else flops


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_rounds(
    fns: Dict[str, Callable[[], object]], repeat: int = 5, warmup: int = 1, device: str = "cpu"
) -> Dict[str, List[float]]:
    """Wall time (seconds) of every call of each function, in interleaved rounds.

    Round ``r`` calls every function once, back to back, so the ``r``-th times of
    two functions were taken under the same load: their ratio is fairer than the
    ratio of two medians when the machine is shared.

    Args:
        fns: name -> function of no arguments.
        repeat: timed rounds; each round calls every function once.
        warmup: untimed calls of each function first (allocator, caches, kernels).
        device: ``"cuda..."`` synchronises before reading the clock.

    Returns:
        name -> list of ``repeat`` times in seconds, in round order.
    """
    v.require_instance("fns", fns, Mapping, "a dict of name -> function of no arguments")
    v.require_int("repeat", repeat)
    v.require_int("warmup", warmup, minimum=0)
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: Dict[str, List[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            _sync(device)
            start = time.perf_counter()
            fn()
            _sync(device)
            times[name].append(time.perf_counter() - start)
    return times


def time_interleaved(
    fns: Dict[str, Callable[[], object]], repeat: int = 5, warmup: int = 1, device: str = "cpu"
) -> Dict[str, float]:
    """Median wall time (seconds) of each function, measured in interleaved rounds.

    Args:
        fns, repeat, warmup, device: as for :func:`time_rounds`.

    Returns:
        name -> median seconds.
    """
    rounds = time_rounds(fns, repeat, warmup, device)
    return {name: statistics.median(ts) for name, ts in rounds.items()}


def median_ratios(rounds: Dict[str, List[float]], baseline: str) -> Dict[str, float]:
    """Median over rounds of each function's time divided by the baseline's in the same round.

    Args:
        rounds: the result of :func:`time_rounds`.
        baseline: the name to divide by.

    Returns:
        name -> median ratio (the baseline's is 1).
    """
    v.require_choice("baseline", baseline, list(rounds))
    base = rounds[baseline]
    return {name: statistics.median(t / b for t, b in zip(ts, base)) for name, ts in rounds.items()}


@contextlib.contextmanager
def _fd2_silenced() -> Iterator[None]:
    """File descriptor 2 (stderr, where C++ libraries write) sent to the null device."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_cpu_memory(fn: Callable[[], object]) -> int:
    """Peak bytes that PyTorch allocated on the CPU while ``fn`` ran, above what was live before.

    Replays the profiler's allocation and free events in time order and keeps
    the running maximum, so temporaries freed inside an operator still count.
    Memory a library allocates behind PyTorch's back (BLAS workspaces) is not
    seen; tensors that ``fn`` returns are.

    Args:
        fn: function of no arguments.

    Returns:
        Peak extra bytes.
    """
    from torch.profiler import ProfilerActivity, profile

    v.require_callable("fn", fn)

    # acc_events=True: one profile, one cycle, the same events; without it torch 2.11 warns
    # "Profiler clears events at the end of each cycle" on every page that measures (torch >= 2.4).
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True, acc_events=True)
    # Kineto's C++ says "profiler_start" and "profiler_stop" on file descriptor 2 (torch >=
    # 2.13): a notebook shows them as errors. Only its start and stop are silenced, not fn.
    with _fd2_silenced():
        prof.__enter__()
    try:
        fn()
    finally:
        with _fd2_silenced():
            prof.__exit__(None, None, None)
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events = [e for e in events if e.device_type() == torch.autograd.DeviceType.CPU]
    events.sort(key=lambda e: e.start_ns())
    live = peak = 0
    for e in events:
        live += e.nbytes()
        peak = max(peak, live)
    return peak


def gpu_goals(results: Mapping) -> dict:
    """Chapter 8's goals for the GPU benchmark, evaluated on one results file's numbers.

    ``benchmarks/attention_gpu.py`` stores the answer in its results file (key ``goals``)
    and the chapter prints its ``lines``. The goals (issue 26): at n=4096, E=64, float16,
    the Triton forward reaches at least 0.6 of SDPA-flash's TFLOP/s, its causal time is at
    most 0.6 of the non-causal one, and its backward reaches at least 0.4 of SDPA-flash's;
    the memory-efficient attention trains in at most 0.05 of the reference's peak memory at
    n=16384, and its memory grows linearly (at most 5 times for 4 times the length).

    Args:
        results: a parsed results file, with lists ``forward``, ``backward`` (rows with
            ``method``, ``n``, ``E``, ``dtype``, ``causal`` and ``ms``, None when it failed)
            and ``training_memory`` (rows with ``method``, ``n``, ``peak_mib``, ``error``).

    Returns:
        Each ratio (None where a figure is missing), whether it ``met`` its goal, and
        ``lines``: one sentence per goal.
    """
    v.require_instance("results", results, Mapping, "the parsed JSON of a results file")

    def ms(table, method, causal=False):
        for r in results.get(table, []):
            if (r["method"], r["n"], r["E"], r["dtype"], r["causal"]) == (method, 4096, 64, "float16", causal):
                return r.get("ms")
        return None

    def peak(method, n):
        for r in results.get("training_memory", []):
            if (r["method"], r["n"]) == (method, n):
                return r.get("peak_mib")
        return None

    def ratio(a, b):
        return a / b if a and b else None

    goals = {  # name: (ratio, goal, at least?, what)
        "forward_triton_over_flash": (ratio(ms("forward", "sdpa_flash"), ms("forward", "triton")), 0.6, True,
                                      "Triton / SDPA-flash forward TFLOP/s at n=4096, E=64, float16, non-causal"),
        "forward_causal_over_noncausal": (ratio(ms("forward", "triton", True), ms("forward", "triton")), 0.6, False,
                                          "Triton forward time, causal / non-causal, at n=4096, E=64, float16"),
        "backward_triton_over_flash": (ratio(ms("backward", "sdpa_flash"), ms("backward", "triton")), 0.4, True,
                                       "Triton / SDPA-flash backward TFLOP/s at n=4096, E=64, float16, non-causal"),
        "memory_efficient_over_reference_16384": (
            ratio(peak("memory_efficient", 16384), peak("reference", 16384)), 0.05, False,
            "training peak memory, memory-efficient / reference, at n=16384"),
        "memory_efficient_growth_16384_to_65536": (
            ratio(peak("memory_efficient", 65536), peak("memory_efficient", 16384)), 5.0, False,
            "memory-efficient training peak memory, n=65536 / n=16384 (linear: 4)"),
    }
    out: Dict[str, object] = {"lines": []}
    for name, (x, goal, at_least, what) in goals.items():
        met = None if x is None else (x >= goal if at_least else x <= goal)
        out[name] = x
        out[name + "_met"] = met
        verdict = "not measured" if x is None else f"{x:.3f}, goal {'>=' if at_least else '<='} {goal}: " + (
            "met" if met else "not met")
        out["lines"].append(f"{what}: {verdict}")
    return out


def gpu_summary(results: Mapping, n: int = 4096, E: int = 64, dtype: str = "float16",
                width: Optional[int] = 72, goals: bool = True) -> List[str]:
    """Chapter 8's sentences about one GPU results file: what ran fastest, the memory, the goals.

    Args:
        results: a parsed results file of ``benchmarks/attention_gpu.py``.
        n, E, dtype: the shape whose times are spelled out.
        width: the widest line; a longer sentence goes on in lines indented by two spaces, so
            that the printed text fits the book's column (``None``: one line per sentence).
        goals: say the course's goals for its kernels and whether each was met (for its
            maintainers); ``False``: the measured ratios only (for a reader).

    Returns:
        Lines of text, every number taken from ``results``.
    """
    v.require_instance("results", results, Mapping, "the parsed JSON of a results file")
    lines = [f"Measured on {results['device']} (torch {results['torch']}, triton {results['triton']}) "
             f"on {results['date'][:10]}."]
    for table in ("forward", "backward"):
        for causal in (False, True):
            rows = [r for r in results.get(table, [])
                    if (r["n"], r["E"], r["dtype"], r["causal"]) == (n, E, dtype, causal)]
            timed = sorted((r for r in rows if r.get("ms")), key=lambda r: r["ms"])
            if not timed:
                continue
            times = ", ".join(f"{r['method']} {r['ms']:.2f} ms" for r in timed)
            failed = [r["method"] for r in rows if not r.get("ms")]
            lines.append(f"{table}, n={n}, E={E}, {dtype}, {'causal' if causal else 'non-causal'}, fastest first: "
                         f"{times}" + (f"; {', '.join(failed)} did not run" if failed else "") + ".")
    memory = results.get("training_memory", [])
    for size in sorted({r["n"] for r in memory}):
        parts = [f"{r['method']} {r['peak_mib']:.0f} MiB" if r.get("peak_mib") is not None
                 else f"{r['method']} {(r.get('error') or 'failed').split(':')[0]}"
                 for r in memory if r["n"] == size]
        first = next(r for r in memory if r["n"] == size)
        lines.append(f"one training step at n={size} (B={first['B']}, H={first['H']}, E={first['E']}, "
                     f"{first['dtype']}), peak extra memory: {', '.join(parts)}.")
    if not goals:
        lines += [line.split(", goal ")[0] + "." for line in results["goals"]["lines"]]
    else:
        lines += [f"Goal: {line}" for line in results["goals"]["lines"]]
    if goals and results.get("tutorial_kernel"):
        lines.append(f"Stretch goal (the Triton tutorial's kernel on the same machine): {results['tutorial_kernel']}.")
    if width is None:
        return lines
    # A number and its unit stay on one line (textwrap does not break at a no-break space).
    keep = [re.sub(r"(?<=\d) (?=(ms|MiB)\b)", "\u00a0", line) for line in lines]
    return [part.replace("\u00a0", " ") for line in keep
            for part in textwrap.wrap(line, width, subsequent_indent="  ", break_on_hyphens=False)]
