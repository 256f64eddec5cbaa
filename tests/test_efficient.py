"""chunked_attention, sliding_window_mask and kv_cache_step against the reference."""

import pytest
import torch

import qkv
from qkv import chunked_attention, kv_cache_step, sliding_window_mask

ref = qkv.scaled_dot_product_attention


def _qkv(B=2, H=3, L=37, S=37, E=8, Ev=5, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, L, E, generator=g, dtype=dtype)
    k = torch.randn(B, H, S, E, generator=g, dtype=dtype)
    v = torch.randn(B, H, S, Ev, generator=g, dtype=dtype)
    return q, k, v


@pytest.mark.parametrize("L,S", [(37, 37), (5, 41), (41, 5), (1, 1), (64, 64)])
@pytest.mark.parametrize("chunk_size", [1, 7, 16, 64, 512])
@pytest.mark.parametrize("is_causal", [False, True])
def test_chunked_matches_reference(L, S, chunk_size, is_causal):
    q, k, v = _qkv(L=L, S=S)
    got = chunked_attention(q, k, v, is_causal=is_causal, chunk_size=chunk_size)
    torch.testing.assert_close(got, ref(q, k, v, is_causal=is_causal))


def test_chunked_matches_torch_sdpa_float32():
    q, k, v = _qkv(L=300, S=300, E=64, Ev=64, dtype=torch.float32)
    for is_causal in (False, True):
        want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        got = chunked_attention(q, k, v, is_causal=is_causal, chunk_size=128)
        torch.testing.assert_close(got, want)


def test_chunked_with_masks_and_fully_masked_rows():
    q, k, v = _qkv(L=20, S=23)
    mask = torch.rand(2, 1, 20, 23, generator=torch.Generator().manual_seed(1)) > 0.5
    mask[:, :, 3] = False  # a query that may attend to nothing: zero output, as the reference
    got = chunked_attention(q, k, v, attn_mask=mask, chunk_size=6)
    torch.testing.assert_close(got, ref(q, k, v, attn_mask=mask))
    assert torch.all(got[:, :, 3] == 0)
    additive = qkv.to_additive_mask(mask, dtype=q.dtype)
    torch.testing.assert_close(chunked_attention(q, k, v, attn_mask=additive, chunk_size=6), got)


def test_chunked_large_scores_do_not_overflow():
    # Scores of order 1e4 would overflow exp() without the running maximum.
    q, k, v = _qkv(L=16, S=16, E=4, dtype=torch.float32)
    got = chunked_attention(q * 100, k * 100, v, chunk_size=4)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, ref(q * 100, k * 100, v))


def test_chunked_half_precision_accumulates_in_float32():
    q, k, v = _qkv(L=50, S=50, E=16, Ev=16, dtype=torch.float32)
    got = chunked_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), chunk_size=8)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), ref(q, k, v), atol=2e-2, rtol=2e-2)


def test_chunked_gradients_match_reference():
    q, k, v = (t.requires_grad_() for t in _qkv(L=12, S=12))
    chunked_attention(q, k, v, is_causal=True, chunk_size=5).sum().backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    ref(q, k, v, is_causal=True).sum().backward()
    for got, t in zip(grads, (q, k, v)):
        torch.testing.assert_close(got, t.grad)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, None])
def test_chunk_size_validated(bad):
    q, k, v = _qkv(L=4, S=4)
    with pytest.raises(ValueError, match="chunk_size"):
        chunked_attention(q, k, v, chunk_size=bad)


def test_sliding_window_mask_values():
    m = sliding_window_mask(5, None, 2)
    want = torch.tensor(
        [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]],
        dtype=torch.bool,
    )
    assert torch.equal(m, want)
    # A window as long as the sequence is the causal mask; rows never see more than window keys.
    assert torch.equal(sliding_window_mask(6, 9, 9), qkv.causal_mask(6, 9))
    assert sliding_window_mask(30, 30, 4).sum(-1).max() == 4


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_sliding_window_mask_validates_window(bad):
    with pytest.raises(ValueError, match="window"):
        sliding_window_mask(4, 4, bad)


@pytest.mark.parametrize("L,S", [(40, 40), (13, 40), (40, 13)])
@pytest.mark.parametrize("window", [1, 3, 8, 50])
@pytest.mark.parametrize("chunk_size", [4, 7, 64])
def test_chunked_window_matches_masked_reference(L, S, window, chunk_size):
    q, k, v = _qkv(L=L, S=S)
    got = chunked_attention(q, k, v, is_causal=True, window=window, chunk_size=chunk_size)
    torch.testing.assert_close(got, ref(q, k, v, attn_mask=sliding_window_mask(L, S, window)))


def test_window_needs_causal_and_valid_value():
    q, k, v = _qkv(L=4, S=4)
    with pytest.raises(ValueError, match="is_causal=True"):
        chunked_attention(q, k, v, window=2)
    with pytest.raises(ValueError, match="window"):
        chunked_attention(q, k, v, is_causal=True, window=0)


def test_kv_cache_decoding_equals_full_causal_attention():
    q, k, v = _qkv(L=10, S=10)
    want = ref(q, k, v, is_causal=True)
    k_cache = v_cache = None
    outs = []
    for t in range(10):
        out, k_cache, v_cache = kv_cache_step(
            q[..., t : t + 1, :], k[..., t : t + 1, :], v[..., t : t + 1, :], k_cache, v_cache
        )
        outs.append(out)
    torch.testing.assert_close(torch.cat(outs, dim=-2), want)
    assert torch.equal(k_cache, k) and torch.equal(v_cache, v)


def test_kv_cache_several_new_tokens_use_bottom_right_alignment():
    q, k, v = _qkv(L=9, S=9)
    want = ref(q, k, v, is_causal=True)
    # Prefill 6 tokens, then append 3 at once: the 3 queries must see the whole prefix.
    out1, kc, vc = kv_cache_step(q[..., :6, :], k[..., :6, :], v[..., :6, :])
    out2, kc, vc = kv_cache_step(q[..., 6:, :], k[..., 6:, :], v[..., 6:, :], kc, vc)
    torch.testing.assert_close(torch.cat([out1, out2], dim=-2), want)
    # SDPA's upper-left is_causal would give something else for L < S.
    wrong = ref(q[..., 6:, :], kc, vc, is_causal=True)
    assert not torch.allclose(wrong, out2)


def test_kv_cache_validates():
    q, k, v = _qkv(L=1, S=1)
    with pytest.raises(ValueError, match="both"):
        kv_cache_step(q, k, v, k_cache=k)
    with pytest.raises(ValueError, match="k_cache"):
        kv_cache_step(q, k, v, k_cache=k[..., :2], v_cache=v)
    with pytest.raises(ValueError, match="same new tokens"):
        kv_cache_step(q, torch.cat([k, k], dim=-2), v)


def test_triton_attention_without_cuda_says_so():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the GPU tests cover it")
    q, k, v = _qkv(L=4, S=4, dtype=torch.float16)
    with pytest.raises(ValueError, match="CUDA"):
        qkv.triton_attention(q, k, v)
