"""qkv.lookup: the softmax, hard and soft lookup (limits in the temperature, agreement with SDPA,
gradients, errors), and the additive (Bahdanau) and multiplicative (Luong) scores."""

import math

import pytest
import torch

import qkv
from qkv import scaled_dot_product_attention
from qkv.lookup import hard_lookup, soft_lookup


def _data(seed=0, B=2, L=3, S=5, E=4, Ev=6, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    make = lambda *shape: torch.randn(*shape, generator=g, dtype=dtype)  # noqa: E731
    return make(B, L, E), make(B, S, E), make(B, S, Ev)


def test_hard_lookup_is_a_dictionary_when_the_query_is_a_key():
    keys = torch.eye(4, dtype=torch.float64)  # orthonormal keys: a query equal to key j scores 1 only there
    values = torch.arange(12, dtype=torch.float64).reshape(4, 3)
    for j in range(4):
        out, w = hard_lookup(keys[j : j + 1], keys, values)
        torch.testing.assert_close(out[0], values[j])
        assert w[0].tolist() == [1.0 if i == j else 0.0 for i in range(4)]


def test_hard_lookup_picks_the_argmax_value():
    q, k, val = _data()
    out, w = hard_lookup(q, k, val)
    best = (q @ k.transpose(-2, -1)).argmax(-1)
    torch.testing.assert_close(out, torch.stack([val[b, best[b]] for b in range(q.shape[0])]))
    assert torch.all(w.sum(-1) == 1) and torch.all((w == 0) | (w == 1))


def test_soft_lookup_rows_sum_to_one_and_output_is_weighted_mean():
    q, k, val = _data(1)
    out, w = soft_lookup(q, k, val, temperature=0.7)
    torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)))
    assert torch.all(w > 0)
    torch.testing.assert_close(out, torch.einsum("bls,bsv->blv", w, val))


def test_soft_lookup_with_temperature_sqrt_e_is_sdpa():
    q, k, val = _data(2, E=8)
    out, _ = soft_lookup(q, k, val, temperature=math.sqrt(8))
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, val))
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, val))


def test_temperature_limits():
    q, k, val = _data(3)
    cold, _ = soft_lookup(q, k, val, temperature=1e-4)
    hard, _ = hard_lookup(q, k, val)
    torch.testing.assert_close(cold, hard)
    hot, w = soft_lookup(q, k, val, temperature=1e6)
    torch.testing.assert_close(hot, val.mean(-2, keepdim=True).expand_as(hot), atol=1e-4, rtol=0)
    # Lower temperature, sharper weights: the largest weight grows monotonically.
    peaks = [soft_lookup(q, k, val, temperature=t)[1].amax(-1) for t in (4.0, 1.0, 0.25)]
    assert torch.all(peaks[0] < peaks[1]) and torch.all(peaks[1] < peaks[2])


def test_gradients_flow_through_soft_but_not_hard_lookup():
    q, k, val = _data(4)
    q.requires_grad_(True)
    k.requires_grad_(True)
    soft_lookup(q, k, val)[0].sum().backward()
    assert q.grad.abs().sum() > 0 and k.grad.abs().sum() > 0
    q.grad = None
    k.grad = None
    out, _ = hard_lookup(q, k, val)
    assert not out.requires_grad  # argmax cuts the graph to query and keys


def test_keeps_dtype_and_batch_shapes():
    q, k, val = _data(5, dtype=torch.float32)
    for fn in (hard_lookup, soft_lookup):
        out, w = fn(q, k, val)
        assert out.dtype == torch.float32 and w.dtype == torch.float32
        assert out.shape == (2, 3, 6) and w.shape == (2, 3, 5)
    # A single query broadcast against a batch of tables.
    out, w = soft_lookup(q[:1], k, val)
    assert out.shape == (2, 3, 6)


@pytest.mark.parametrize("temperature", [0, -1.0, float("nan"), "1", True])
def test_bad_temperature(temperature):
    q, k, val = _data()
    with pytest.raises(ValueError, match="temperature"):
        soft_lookup(q, k, val, temperature=temperature)


def test_bad_shapes_and_types():
    q, k, val = _data()
    with pytest.raises(ValueError, match="width E"):
        soft_lookup(q[..., :3], k, val)
    with pytest.raises(ValueError, match="entries S"):
        hard_lookup(q, k, val[:, :4])
    with pytest.raises(TypeError, match="values"):
        soft_lookup(q, k, [[1.0]])
    with pytest.raises(TypeError, match="dtype"):
        soft_lookup(q, k.float(), val)
    with pytest.raises(TypeError, match="floating-point"):
        hard_lookup(q.long(), k, val)


@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_softmax_matches_torch_any_dim(dim):
    x = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
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


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_additive_score_equals_the_formula_pair_by_pair():
    q, k = rand(2, 3, 4), rand(2, 5, 6, seed=1)
    W_q, W_k, v_a = rand(7, 4, seed=2), rand(7, 6, seed=3), rand(7, seed=4)
    s = qkv.additive_score(q, k, W_q, W_k, v_a)
    assert s.shape == (2, 3, 5)
    for b, i, j in [(0, 0, 0), (1, 2, 4), (0, 1, 3)]:
        expect = v_a @ torch.tanh(W_q @ q[b, i] + W_k @ k[b, j])
        torch.testing.assert_close(s[b, i, j], expect)


def test_luong_dot_and_general():
    q, k = rand(3, 4), rand(5, 4, seed=1)
    torch.testing.assert_close(qkv.luong_score(q, k), q @ k.T)
    W = rand(4, 4, seed=2)
    torch.testing.assert_close(qkv.luong_score(q, k, W)[1, 2], q[1] @ W @ k[2])


def test_modules_return_context_and_weights_with_mask():
    torch.manual_seed(0)
    q, k, v = rand(2, 3, 4).float(), rand(2, 5, 6, seed=1).float(), rand(2, 5, 2, seed=2).float()
    keep = qkv.padding_mask([5, 2])[:, None, :]
    for module in (qkv.AdditiveAttention(4, 6, 8), qkv.LuongAttention(4, 6, method="general")):
        ctx, w = module(q, k, v, attn_mask=keep)
        assert ctx.shape == (2, 3, 2) and w.shape == (2, 3, 5)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 3))
        assert torch.all(w[1, :, 2:] == 0)
        torch.testing.assert_close(ctx, w @ v)


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: qkv.luong_score(rand(3, 4), rand(5, 6)), ["same width", "(3, 4)", "(5, 6)", "W"]),
        (lambda: qkv.luong_score(rand(3, 4), rand(5, 6), rand(6, 4)), ["W", "(4, 6)", "(6, 4)"]),
        (lambda: qkv.additive_score(rand(3, 4), rand(5, 6), rand(7, 5), rand(7, 6), rand(7)), ["W_q", "(7, 5)"]),
        (lambda: qkv.LuongAttention(4, 6, method="dot"), ["query_dim == key_dim"]),
        (lambda: qkv.LuongAttention(4, method="concat"), ["'dot' or 'general'", "concat"]),
    ],
)
def test_errors(call, words):
    with pytest.raises((ValueError, TypeError)) as e:
        call()
    for w in words:
        assert w in str(e.value), (w, str(e.value))
