"""qkv.softmax and qkv.scaled_dot_product_attention against PyTorch."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

import qkv
from conftest import requires_cuda

SHAPES = {
    "3-D, L == S": ((2, 5, 8), (2, 5, 8), (2, 5, 8)),
    "3-D, L < S": ((2, 3, 8), (2, 7, 8), (2, 7, 6)),
    "4-D, L > S": ((2, 3, 9, 4), (2, 3, 4, 4), (2, 3, 4, 5)),
    "4-D, broadcast batch": ((2, 3, 6, 8), (1, 3, 5, 8), (1, 3, 5, 8)),
    "2-D, unbatched": ((5, 8), (7, 8), (7, 3)),
}


def inputs(shapes, dtype=torch.float64, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=dtype).to(device) for s in shapes]


def masks(L: int, S: int, dtype: torch.dtype, device: str):
    g = torch.Generator().manual_seed(1)
    yield "no mask", {}
    yield "bool mask", {"attn_mask": (torch.rand(L, S, generator=g) > 0.3).to(device)}
    yield "float mask", {"attn_mask": torch.randn(L, S, generator=g, dtype=dtype).to(device)}
    yield "broadcast bool mask (L, 1)", {"attn_mask": (torch.rand(L, 1, generator=g) > 0.2).to(device)}
    yield "broadcast key mask (1, S)", {"attn_mask": (torch.rand(1, S, generator=g) > 0.2).to(device)}
    yield "is_causal", {"is_causal": True}
    yield "custom scale", {"scale": 0.37}
    yield "scale with bool mask", {"scale": 2.0, "attn_mask": torch.ones(L, S, dtype=torch.bool).tril().to(device)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", list(SHAPES))
def test_sdpa_matches_torch(case, dtype, device):
    if device == "mps" and dtype == torch.float64:
        pytest.skip("MPS has no float64")
    q, k, v = inputs(SHAPES[case], dtype, device)
    L, S = q.shape[-2], k.shape[-2]
    for name, kw in masks(L, S, dtype, device):
        ours = qkv.scaled_dot_product_attention(q, k, v, **kw)
        theirs = F.scaled_dot_product_attention(q, k, v, **kw)
        torch.testing.assert_close(ours, theirs, msg=lambda m: f"{case}, {name}: {m}")


def test_weights_rows_sum_to_one_and_match_output():
    q, k, v = inputs(SHAPES["4-D, L > S"])
    out, w = qkv.scaled_dot_product_attention_with_weights(q, k, v)
    assert w.shape == (2, 3, 9, 4)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 9, dtype=w.dtype))
    torch.testing.assert_close(out, w @ v)


def test_fully_masked_row_gives_zeros_like_torch():
    q, k, v = inputs(SHAPES["3-D, L < S"])
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[1] = False
    out, w = qkv.scaled_dot_product_attention_with_weights(q, k, v, attn_mask=mask)
    assert torch.all(w[:, 1] == 0) and torch.all(out[:, 1] == 0)
    assert not torch.isnan(out).any()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_dropout_keeps_shape_and_zeroes_some_weights():
    q, k, v = inputs(SHAPES["3-D, L == S"])
    torch.manual_seed(0)
    out = qkv.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert out.shape == (2, 5, 8)
    assert not torch.allclose(out, qkv.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_softmax_matches_torch_any_dim(dim):
    (x,) = inputs([(3, 4, 5)])
    torch.testing.assert_close(qkv.softmax(x, dim=dim), torch.softmax(x, dim=dim))


def test_softmax_is_stable_on_large_logits():
    x = torch.tensor([[1000.0, 1001.0, 999.0], [-1000.0, -1001.0, -999.0]])
    y = qkv.softmax(x)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y, torch.softmax(x, dim=-1))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_softmax_half_precision_keeps_dtype(dtype):
    x = torch.randn(4, 6).to(dtype) * 50
    y = qkv.softmax(x)
    assert y.dtype == dtype
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), dim=-1), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_sdpa_matches_torch_on_cuda_half(dtype):
    tol = {"atol": 2e-3, "rtol": 2e-3} if dtype == torch.float16 else {"atol": 1.6e-2, "rtol": 1.6e-2}
    for case, shapes in SHAPES.items():
        q, k, v = inputs(shapes, torch.float32, "cuda")
        q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
        L, S = q.shape[-2], k.shape[-2]
        for name, kw in masks(L, S, dtype, "cuda"):
            ours = qkv.scaled_dot_product_attention(q, k, v, **kw)
            theirs = F.scaled_dot_product_attention(q, k, v, **kw)
            assert ours.dtype == dtype and ours.device.type == "cuda"
            torch.testing.assert_close(ours, theirs, **tol, msg=lambda m: f"{case}, {name}: {m}")


@pytest.mark.parametrize("L,S", list(itertools.product([1, 4, 7], [1, 5, 8])))
def test_causal_alignment_is_upper_left(L, S):
    q, k, v = inputs([(L, 4), (S, 4), (S, 4)])
    ours = qkv.scaled_dot_product_attention(q, k, v, is_causal=True)
    explicit = qkv.scaled_dot_product_attention(q, k, v, attn_mask=qkv.causal_mask(L, S))
    torch.testing.assert_close(ours, explicit)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_gradients_are_exact_with_masks():
    """The reference trains: its weights' in-place shortcut is only taken when no gradient is needed."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = torch.rand(5, 5, generator=g) > 0.3
    for kw in ({"is_causal": True}, {"attn_mask": mask}, {}):
        assert torch.autograd.gradcheck(lambda a, b, c: qkv.scaled_dot_product_attention(a, b, c, **kw), (q, k, v))
    with torch.no_grad():
        torch.testing.assert_close(
            qkv.scaled_dot_product_attention(q, k, v, attn_mask=mask),
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        )
