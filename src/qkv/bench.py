"""Small, honest measuring tools shared by chapter 8 and ``benchmarks/``.

Times are medians of several runs after a warm-up, and competing functions are
run in interleaved rounds, so that a burst of load on a shared machine hits all
of them alike. CPU peak memory is read from PyTorch's own allocation events (the
profiler's ``profile_memory``), because :mod:`tracemalloc` does not see tensors
and the process's resident size does not shrink when memory is freed.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from typing import Callable, Dict, List, Optional, Sequence

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

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events = [e for e in events if e.device_type() == torch.autograd.DeviceType.CPU]
    events.sort(key=lambda e: e.start_ns())
    live = peak = 0
    for e in events:
        live += e.nbytes()
        peak = max(peak, live)
    return peak


def gpu_goals(runs: Sequence[dict], memory: Dict[str, dict]) -> dict:
    """Chapter 8's goals for the GPU benchmark, evaluated on one run's numbers.

    ``benchmarks/attention_gpu.py`` stores the result in its results file (key ``goals``) and
    the chapter prints its ``lines``.

    Args:
        runs: the benchmark's timed runs, each with ``method``, ``n``, ``causal``, ``E``,
            ``ms`` (None when it failed) and ``tflops``.
        memory: method -> ``{"peak_mib": ...}`` at n=16384 (B=1, H=8), for ``reference`` and
            ``chunked``.

    Returns:
        The three ratios (None where a figure is missing) and ``lines``, one sentence each with
        its goal.
    """
    def get(method, n, causal, E=64):
        for r in runs:
            if (r["method"], r["n"], r["causal"], r["E"]) == (method, n, causal, E) and r["ms"]:
                return r
        return None

    tri, flash, tri_c = get("triton", 4096, False), get("sdpa_flash", 4096, False), get("triton", 4096, True)
    share = tri["tflops"] / flash["tflops"] if tri and flash else None
    causal_ratio = tri_c["ms"] / tri["ms"] if tri and tri_c else None
    ref, chk = memory.get("reference", {}), memory.get("chunked", {})
    mem_ratio = chk["peak_mib"] / ref["peak_mib"] if ref.get("peak_mib") and chk.get("peak_mib") else None

    def show(x):
        return "not measured" if x is None else f"{x:.3f}"

    lines = [
        f"triton / sdpa_flash TFLOP/s at n=4096, E=64, non-causal: {show(share)} (goal >= 0.6)",
        f"triton causal / non-causal time at n=4096, E=64: {show(causal_ratio)} (goal <= 0.6)",
        f"chunked / reference peak memory at n=16384 (B=1, H=8): {show(mem_ratio)} (goal <= 0.05)",
    ]
    return {"triton_over_flash_4096": share, "causal_over_noncausal_4096": causal_ratio,
            "chunked_over_reference_memory_16384": mem_ratio, "lines": lines}
