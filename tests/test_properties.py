"""Properties of attention that hold for every input (hypothesis draws the sizes and data)."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

SETTINGS = settings(max_examples=40, deadline=None)
sizes = st.integers(min_value=1, max_value=9)


def rand(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@SETTINGS
@given(B=st.integers(1, 3), L=sizes, S=sizes, E=sizes, seed=st.integers(0, 2**16), causal=st.booleans())
def test_rows_of_weights_sum_to_one(B, L, S, E, seed, causal):
    q, k, v = rand(seed, B, L, E), rand(seed + 1, B, S, E), rand(seed + 2, B, S, E)
    _, w = qkv.scaled_dot_product_attention_with_weights(q, k, v, is_causal=causal)
    assert (w >= 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(B, L, dtype=w.dtype))


@SETTINGS
@given(L=sizes, E=sizes, seed=st.integers(0, 2**16))
def test_permuting_the_inputs_permutes_the_outputs(L, E, seed):
    x = rand(seed, 2, L, E)
    perm = torch.randperm(L, generator=torch.Generator().manual_seed(seed))
    out = qkv.scaled_dot_product_attention(x, x, x)
    out_perm = qkv.scaled_dot_product_attention(x[:, perm], x[:, perm], x[:, perm])
    torch.testing.assert_close(out_perm, out[:, perm])


@SETTINGS
@given(L=st.integers(2, 9), E=sizes, seed=st.integers(0, 2**16), data=st.data())
def test_causal_outputs_ignore_the_future(L, E, seed, data):
    t = data.draw(st.integers(0, L - 2), label="last unchanged position")
    x = rand(seed, 2, L, E)
    changed = x.clone()
    changed[:, t + 1 :] = rand(seed + 7, 2, L - t - 1, E) * 10
    a = qkv.scaled_dot_product_attention(x, x, x, is_causal=True)
    b = qkv.scaled_dot_product_attention(changed, changed, changed, is_causal=True)
    torch.testing.assert_close(a[:, : t + 1], b[:, : t + 1])
    m = qkv.MultiHeadAttention(6, 2).double()
    y = rand(seed, 1, L, 6)
    y2 = y.clone()
    y2[:, t + 1 :] += 5
    torch.testing.assert_close(m(y, is_causal=True)[0][:, : t + 1], m(y2, is_causal=True)[0][:, : t + 1])


@SETTINGS
@given(L=sizes, S=st.integers(2, 9), E=sizes, seed=st.integers(0, 2**16), data=st.data())
def test_padded_keys_change_nothing(L, S, E, seed, data):
    length = data.draw(st.integers(1, S - 1), label="true length")
    q, k, v = rand(seed, 1, L, E), rand(seed + 1, 1, S, E), rand(seed + 2, 1, S, E)
    keep = qkv.padding_mask([length], S)[:, None, :]
    k2, v2 = k.clone(), v.clone()
    k2[:, length:], v2[:, length:] = 1e3, -1e3
    a = qkv.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    torch.testing.assert_close(a, qkv.scaled_dot_product_attention(q, k2, v2, attn_mask=keep))
    torch.testing.assert_close(a, qkv.scaled_dot_product_attention(q, k[:, :length], v[:, :length]))


@SETTINGS
@given(
    L=st.integers(1, 20),
    S=st.integers(1, 20),
    chunk=st.integers(1, 25),
    seed=st.integers(0, 2**16),
    mode=st.sampled_from(["none", "causal", "bool", "float"]),
)
def test_chunked_equals_reference(L, S, chunk, seed, mode):
    """Chunk sizes that divide the length, that do not, and that exceed it."""
    q, k, v = rand(seed, 2, 2, L, 4), rand(seed + 1, 2, 2, S, 4), rand(seed + 2, 2, 2, S, 3)
    kw = {}
    if mode == "causal":
        kw["is_causal"] = True
    elif mode == "bool":
        kw["attn_mask"] = rand(seed + 3, L, S) > 0  # may leave rows fully masked
    elif mode == "float":
        kw["attn_mask"] = rand(seed + 3, 2, 1, L, S)
    want = qkv.scaled_dot_product_attention(q, k, v, **kw)
    torch.testing.assert_close(qkv.chunked_attention(q, k, v, chunk_size=chunk, **kw), want)
