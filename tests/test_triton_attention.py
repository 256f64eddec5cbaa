"""The Triton kernel against torch's SDPA (needs a CUDA GPU and triton; skipped otherwise)."""

import importlib.util

import pytest
import torch
import torch.nn.functional as F

import qkv

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton"),
]


def _inputs(B, H, L, S, E, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return tuple(
        torch.randn(B, H, n, E, generator=g, device="cuda", dtype=dtype) for n in (L, S, S)
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("E", [64, 128])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("L,S", [(256, 256), (1000, 1000), (77, 77), (64, 300), (300, 64), (1, 129)])
def test_matches_sdpa(dtype, E, is_causal, L, S):
    q, k, v = _inputs(2, 3, L, S, E, dtype)
    got = qkv.triton_attention(q, k, v, is_causal=is_causal)
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=is_causal)
    assert got.dtype == dtype and got.shape == want.shape
    tol = 2e-2 if dtype == torch.bfloat16 else 2e-3
    torch.testing.assert_close(got.float(), want, atol=tol, rtol=tol)


def test_scale_and_non_contiguous_inputs():
    # (B, L, H, E) transposed to (B, H, L, E): strides are not the contiguous ones.
    q, k, v = (t.transpose(1, 2) for t in _inputs(2, 128, 4, 4, 64, torch.float16))
    assert not q.is_contiguous()
    got = qkv.triton_attention(q, k, v, scale=0.3)
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), scale=0.3)
    torch.testing.assert_close(got.float(), want, atol=2e-3, rtol=2e-3)


def test_agrees_with_chunked_attention():
    q, k, v = _inputs(1, 2, 513, 513, 64, torch.float16)
    torch.testing.assert_close(
        qkv.triton_attention(q, k, v, is_causal=True).float(),
        qkv.chunked_attention(q, k, v, is_causal=True).float(),
        atol=2e-3, rtol=2e-3,
    )


def test_rejects_unsupported_inputs():
    q, k, v = _inputs(1, 1, 16, 16, 64, torch.float16)
    with pytest.raises(TypeError, match="float16"):
        qkv.triton_attention(q.float(), k.float(), v.float())
    q48, k48, v48 = _inputs(1, 1, 16, 16, 48, torch.float16)
    with pytest.raises(ValueError, match="E="):
        qkv.triton_attention(q48, k48, v48)


def _rel(a, b):
    # Relative error of the whole tensor; + 1e-2 for a gradient that is exactly 0 in the
    # reference (one query that sees one key: its weight is 1 whatever q is).
    return ((a.float() - b.float()).norm() / (b.float().norm() + 1e-2)).item()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("E", [64, 128])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("L,S", [(256, 256), (1000, 1000), (77, 300), (300, 77), (1, 129)])
def test_gradients_match_autograd_of_the_reference(dtype, E, is_causal, L, S):
    # The Triton backward kernels (recomputing the weights from the saved lse) against
    # autograd through qkv's reference, in float32 on the same (rounded) inputs.
    q, k, v = (t.requires_grad_() for t in _inputs(2, 3, L, S, E, dtype, seed=1))
    out = qkv.triton_attention(q, k, v, is_causal=is_causal)
    g = torch.randn(out.shape, generator=torch.Generator(device="cuda").manual_seed(2), device="cuda", dtype=dtype)
    got = torch.autograd.grad(out, (q, k, v), g)
    q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
    ref = qkv.scaled_dot_product_attention(q32, k32, v32, is_causal=is_causal)
    want = torch.autograd.grad(ref, (q32, k32, v32), g.float())
    tol = 2e-2 if dtype == torch.bfloat16 else 4e-3  # relative error of the whole tensor
    assert _rel(out, ref) < tol
    for name, a, b in zip(("dq", "dk", "dv"), got, want):
        assert a.dtype == dtype and a.shape == b.shape, name
        assert torch.isfinite(a).all(), name
        assert _rel(a, b) < tol, (name, _rel(a, b))


def test_no_autograd_graph_without_requires_grad_and_gradients_for_strided_inputs():
    q, k, v = _inputs(1, 2, 200, 200, 64, torch.float16)
    assert not qkv.triton_attention(q, k, v).requires_grad
    # (B, L, H, E) seen as (B, H, L, E): the backward works on contiguous copies.
    q, k, v = (t.transpose(1, 2).requires_grad_() for t in _inputs(2, 128, 4, 4, 64, torch.float16))
    out = qkv.triton_attention(q, k, v, is_causal=True, scale=0.2)
    out.float().square().sum().backward()
    q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
    qkv.scaled_dot_product_attention(q32, k32, v32, is_causal=True, scale=0.2).square().sum().backward()
    for a, b in ((q.grad, q32.grad), (k.grad, k32.grad), (v.grad, v32.grad)):
        assert a.shape == b.shape and _rel(a, b) < 4e-3
