"""The Triton kernels' logic (forward and backward) checked on the CPU with Triton's interpreter (TRITON_INTERPRET=1).

Needs the ``triton`` package (in requirements.txt; no GPU needed): without it the
test skips on a workstation and fails in CI, where it must run. The
interpreter's ``tl.dot`` mishandles bfloat16 (triton 3.9), so only float16 is
checked here; the GPU tests cover both.
"""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

HAVE_TRITON = importlib.util.find_spec("triton") is not None
pytestmark = pytest.mark.skipif(
    not HAVE_TRITON and not os.environ.get("CI"), reason="needs triton (pip install -r requirements.txt)"
)

SCRIPT = textwrap.dedent(
    """
    import itertools, torch
    import torch.nn.functional as F
    from qkv import triton_backward, triton_kernel
    g = torch.Generator().manual_seed(0)
    for E, causal, (L, S) in itertools.product([64, 128], [False, True], [(70, 70), (40, 150), (150, 40), (1, 129)]):
        q, k, v = (torch.randn(1, 2, n, E, generator=g).half() for n in (L, S, S))
        got, lse = triton_kernel.attention_forward(q, k, v, causal, config=dict(BLOCK_M=64, BLOCK_N=32))
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        torch.testing.assert_close(got.float(), want, atol=2e-3, rtol=2e-3)
    # Non-contiguous inputs ((B, L, H, E) seen as (B, H, L, E)) and an explicit scale.
    q, k, v = (torch.randn(1, 50, 2, 64, generator=g).half().transpose(1, 2) for _ in range(3))
    got, _ = triton_kernel.attention_forward(q, k, v, False, scale=0.3, config=dict(BLOCK_M=64, BLOCK_N=32))
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), scale=0.3)
    torch.testing.assert_close(got.float(), want, atol=2e-3, rtol=2e-3)
    # The backward kernels against autograd of float64 SDPA, from the forward's saved lse.
    fwd, bwd = dict(BLOCK_M=32, BLOCK_N=16), dict(BLOCK_M1=16, BLOCK_N1=32, BLOCK_M2=32, BLOCK_N2=16)
    for E, causal, (L, S) in itertools.product([16, 64], [False, True], [(40, 40), (20, 70), (70, 20), (1, 33)]):
        q, k, v = (torch.randn(1, 2, n, E, generator=g).half() for n in (L, S, S))
        out, lse = triton_kernel.attention_forward(q, k, v, causal, config=fwd)
        do = torch.randn(out.shape, generator=g).half()
        got = triton_backward.attention_backward(q, k, v, out, lse, do, causal, E ** -0.5, config=bwd)
        qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
        want = F.scaled_dot_product_attention(qd, kd, vd, is_causal=causal)
        for name, a, b in zip(("dq", "dk", "dv"), got, torch.autograd.grad(want, (qd, kd, vd), do.double())):
            assert a.dtype == torch.float16, name
            torch.testing.assert_close(a.double(), b, atol=1e-2, rtol=1e-2, msg=f"{name} {E} {causal} {L} {S}")
    print("ok")
    """
)


def test_kernels_in_triton_interpreter_match_sdpa_and_its_gradients():
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")


def test_the_launch_configurations_are_those_the_newest_gpu_results_file_measured():
    # benchmarks/attention_gpu.py sweeps a few configurations and records the winners
    # ("tuned"); the committed tables must be what the committed numbers ran with.
    import json
    from pathlib import Path

    from qkv.triton_backward import BACKWARD_CONFIGS
    from qkv.triton_kernel import FORWARD_CONFIGS

    files = (Path(__file__).resolve().parents[1] / "benchmarks" / "results").glob("*.json")
    tuned = [r["tuned"] for r in sorted((json.loads(f.read_text()) for f in files), key=lambda r: r["date"])
             if "tuned" in r]
    if not tuned:
        pytest.skip("no results file with a sweep")
    for key, cfg in tuned[-1]["forward"].items():
        assert FORWARD_CONFIGS[(int(key.split("-")[0]), key.endswith("-causal"))] == cfg, key
    for key, cfg in tuned[-1]["backward"].items():
        assert BACKWARD_CONFIGS[int(key)] == cfg, key
