"""CPU benchmark for chapter 7: the reference, chunked attention and torch's SDPA, side by side.

One run, interleaved rounds after a warm-up, medians. Prints each method's time
divided by torch's SDPA time at L = S = 1024 and 4096 (B=1, H=8, E=64, float32),
and the peak extra memory (PyTorch's allocations, from the profiler) of
``qkv.chunked_attention`` against the reference at 4096.

Goals: the reference at most 3x SDPA at 1024; chunked at most 1.5x SDPA at 4096
with peak extra memory at most 10% of the reference's.

    PYTHONPATH=src python benchmarks/attention_cpu.py [--threads N] [--repeat R]
"""

from __future__ import annotations

import argparse
import platform

import torch
import torch.nn.functional as F

import qkv
from qkv.bench import peak_cpu_memory, time_interleaved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"{torch.get_num_threads()} threads, {args.repeat} rounds, medians")
    B, H, E = 1, 8, 64
    gen = torch.Generator().manual_seed(0)
    for n in args.sizes:
        q, k, v = (torch.randn(B, H, n, E, generator=gen) for _ in range(3))
        fns = {
            "sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
            "reference": lambda: qkv.scaled_dot_product_attention(q, k, v),
            "chunked": lambda: qkv.chunked_attention(q, k, v),
        }
        torch.testing.assert_close(fns["chunked"](), fns["sdpa"]())
        t = time_interleaved(fns, repeat=args.repeat)
        print(f"L=S={n}: sdpa {t['sdpa'] * 1e3:.1f} ms; "
              f"reference / sdpa = {t['reference'] / t['sdpa']:.2f}; "
              f"chunked / sdpa = {t['chunked'] / t['sdpa']:.2f}")
        if n == max(args.sizes):
            mem = {name: peak_cpu_memory(fn) for name, fn in fns.items()}
            print(f"peak extra memory at L=S={n} (MiB): "
                  + ", ".join(f"{name} {b / 2**20:.1f}" for name, b in mem.items()))
            print(f"chunked / reference peak memory = {mem['chunked'] / mem['reference']:.3f}")


if __name__ == "__main__":
    main()
