"""CPU benchmark for chapter 8: the reference, chunked attention and torch's SDPA, side by side.

One run. For each thread count (torch's default, then 1 unless ``--threads``
names them) and each size, the three methods are called in interleaved rounds
after a warm-up; each ratio printed is the median over rounds of a method's time
divided by SDPA's time in the same round, so that a burst of load on a shared
machine hits both sides of a ratio alike. Then the peak extra memory (PyTorch's
allocations, from the profiler) of ``qkv.chunked_attention`` against the
reference at the largest size. B=1, H=8, E=64, float32.

Goals: the reference at most 3x SDPA at 1024; chunked at most 1.5x SDPA at 4096
with peak extra memory at most 10% of the reference's.

    PYTHONPATH=src python benchmarks/attention_cpu.py [--threads N ...] [--repeat R]
"""

from __future__ import annotations

import argparse
import platform
import statistics

import torch
import torch.nn.functional as F

import qkv
from qkv.bench import median_ratios, peak_cpu_memory, time_rounds


def methods(q, k, v, chunk: dict) -> dict:
    """Name -> function of no arguments, for the three methods on these inputs."""
    return {
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
        "reference": lambda: qkv.scaled_dot_product_attention(q, k, v),
        "chunked": lambda: qkv.chunked_attention(q, k, v, **chunk),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=None,
                        help="torch thread counts to measure (default: torch's, then 1)")
    parser.add_argument("--repeat", type=int, default=11, help="timed rounds")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--chunk-size", type=int, default=None,
                        help="chunk_size for qkv.chunked_attention (default: its own)")
    args = parser.parse_args()
    threads = args.threads or sorted({torch.get_num_threads(), 1}, reverse=True)
    chunk = {} if args.chunk_size is None else {"chunk_size": args.chunk_size}
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"{args.repeat} rounds, median of per-round ratios")
    B, H, E = 1, 8, 64
    gen = torch.Generator().manual_seed(0)
    inputs = {n: tuple(torch.randn(B, H, n, E, generator=gen) for _ in range(3)) for n in args.sizes}
    for n, (q, k, v) in inputs.items():
        fns = methods(q, k, v, chunk)
        torch.testing.assert_close(fns["chunked"](), fns["sdpa"]())
    for t in threads:
        torch.set_num_threads(t)
        for n, (q, k, v) in inputs.items():
            rounds = time_rounds(methods(q, k, v, chunk), repeat=args.repeat)
            r = median_ratios(rounds, "sdpa")
            print(f"{t} thread(s), L=S={n}: sdpa {statistics.median(rounds['sdpa']) * 1e3:.1f} ms; "
                  f"reference / sdpa = {r['reference']:.2f}; chunked / sdpa = {r['chunked']:.2f}")
    n = max(args.sizes)
    mem = {name: peak_cpu_memory(fn) for name, fn in methods(*inputs[n], chunk).items()}
    print(f"peak extra memory at L=S={n} (MiB): "
          + ", ".join(f"{name} {b / 2**20:.1f}" for name, b in mem.items()))
    print(f"chunked / reference peak memory = {mem['chunked'] / mem['reference']:.3f}")


if __name__ == "__main__":
    main()
