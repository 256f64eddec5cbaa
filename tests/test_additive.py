"""Additive (Bahdanau) and multiplicative (Luong) scores and attention."""

from __future__ import annotations

import pytest
import torch

import qkv


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
