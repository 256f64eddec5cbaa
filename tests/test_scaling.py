"""qkv.scaling: scaled_dot_product_attention and attention_scores against PyTorch, and Var(q·k)."""

from __future__ import annotations

import itertools
import math

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


@pytest.mark.parametrize("d_k", [1, 4, 64, 2048])
def test_dot_product_variance_is_d_k_within_sampling_error(d_k):
    n = 6000
    est = qkv.dot_product_variance(d_k, n, torch.Generator().manual_seed(d_k))
    # Var((q·k)^2) = 2 d_k^2 + 6 d_k, so the estimate's standard error is about
    # d_k * sqrt((2 + 6/d_k) / n); allow five of them.
    se = d_k * math.sqrt((2 + 6 / d_k) / n)
    assert abs(est - d_k) < 5 * se, (est, d_k, se)


def test_dot_product_variance_uses_the_generator():
    a = qkv.dot_product_variance(32, 500, torch.Generator().manual_seed(0))
    b = qkv.dot_product_variance(32, 500, torch.Generator().manual_seed(0))
    c = qkv.dot_product_variance(32, 500, torch.Generator().manual_seed(1))
    assert a == b and a != c


def test_dot_product_variance_draws_in_chunks_from_the_generator():
    # d_k = 2**12 gives chunks of 1024 samples: 2500 samples are three chunks,
    # each drawn as q then k from the one generator.
    d_k, n = 2**12, 2500
    g = torch.Generator().manual_seed(3)
    dots = []
    for rows in (1024, 1024, 452):
        q = torch.randn(rows, d_k, generator=g)
        k = torch.randn(rows, d_k, generator=g)
        dots.append((q * k).sum(-1))
    want = torch.cat(dots).var().item()
    assert qkv.dot_product_variance(d_k, n, torch.Generator().manual_seed(3)) == pytest.approx(want)


def test_dot_product_variance_float64():
    est = qkv.dot_product_variance(16, 4000, torch.Generator().manual_seed(0), dtype=torch.float64)
    assert abs(est - 16) < 5 * 16 * math.sqrt(2.4 / 4000)


@pytest.mark.parametrize(
    "args, err, words",
    [
        ((0, 10), ValueError, "d_k must be a positive int, got 0"),
        ((4.0, 10), ValueError, "d_k must be a positive int, got 4.0"),
        ((4, 1), ValueError, "n_samples must be an int >= 2"),
        ((4, True), ValueError, "n_samples"),
    ],
)
def test_dot_product_variance_bad_input(args, err, words):
    with pytest.raises(err, match=words):
        qkv.dot_product_variance(*args, torch.Generator())


def test_dot_product_variance_needs_a_generator():
    with pytest.raises(TypeError, match="generator must be a torch.Generator"):
        qkv.dot_product_variance(4, 10, 0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_dot_product_variance_on_a_cuda_generator():
    g = torch.Generator("cuda").manual_seed(0)
    est = qkv.dot_product_variance(64, 20000, g)
    assert abs(est - 64) < 5 * 64 * math.sqrt(2.1 / 20000)
