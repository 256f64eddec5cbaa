"""Tests of qkv.qkv: self/cross attention from raw matrices."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

from qkv import cross_attention, self_attention


def _weights(D, E, Ev=None, Dc=None, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    Dc = D if Dc is None else Dc
    Ev = E if Ev is None else Ev
    return (  # nn.Linear's layout, (out_features, in_features)
        torch.randn(E, D, generator=g, dtype=dtype) / math.sqrt(D),
        torch.randn(E, Dc, generator=g, dtype=dtype) / math.sqrt(Dc),
        torch.randn(Ev, Dc, generator=g, dtype=dtype) / math.sqrt(Dc),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_self_attention_matches_torch_sdpa(dtype):
    x = torch.randn(2, 5, 12, generator=torch.Generator().manual_seed(1), dtype=dtype)
    W_q, W_k, W_v = _weights(12, 8, Ev=6, dtype=dtype)
    want = F.scaled_dot_product_attention(F.linear(x, W_q), F.linear(x, W_k), F.linear(x, W_v))
    got = self_attention(x, W_q, W_k, W_v)
    assert got.shape == (2, 5, 6) and got.dtype == dtype
    assert_close(got, want)


def test_self_attention_matches_single_head_multihead_attention():
    torch.manual_seed(0)
    D = 16
    mha = nn.MultiheadAttention(D, 1, bias=False, batch_first=True)
    with torch.no_grad():
        mha.out_proj.weight.copy_(torch.eye(D))
    x = torch.randn(3, 7, D)
    want, _ = mha(x, x, x, need_weights=False)
    # nn.Linear's layout, (out, in), is qkv's: the weights go in as they are.
    W_q, W_k, W_v = mha.in_proj_weight.detach().chunk(3)
    assert_close(self_attention(x, W_q, W_k, W_v), want)


def test_unbatched_equals_each_row_of_batched():
    x = torch.randn(4, 6, 10, generator=torch.Generator().manual_seed(2))
    W = _weights(10, 8)
    batched = self_attention(x, *W)
    for b in range(4):
        assert_close(self_attention(x[b], *W), batched[b])


def test_extra_leading_dims_are_batch_dims():
    x = torch.randn(2, 3, 6, 10, generator=torch.Generator().manual_seed(3))
    W = _weights(10, 8)
    assert_close(self_attention(x, *W), self_attention(x.reshape(6, 6, 10), *W).reshape(2, 3, 6, 8))


def test_self_attention_is_cross_attention_with_itself():
    x = torch.randn(2, 5, 10, generator=torch.Generator().manual_seed(4))
    W = _weights(10, 4)
    assert_close(self_attention(x, *W), cross_attention(x, x, *W))


def test_cross_attention_shapes_and_formula():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 10, generator=g)
    ctx = torch.randn(2, 7, 14, generator=g)
    W_q, W_k, W_v = _weights(10, 8, Ev=5, Dc=14)
    got = cross_attention(x, ctx, W_q, W_k, W_v)
    assert got.shape == (2, 3, 5)
    weights = torch.softmax((x @ W_q.T) @ (ctx @ W_k.T).transpose(-2, -1) / math.sqrt(8), dim=-1)
    assert_close(got, weights @ (ctx @ W_v.T))


def test_cross_attention_broadcasts_one_context_over_a_batch():
    g = torch.Generator().manual_seed(6)
    x = torch.randn(4, 3, 10, generator=g)
    ctx = torch.randn(7, 14, generator=g)
    W = _weights(10, 8, Dc=14)
    got = cross_attention(x, ctx, *W)
    for b in range(4):
        assert_close(got[b], cross_attention(x[b], ctx, *W))


def test_self_attention_is_permutation_equivariant():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(9, 10, generator=g, dtype=torch.float64)
    W = _weights(10, 8, dtype=torch.float64)
    perm = torch.randperm(9, generator=g)
    assert_close(self_attention(x[perm], *W), self_attention(x, *W)[perm])


def test_cross_attention_ignores_the_order_of_the_context():
    g = torch.Generator().manual_seed(8)
    x, ctx = torch.randn(3, 10, generator=g, dtype=torch.float64), torch.randn(
        6, 10, generator=g, dtype=torch.float64
    )
    W = _weights(10, 8, dtype=torch.float64)
    perm = torch.randperm(6, generator=g)
    assert_close(cross_attention(x, ctx[perm], *W), cross_attention(x, ctx, *W))


def test_gradients_reach_every_weight():
    x = torch.randn(2, 5, 10, generator=torch.Generator().manual_seed(9))
    W = [w.requires_grad_() for w in _weights(10, 8)]
    self_attention(x, *W).square().sum().backward()
    assert all(w.grad is not None and w.grad.abs().sum() > 0 for w in W)


@pytest.mark.parametrize(
    "args, err, words",
    [
        (dict(x=torch.randn(5)), ValueError, "x must have shape"),
        (dict(x=torch.ones(5, 10, dtype=torch.long)), TypeError, "x must have a floating"),
        (dict(W_q=torch.randn(10, 8)), ValueError, "W_q must have 10 columns"),
        (dict(W_k=torch.randn(8, 10, 1)), ValueError, "W_k must be a 2-D matrix"),
        (dict(W_k=torch.randn(4, 10)), ValueError, "W_q has 8 rows but W_k has 4"),
        (dict(W_v=torch.randn(8, 10, dtype=torch.float64)), TypeError, "W_v is torch.float64"),
        (dict(W_q=[[1.0]]), TypeError, "W_q must be a torch.Tensor"),
    ],
)
def test_bad_input_names_the_argument(args, err, words):
    kw = dict(x=torch.randn(5, 10), W_q=torch.randn(8, 10), W_k=torch.randn(8, 10))
    kw["W_v"] = torch.randn(8, 10)
    kw.update(args)
    with pytest.raises(err, match=words):
        self_attention(**kw)


def test_cross_attention_rejects_mismatched_context():
    W = _weights(10, 8)
    with pytest.raises(ValueError, match="W_k must have 12 columns"):
        cross_attention(torch.randn(3, 10), torch.randn(4, 12), *W)
    with pytest.raises(TypeError, match="context is torch.float64"):
        cross_attention(torch.randn(3, 10), torch.randn(4, 10, dtype=torch.float64), *W)
    with pytest.raises(ValueError, match="batch dimensions"):
        cross_attention(torch.randn(2, 3, 10), torch.randn(3, 4, 10), *W)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_inputs():
    x = torch.randn(2, 5, 10, device="cuda")
    W = [w.cuda() for w in _weights(10, 8)]
    got = self_attention(x, *W)
    assert got.device.type == "cuda"
    assert_close(got.cpu(), self_attention(x.cpu(), *(w.cpu() for w in W)))
