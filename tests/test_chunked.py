"""qkv.chunked_attention: exact, on every device and dtype, without the L x S matrix."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import qkv
from conftest import requires_cuda


@pytest.mark.parametrize("chunk", [1, 4, 5, 16, 100])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_sdpa_float32(chunk, causal, device):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 16, 8, generator=g).to(device) for _ in range(3))
    got = qkv.chunked_attention(q, k, v, is_causal=causal, chunk_size=chunk)
    torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v, is_causal=causal))


def test_large_logits_do_not_overflow():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 12, 4, generator=g) * 40 for _ in range(3))
    got = qkv.chunked_attention(q, k, v, chunk_size=3)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v))


def test_fully_masked_rows_are_zero():
    q, k, v = (torch.randn(1, 4, 4) for _ in range(3))
    mask = torch.ones(4, 4, dtype=torch.bool)
    mask[2] = False
    got = qkv.chunked_attention(q, k, v, attn_mask=mask, chunk_size=2)
    assert torch.all(got[:, 2] == 0)
    torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_bfloat16_keeps_dtype_and_accuracy():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 32, 16, generator=g).bfloat16() for _ in range(3))
    got = qkv.chunked_attention(q, k, v, chunk_size=8)
    assert got.dtype == torch.bfloat16
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    torch.testing.assert_close(got.float(), want, atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_sdpa_on_cuda(dtype, causal):
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(2, 4, 300, 64, device="cuda", dtype=dtype, generator=g) for _ in range(3))
    got = qkv.chunked_attention(q, k, v, is_causal=causal, chunk_size=128)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("kwargs", [
    {},
    {"is_causal": True},
    {"is_causal": True, "window": 3},
    {"attn_mask": "bool"},
    {"attn_mask": "float"},
])
def test_gradcheck(kwargs):
    # The running maximum is detached and the chunk's scores are overwritten in place; the
    # maximum cancels out of the output, so the gradients must still be exact.
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 7, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    if kwargs.get("attn_mask") == "bool":
        kwargs = {"attn_mask": torch.rand(7, 7, generator=g) > 0.3}
    elif kwargs.get("attn_mask") == "float":
        kwargs = {"attn_mask": torch.randn(7, 7, generator=g, dtype=torch.float64)}
    assert torch.autograd.gradcheck(
        lambda q, k, v: qkv.chunked_attention(q, k, v, chunk_size=3, **kwargs), (q, k, v)
    )
