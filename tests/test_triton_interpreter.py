"""The Triton kernel's logic checked on the CPU with Triton's interpreter (TRITON_INTERPRET=1).

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
    from qkv import triton_kernel
    g = torch.Generator().manual_seed(0)
    for E, causal, (L, S) in itertools.product([64, 128], [False, True], [(70, 70), (40, 150), (150, 40), (1, 129)]):
        q, k, v = (torch.randn(1, 2, n, E, generator=g).half() for n in (L, S, S))
        got = triton_kernel.attention_forward(q, k, v, causal, config=dict(BLOCK_M=64, BLOCK_N=32))
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        torch.testing.assert_close(got.float(), want, atol=2e-3, rtol=2e-3)
    # Non-contiguous inputs ((B, L, H, E) seen as (B, H, L, E)) and an explicit scale.
    q, k, v = (torch.randn(1, 50, 2, 64, generator=g).half().transpose(1, 2) for _ in range(3))
    got = triton_kernel.attention_forward(q, k, v, False, scale=0.3, config=dict(BLOCK_M=64, BLOCK_N=32))
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), scale=0.3)
    torch.testing.assert_close(got.float(), want, atol=2e-3, rtol=2e-3)
    print("ok")
    """
)


def test_kernel_in_triton_interpreter_matches_sdpa():
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
