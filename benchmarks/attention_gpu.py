"""GPU benchmark for chapter 8: reference, chunked, the Triton kernel and SDPA's backends.

Measures in one run (warm-up, then interleaved rounds, medians) the forward
TFLOP/s and the peak extra memory of

- ``reference``: :func:`qkv.scaled_dot_product_attention` (materialises L x S),
- ``chunked``:   :func:`qkv.chunked_attention` (online softmax in PyTorch),
- ``triton``:    :func:`qkv.triton_attention` (the fused kernel),
- ``sdpa_flash``, ``sdpa_efficient``, ``sdpa_cudnn``: torch's SDPA with one
  backend pinned by ``torch.nn.attention.sdpa_kernel`` (skipped where the
  backend is not available),

at B=4, H=32, E=64 and 128, L=S from 1024 to 16384, causal and not. Then a
long-context run (B=1, H=16, E=64, n=65536) where the reference cannot
allocate its score matrix and the chunked version still completes, and a
memory comparison at n=16384. FLOPs are counted as ``4 * B * H * L * S * E``
(half under a causal mask), see :func:`qkv.bench.attention_flops`.

Writes ``benchmarks/results/attention_gpu_<device>_<date>.json``, which chapter 8
plots, with the device name, the torch/triton/CUDA versions and the date.

    PYTHONPATH=src python benchmarks/attention_gpu.py            # full run (a few minutes)
    PYTHONPATH=src python benchmarks/attention_gpu.py --quick    # n = 1024, 4096 only
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import re
import statistics
import sys
from contextlib import nullcontext

import torch
import torch.nn.functional as F

import qkv
from qkv.bench import attention_flops, gpu_goals

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def sdpa_backends() -> dict:
    """Name -> SDPBackend for every backend this torch build knows."""
    from torch.nn.attention import SDPBackend

    names = {"sdpa_flash": "FLASH_ATTENTION", "sdpa_efficient": "EFFICIENT_ATTENTION",
             "sdpa_cudnn": "CUDNN_ATTENTION"}
    return {k: getattr(SDPBackend, v) for k, v in names.items() if hasattr(SDPBackend, v)}


def methods(chunk_size: int) -> dict:
    """Name -> (function(q, k, v, causal), context manager factory)."""
    from torch.nn.attention import sdpa_kernel

    found = {
        "reference": (lambda q, k, v, c: qkv.scaled_dot_product_attention(q, k, v, is_causal=c), nullcontext),
        "chunked": (lambda q, k, v, c: qkv.chunked_attention(q, k, v, is_causal=c, chunk_size=chunk_size), nullcontext),
        "triton": (lambda q, k, v, c: qkv.triton_attention(q, k, v, is_causal=c), nullcontext),
    }
    for name, backend in sdpa_backends().items():
        found[name] = (
            lambda q, k, v, c: F.scaled_dot_product_attention(q, k, v, is_causal=c),
            lambda backend=backend: sdpa_kernel([backend]),
        )
    return found


def measure(fn, ctx, q, k, v, causal, repeat, warmup) -> dict:
    """Median milliseconds (CUDA events) and peak extra MiB of one method, or the error it raised."""
    try:
        with ctx():
            # Warm up first: compiling and autotuning (Triton's benchmarker allocates a
            # cache-flush buffer) must not count as the method's memory.
            for _ in range(warmup):
                fn(q, k, v, causal)
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            out = fn(q, k, v, causal)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
            del out
            times = []
            for _ in range(repeat):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn(q, k, v, causal)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
        return {"ms": statistics.median(times), "peak_mib": peak / 2**20, "error": None}
    except (torch.OutOfMemoryError, RuntimeError) as err:  # OOM, or a backend refusing the shape
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        kind = "out of memory" if isinstance(err, torch.OutOfMemoryError) else "error"
        return {"ms": None, "peak_mib": None, "error": f"{kind}: {str(err).splitlines()[0][:200]}"}


def inputs(B, H, n, E, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return tuple(torch.randn(B, H, n, E, generator=g, device="cuda", dtype=dtype) for _ in range(3))


def versions() -> dict:
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {
        "device": torch.cuda.get_device_name(),
        "capability": ".".join(map(str, torch.cuda.get_device_capability())),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": triton_version,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 1024 and 4096 only, E = 64")
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--chunk-size", type=int, default=1024, help="chunked_attention's chunk_size")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS,
                        help="results file, or a folder to write the default name into (default: results/)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("attention_gpu.py needs a CUDA GPU; on the CPU run benchmarks/attention_cpu.py")
    dtype = getattr(torch, args.dtype)
    B, H = 4, 32
    sizes = [1024, 4096] if args.quick else [1024, 2048, 4096, 8192, 16384]
    head_dims = [64] if args.quick else [64, 128]
    info = versions()
    print(", ".join(f"{k} {v}" for k, v in info.items()))
    table = methods(args.chunk_size)
    runs = []
    for E in head_dims:
        for causal in (False, True):
            for n in sizes:
                q, k, v = inputs(B, H, n, E, dtype)
                flops = attention_flops(B, H, n, n, E, is_causal=causal)
                for name, (fn, ctx) in table.items():
                    r = measure(fn, ctx, q, k, v, causal, args.repeat, args.warmup)
                    r.update(method=name, B=B, H=H, E=E, n=n, causal=causal, dtype=args.dtype)
                    r["tflops"] = flops / (r["ms"] * 1e-3) / 1e12 if r["ms"] else None
                    runs.append(r)
                    shown = f"{r['tflops']:7.1f} TFLOP/s {r['peak_mib']:9.1f} MiB" if r["ms"] else r["error"]
                    print(f"E={E:3d} causal={causal!s:5} n={n:5d} {name:15s} {shown}", flush=True)
                del q, k, v

    # Memory at n=16384 with B=1, H=8, where the reference still fits on a large GPU.
    memory = {}
    q, k, v = inputs(1, 8, 16384, 64, dtype)
    for name in ("reference", "chunked"):
        fn, ctx = table[name]
        memory[name] = measure(fn, ctx, q, k, v, False, 1, 1)
    del q, k, v

    # Long context: B=1, H=16, E=64, n=65536. The reference needs 16 * 65536**2 float32 scores.
    long_context = {}
    q, k, v = inputs(1, 16, 65536, 64, dtype)
    for name in ("reference", "chunked", "triton"):
        fn, ctx = table[name]
        # One warm-up call (compiling, autotuning), except for the reference, which cannot fit.
        long_context[name] = measure(fn, ctx, q, k, v, False, 1, 0 if name == "reference" else 1)
        print(f"n=65536 B=1 H=16 E=64 {name}: {long_context[name]}", flush=True)
    del q, k, v

    results = dict(info, dtype=args.dtype, B=B, H=H, chunk_size=args.chunk_size,
                   repeat=args.repeat, runs=runs, memory_16384_B1_H8=memory,
                   long_context_65536_B1_H16=long_context, goals=gpu_goals(runs, memory))
    for line in results["goals"]["lines"]:
        print(line)
    slug = re.sub(r"[^a-z0-9]+", "-", info["device"].lower()).strip("-")
    out = args.out
    if out.is_dir() or out.suffix != ".json":
        out = out / f"attention_gpu_{slug}_{info['date'][:10]}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
