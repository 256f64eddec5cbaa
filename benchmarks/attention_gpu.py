"""GPU benchmark for chapter 8: the Triton kernels against SDPA's backends, and training memory.

Measures in one run, most important first, each measurement on its own (a backend that
refuses a shape, or memory that runs out, is recorded as such, not a crash):

1. ``forward``: TFLOP/s of ``triton`` (:func:`qkv.triton_attention`) and of torch's SDPA
   with one backend pinned (``sdpa_flash``, ``sdpa_efficient``, ``sdpa_cudnn``), at
   n = 1024, 4096, 16384, head dims 64 and 128, float16 and bfloat16, causal and not.
   As in the FlashAttention-2 paper, B = 16384 / n and H = 2048 / E, so every size does
   the same number of tokens; FLOPs are ``4 B H n^2 E``, half under a causal mask.
2. ``backward``: the same for the backward pass alone (``torch.autograd.grad`` on a kept
   graph), counted as 2.5 times the forward's FLOPs (five matrix products instead of two).
3. ``training_memory``: peak extra memory of one forward + backward at B=1, H=8, E=64,
   float16, n = 4096, 16384 and 65536, for the plain-PyTorch
   :func:`qkv.memory_efficient_attention`, the reference
   :func:`qkv.scaled_dot_product_attention`, ``triton`` and ``sdpa_flash``.
0. ``forward_configs``, ``backward_configs``: first, a few launch configurations of the
   Triton kernels per head dimension at n = 4096, float16, non-causal; the fastest are
   used for everything after (``tuned``) and belong in the modules' config tables.

Times are medians of ``triton.testing.do_bench`` (CUDA events, L2 flushed between runs).
The results file is rewritten after every phase, so a run cut short still leaves one.

    python3 benchmarks/attention_gpu.py --out benchmarks/results            # on a CUDA GPU
    TRITON_INTERPRET=1 python benchmarks/attention_gpu.py --smoke --out /tmp # on the CPU: tiny sizes
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import re
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "src"))
import qkv  # noqa: E402
from qkv.bench import attention_flops, gpu_goals  # noqa: E402

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
SDPA = {"sdpa_flash": "FLASH_ATTENTION", "sdpa_efficient": "EFFICIENT_ATTENTION", "sdpa_cudnn": "CUDNN_ATTENTION"}


def triton_fn(q, k, v, causal, config=None):
    """The Triton kernels through their autograd.Function (also on the CPU interpreter)."""
    from qkv import triton_backward, triton_kernel

    if config is not None:
        return triton_kernel.attention_forward(q, k, v, causal, config=config)[0]
    return triton_backward.TritonAttention.apply(q, k, v, causal, q.shape[-1] ** -0.5)


def sdpa_fn(backend_name):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, SDPA[backend_name])

    def fn(q, k, v, causal):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return fn


METHODS = {"triton": triton_fn, **{name: sdpa_fn(name) for name in SDPA}}
TRAINING = {
    "memory_efficient": lambda q, k, v, c: qkv.memory_efficient_attention(q, k, v, is_causal=c, chunk_size=1024),
    "reference": lambda q, k, v, c: qkv.scaled_dot_product_attention(q, k, v, is_causal=c),
    "triton": triton_fn,
    "sdpa_flash": sdpa_fn("sdpa_flash"),
}


def bench_ms(fn, device) -> float:
    """Median milliseconds of ``fn()``."""
    if device == "cuda":
        import triton.testing

        try:
            return triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")
        except TypeError:  # a Triton without return_mode
            return triton.testing.do_bench(fn, warmup=10, rep=40, quantiles=[0.5])[0]
    fn()
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def failure(err: BaseException) -> str:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    # qkv's reference refuses up front a tensor larger than the device ("memory available").
    oom = isinstance(err, torch.OutOfMemoryError) or any(s in str(err) for s in ("out of memory", "memory available"))
    kind = "out of memory" if oom else "error"
    return f"{kind}: {type(err).__name__}: {str(err).strip().splitlines()[0][:200] if str(err).strip() else ''}"


def inputs(B, H, n, E, dtype, device, grad=False, seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    return tuple(torch.randn(B, H, n, E, generator=g, device=device, dtype=dtype).requires_grad_(grad)
                 for _ in range(3))


def speed(name, fn, B, H, n, E, dtype, causal, device, backward) -> dict:
    row = {"method": name, "B": B, "H": H, "n": n, "E": E, "dtype": str(dtype).split(".")[-1],
           "causal": causal, "ms": None, "tflops": None, "error": None}
    try:
        q, k, v = inputs(B, H, n, E, dtype, device, grad=backward)
        if backward:
            out = fn(q, k, v, causal)
            do = torch.randn_like(out)
            ms = bench_ms(lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True), device)
        else:
            with torch.no_grad():
                ms = bench_ms(lambda: fn(q, k, v, causal), device)
        flops = attention_flops(B, H, n, n, E, is_causal=causal) * (2.5 if backward else 1.0)
        row.update(ms=ms, tflops=flops / (ms * 1e-3) / 1e12)
    except Exception as err:  # a backend refusing the shape or dtype, OOM, a compile error: recorded
        row["error"] = failure(err)
    return row


def training_memory(name, fn, n, device, B=1, H=8, E=64, dtype=torch.float16, causal=False) -> dict:
    row = {"method": name, "B": B, "H": H, "n": n, "E": E, "dtype": str(dtype).split(".")[-1],
           "causal": causal, "peak_mib": None, "ms": None, "error": None}
    try:
        q, k, v = inputs(B, H, n, E, dtype, device, grad=True)
        do = torch.randn(B, H, n, E, device=device, dtype=dtype)

        def step():
            fn(q, k, v, causal).backward(do)

        step()  # compile and warm up, outside the measured peak
        q.grad = k.grad = v.grad = None
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            row["ms"] = (time.perf_counter() - t0) * 1e3
            row["peak_mib"] = (torch.cuda.max_memory_allocated() - base) / 2**20
        else:
            row["peak_mib"] = qkv.bench.peak_cpu_memory(step) / 2**20
        del q, k, v, do
    except Exception as err:
        row["error"] = failure(err)
    return row


FORWARD_SWEEP = {64: [(128, 64, 4, 3), (128, 64, 8, 3), (64, 64, 4, 3), (128, 64, 8, 4), (64, 32, 4, 3)],
                 128: [(128, 64, 8, 3), (128, 32, 8, 3), (64, 64, 4, 3), (128, 128, 8, 3), (64, 32, 4, 3)]}
BACKWARD_SWEEP = {64: [(64, 64, 64, 64, 4, 3), (32, 128, 128, 32, 4, 3), (64, 128, 128, 64, 8, 3)],
                  128: [(64, 128, 128, 64, 8, 3), (32, 64, 64, 32, 4, 3), (32, 128, 128, 32, 8, 3),
                        (64, 64, 64, 64, 4, 3)]}


def tune(results, n, head_dims, bh, device, show) -> None:
    """Time a few launch configurations per head dimension (n, float16); keep the fastest.

    The forward's are timed causal and not (a causal launch may prefer smaller blocks), the
    backward's non-causal only.

    The winners replace ``FORWARD_CONFIGS`` / ``BACKWARD_CONFIGS`` for the rest of the run
    and are recorded (``tuned``): copy them into the modules so the code runs what was measured.
    """
    from qkv import triton_backward, triton_kernel

    results["tuned"] = {"forward": {}, "backward": {}}
    for E in head_dims:
        for causal in (False, True):
            rows = []
            for bm, bn, w, st in FORWARD_SWEEP[E]:
                cfg = {"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w, "num_stages": st}
                r = speed("triton", lambda q, k, v, c, cfg=cfg: triton_fn(q, k, v, c, config=cfg), *bh(n, E),
                          n, E, torch.float16, causal, device, False)
                rows.append(dict(r, config=cfg))
                show(r, f"{bm}x{bn}/{w}/{st}")
            results["forward_configs"] += rows
            timed = [r for r in rows if r["ms"] is not None]
            if timed:
                triton_kernel.FORWARD_CONFIGS[(E, causal)] = min(timed, key=lambda r: r["ms"])["config"]
            name = f"{E}-causal" if causal else str(E)
            results["tuned"]["forward"][name] = triton_kernel.FORWARD_CONFIGS[(E, causal)]
        rows = []
        for m1, n1, m2, n2, w, st in BACKWARD_SWEEP[E]:
            cfg = {"BLOCK_M1": m1, "BLOCK_N1": n1, "BLOCK_M2": m2, "BLOCK_N2": n2, "num_warps": w, "num_stages": st}
            r = backward_config_speed(cfg, *bh(n, E), n, E, device)
            rows.append(r)
            show(r, f"{m1}/{n1}/{m2}/{n2}/{w}/{st}")
        results["backward_configs"] += rows
        timed = [r for r in rows if r["ms"] is not None]
        if timed:
            triton_backward.BACKWARD_CONFIGS[E] = min(timed, key=lambda r: r["ms"])["config"]
        results["tuned"]["backward"][str(E)] = triton_backward.BACKWARD_CONFIGS[E]
    print("tuned:", results["tuned"], flush=True)


def check(device, B, H, n, E, causal) -> dict:
    """Relative error of the Triton output and gradients against SDPA in float32, on the benchmark's inputs."""
    try:
        q, k, v = inputs(B, H, n, E, torch.float16, device, grad=True)
        out = triton_fn(q, k, v, causal)
        do = torch.randn_like(out)
        got = (out, *torch.autograd.grad(out, (q, k, v), do))
        q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
        ref = F.scaled_dot_product_attention(q32, k32, v32, is_causal=causal)
        want = (ref, *torch.autograd.grad(ref, (q32, k32, v32), do.float()))
        return {name: ((a.float() - b).norm() / b.norm()).item()
                for name, a, b in zip(("out", "dq", "dk", "dv"), got, want)} | {"n": n, "E": E, "causal": causal}
    except Exception as err:
        return {"error": failure(err)}


def backward_config_speed(cfg, B, H, n, E, device) -> dict:
    """The Triton backward alone (from a saved forward) with launch configuration ``cfg``."""
    from qkv import triton_backward, triton_kernel

    row = {"method": "triton", "B": B, "H": H, "n": n, "E": E, "dtype": "float16", "causal": False,
           "ms": None, "tflops": None, "error": None, "config": cfg}
    try:
        q, k, v = inputs(B, H, n, E, torch.float16, device)
        out, lse = triton_kernel.attention_forward(q, k, v, False)
        do = torch.randn_like(out)
        ms = bench_ms(lambda: triton_backward.attention_backward(q, k, v, out, lse, do, False, E ** -0.5,
                                                                 config=cfg), device)
        row.update(ms=ms, tflops=2.5 * attention_flops(B, H, n, n, E) / (ms * 1e-3) / 1e12)
    except Exception as err:
        row["error"] = failure(err)
    return row


def versions(device) -> dict:
    import triton

    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton.__version__,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        info.update(device=torch.cuda.get_device_name(), capability=f"{p.major}.{p.minor}",
                    multiprocessors=p.multi_processor_count, memory_gib=round(p.total_memory / 2**30, 1))
    else:
        info.update(device="CPU (Triton interpreter smoke run)", capability=None)
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS, help="results file or folder")
    parser.add_argument("--budget-s", type=float, default=300, help="stop starting measurements after this")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (for the CPU, under TRITON_INTERPRET=1)")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.smoke:
        sys.exit("attention_gpu.py needs a CUDA GPU; on the CPU pass --smoke (with TRITON_INTERPRET=1)")
    t_start = time.perf_counter()
    info = versions(device)
    print(", ".join(f"{k} {v}" for k, v in info.items()), flush=True)
    slug = re.sub(r"[^a-z0-9]+", "-", info["device"].lower()).strip("-")
    out = args.out if args.out.suffix == ".json" else args.out / f"attention_gpu_{slug}_{info['date'][:10]}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    results = dict(info, sizes="B = 16384 / n, H = 2048 / E", flops="forward 4 B H n^2 E (half if causal); "
                   "backward 2.5 times that", forward=[], backward=[], training_memory=[],
                   forward_configs=[], backward_configs=[],
                   skipped=[], tutorial_kernel="not measured (no copy of the Triton tutorial's kernel here)")

    def left() -> bool:
        return time.perf_counter() - t_start < args.budget_s

    def save(phase):
        results["goals"] = gpu_goals(results)
        results["elapsed_s"] = round(time.perf_counter() - t_start, 1)
        out.write_text(json.dumps(results, indent=1))
        print(f"[{results['elapsed_s']:6.1f} s] {phase} saved to {out}", flush=True)

    def show(r, what):
        shown = f"{r['ms']:8.3f} ms {r['tflops']:7.1f} TFLOP/s" if r["ms"] is not None else r["error"]
        print(f"{what:8s} {r['dtype']:8s} E={r['E']:3d} causal={r['causal']!s:5} n={r['n']:5d} "
              f"{r['method']:15s} {shown}", flush=True)

    def bh(n, E):  # (B, H): the same tokens and width at every size
        return (1, 2) if args.smoke else (max(1, 16384 // n), 2048 // E)

    sizes = [64, 128] if args.smoke else [4096, 1024, 16384]  # 4096 first: the goals
    head_dims = [64] if args.smoke else [64, 128]
    dtypes = [torch.float16] if args.smoke else [torch.float16, torch.bfloat16]
    grid = [(n, E, dt, c) for dt in dtypes for E in head_dims for n in sizes for c in (False, True)]
    tune(results, sizes[0], head_dims, bh, device, show)
    save("launch configurations")
    results["check"] = [check(device, *bh(sizes[0], E), sizes[0], E, c) for E in head_dims for c in (False, True)]
    print("Triton against SDPA in float32, relative errors:", results["check"], flush=True)
    # The goal's shapes first (fp16, E=64, n=4096), forward then backward; then the rest.
    for phase, backward in (("forward", False), ("backward", True)):
        for n, E, dt, causal in grid[:2]:
            for name, fn in METHODS.items():
                r = speed(name, fn, *bh(n, E), n, E, dt, causal, device, backward)
                results[phase].append(r)
                show(r, phase)
        save(f"{phase} at the goal's shapes")
    memory_sizes = [256, 512] if args.smoke else [4096, 16384, 65536]
    for n in memory_sizes:
        for name, fn in TRAINING.items():
            if not left():
                results["skipped"].append(f"training_memory {name} n={n}")
                continue
            r = training_memory(name, fn, n, device, H=2 if args.smoke else 8)
            results["training_memory"].append(r)
            print(f"training n={n:6d} {name:17s} "
                  + (f"peak {r['peak_mib']:10.1f} MiB" + (f", {r['ms']:.1f} ms" if r["ms"] else "")
                     if r["error"] is None else r["error"]), flush=True)
    save("training memory")
    for phase, backward in (("forward", False), ("backward", True)):
        for n, E, dt, causal in grid[2:]:
            for name, fn in METHODS.items():
                if not left():
                    results["skipped"].append(f"{phase} {name} {dt} E={E} n={n} causal={causal}")
                    continue
                r = speed(name, fn, *bh(n, E), n, E, dt, causal, device, backward)
                results[phase].append(r)
                show(r, phase)
        save(phase)
    for line in results["goals"]["lines"]:
        print(line)
    if results["skipped"]:
        print(f"skipped for the time budget: {len(results['skipped'])} measurements")


if __name__ == "__main__":
    main()
