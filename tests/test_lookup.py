"""Hard and soft lookup: limits in the temperature, agreement with SDPA, gradients, errors."""

import math

import pytest
import torch

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
