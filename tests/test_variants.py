"""Chapter 9's reference: grouped-query attention, aligned and local-global masks, linear
attention, FlexAttention's mask and score functions, path lengths; against PyTorch or the
published definitions."""

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

import qkv
from qkv import paths

flex = pytest.importorskip("torch.nn.attention.flex_attention")


def _rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ----------------------------------------------------------------------------- GQA
@pytest.mark.parametrize("Hq,Hkv", [(8, 2), (6, 3), (4, 1), (3, 3)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_gqa_matches_sdpa_enable_gqa(Hq, Hkv, is_causal):
    q, k, v = _rand(2, Hq, 5, 4, seed=1), _rand(2, Hkv, 7, 4, seed=2), _rand(2, Hkv, 7, 3, seed=3)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, enable_gqa=True)
    torch.testing.assert_close(qkv.grouped_query_attention(q, k, v, is_causal=is_causal), want)


@pytest.mark.parametrize("mask_shape", [(5, 7), (2, 1, 5, 7), (2, 8, 5, 7), (8, 5, 7)])
def test_gqa_masks_broadcast_as_sdpa_does(mask_shape):
    q, k, v = _rand(2, 8, 5, 4, seed=1), _rand(2, 2, 7, 4, seed=2), _rand(2, 2, 7, 3, seed=3)
    mask = torch.rand(mask_shape, generator=torch.Generator().manual_seed(4)) > 0.3
    mask[..., 0] = True  # every query sees something
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True, scale=0.3)
    torch.testing.assert_close(qkv.grouped_query_attention(q, k, v, attn_mask=mask, scale=0.3), want)


def test_gqa_is_multi_head_attention_on_repeated_kv_heads():
    q, k, v = _rand(1, 6, 4, 8, seed=1), _rand(1, 2, 9, 8, seed=2), _rand(1, 2, 9, 8, seed=3)
    want = qkv.scaled_dot_product_attention(q, qkv.repeat_kv(k, 3), qkv.repeat_kv(v, 3))
    torch.testing.assert_close(qkv.grouped_query_attention(q, k, v), want)
    # Query head h reads key/value head h // 3 and no other.
    for h in range(6):
        one = qkv.scaled_dot_product_attention(q[:, h], k[:, h // 3], v[:, h // 3])
        torch.testing.assert_close(qkv.grouped_query_attention(q, k, v)[:, h], one)


def test_repeat_kv_is_llamas_expand_and_reshape():
    x = _rand(2, 3, 5, 4)
    B, H, S, E = x.shape
    llama = x[:, :, None].expand(B, H, 2, S, E).reshape(B, H * 2, S, E)
    assert torch.equal(qkv.repeat_kv(x, 2), llama)
    assert not torch.equal(qkv.repeat_kv(x, 2), x.repeat(1, 2, 1, 1))


def test_gqa_refuses_heads_that_do_not_divide():
    q, k = _rand(1, 6, 3, 4), _rand(1, 4, 3, 4)
    with pytest.raises(ValueError, match="multiple of the key/value heads"):
        qkv.grouped_query_attention(q, k, k)
    with pytest.raises(ValueError, match="same number of heads"):
        qkv.grouped_query_attention(q, _rand(1, 2, 3, 4), k)


def test_gqa_keeps_dtype_and_half_precision():
    q, k, v = (_rand(1, 4, 5, 8, seed=s, dtype=torch.float32) for s in (1, 2, 3))
    k, v = k[:, :2], v[:, :2]
    got = qkv.grouped_query_attention(q.half(), k.half(), v.half(), is_causal=True)
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float(), qkv.grouped_query_attention(q, k, v, is_causal=True),
                               atol=1e-2, rtol=1e-2)


# ----------------------------------------------------------------------------- masks
@pytest.mark.parametrize("L,S", [(3, 5), (1, 6), (4, 4), (5, 3), (0, 2)])
def test_bottom_right_matches_torch_causal_lower_right(L, S):
    from torch.nn.attention.bias import causal_lower_right

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that L > S leaves rows with nothing
        want = causal_lower_right(L, S)._materialize()
    assert torch.equal(qkv.causal_mask_bottom_right(L, S), want)


def test_bottom_right_equals_top_left_when_square():
    for n in (1, 4, 9):
        assert torch.equal(qkv.causal_mask_bottom_right(n), qkv.causal_mask(n))
        assert torch.equal(qkv.causal_mask_bottom_right(n, n), qkv.causal_mask(n, n))
    assert not torch.equal(qkv.causal_mask_bottom_right(3, 5), qkv.causal_mask(3, 5))


def test_bottom_right_is_what_the_kv_cache_uses():
    q, k, v = _rand(1, 2, 3, 4, seed=1), _rand(1, 2, 3, 4, seed=2), _rand(1, 2, 3, 4, seed=3)
    kc, vc = _rand(1, 2, 5, 4, seed=4), _rand(1, 2, 5, 4, seed=5)
    out, k_all, v_all = qkv.kv_cache_step(q, k, v, kc, vc)
    want = qkv.scaled_dot_product_attention(q, k_all, v_all,
                                            attn_mask=qkv.causal_mask_bottom_right(3, 8))
    torch.testing.assert_close(out, want)


def test_local_global_mask_by_its_definition():
    n, w, g = 12, 5, [0, 7]
    m = qkv.local_global_mask(n, w, g)
    for i in range(n):
        for j in range(n):
            assert m[i, j] == (abs(i - j) <= w // 2 or i in g or j in g), (i, j)
    assert torch.equal(m, m.T)
    causal = qkv.local_global_mask(n, w, g, is_causal=True)
    for i in range(n):
        for j in range(n):
            assert causal[i, j] == (j <= i and (i - j < w or i in g or j in g)), (i, j)


def test_local_global_without_global_tokens_is_the_sliding_window():
    assert torch.equal(qkv.local_global_mask(10, 4, is_causal=True), qkv.sliding_window_mask(10, 10, 4))
    with pytest.raises(ValueError, match="global_tokens must lie"):
        qkv.local_global_mask(5, 3, [5])


# ----------------------------------------------------------------------------- linear attention
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("chunk_size", [1, 7, 64])
def test_linear_attention_equals_its_quadratic_form(is_causal, chunk_size):
    q, k, v = _rand(2, 3, 50, 8, seed=1), _rand(2, 3, 50, 8, seed=2), _rand(2, 3, 50, 5, seed=3)
    got = qkv.linear_attention(q, k, v, is_causal=is_causal, chunk_size=chunk_size)
    weights = qkv.linear_attention_weights(q, k, is_causal=is_causal)
    torch.testing.assert_close(got, weights @ v)


def test_linear_attention_is_katharopoulos_equation():
    # Equation (4)-(5) of the paper, one query at a time, eps=0.
    q, k, v = _rand(6, 4, seed=1), _rand(6, 4, seed=2), _rand(6, 3, seed=3)
    phi = lambda x: torch.where(x > 0, x + 1, torch.exp(x))  # noqa: E731  elu(x) + 1
    for causal in (False, True):
        rows = []
        for i in range(6):
            keys = range(i + 1) if causal else range(6)
            num = sum((phi(q[i]) @ phi(k[j])) * v[j] for j in keys)
            den = sum(phi(q[i]) @ phi(k[j]) for j in keys)
            rows.append(num / den)
        want = torch.stack(rows)
        torch.testing.assert_close(qkv.linear_attention(q, k, v, is_causal=causal, eps=0.0), want)


def test_causal_linear_attention_ignores_the_future():
    q, k, v = _rand(1, 20, 4, seed=1), _rand(1, 20, 4, seed=2), _rand(1, 20, 4, seed=3)
    k2, v2 = k.clone(), v.clone()
    k2[:, 12:], v2[:, 12:] = _rand(1, 8, 4, seed=4), _rand(1, 8, 4, seed=5)
    a = qkv.linear_attention(q, k, v, is_causal=True, chunk_size=5)
    b = qkv.linear_attention(q, k2, v2, is_causal=True, chunk_size=5)
    torch.testing.assert_close(a[:, :12], b[:, :12])
    assert not torch.allclose(a[:, 12:], b[:, 12:])


def test_linear_weights_are_positive_and_rows_sum_to_one():
    w = qkv.linear_attention_weights(_rand(3, 7, 4, seed=1), _rand(3, 9, 4, seed=2), eps=0.0)
    assert (w > 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 7, dtype=w.dtype))
    with pytest.raises(ValueError, match="L == S"):
        qkv.linear_attention(_rand(3, 4), _rand(5, 4), _rand(5, 4), is_causal=True)


# ----------------------------------------------------------------------------- FlexAttention
@pytest.fixture(autouse=False)
def eager_flex():
    with warnings.catch_warnings():
        # Eager flex_attention warns that it is unfused (it materialises the scores): expected here.
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        yield flex.flex_attention


def _dense(mask_mod, B, H, L, S):
    return flex.create_mask(mask_mod, B, H, L, S, device="cpu")


def test_mask_mods_build_the_course_masks():
    L, S = 6, 9
    assert torch.equal(_dense(qkv.causal_mask_mod, 1, 1, L, S)[0, 0], qkv.causal_mask(L, S))
    assert torch.equal(_dense(qkv.bottom_right_mask_mod(L, S), 1, 1, L, S)[0, 0],
                       qkv.causal_mask_bottom_right(L, S))
    assert torch.equal(_dense(qkv.sliding_window_mask_mod(3), 1, 1, L, S)[0, 0],
                       qkv.sliding_window_mask(L, S, 3))
    lengths = torch.tensor([4, 9, 1])
    padding = _dense(qkv.padding_mask_mod(lengths), 3, 1, L, S)[:, 0]
    assert torch.equal(padding, qkv.padding_mask(lengths, S)[:, None, :].expand(3, L, S))
    n = 10
    assert torch.equal(_dense(qkv.local_global_mask_mod(n, 3, [0, 6]), 1, 1, n, n)[0, 0],
                       qkv.local_global_mask(n, 3, [0, 6]))


@pytest.mark.parametrize("which", ["causal", "bottom_right", "window", "padding", "local_global"])
def test_flex_attention_with_block_masks_equals_qkv(which, eager_flex):
    B, H, L, S, E = 2, 2, 8, 8, 4
    if which == "bottom_right":
        L = 3
    q, k, v = _rand(B, H, L, E, seed=1), _rand(B, H, S, E, seed=2), _rand(B, H, S, E, seed=3)
    lengths = torch.tensor([5, 8])
    mod, mask = {
        "causal": (qkv.causal_mask_mod, qkv.causal_mask(L, S)),
        "bottom_right": (qkv.bottom_right_mask_mod(L, S), qkv.causal_mask_bottom_right(L, S)),
        "window": (qkv.sliding_window_mask_mod(3), qkv.sliding_window_mask(L, S, 3)),
        "padding": (qkv.padding_mask_mod(lengths), qkv.padding_mask(lengths, S)[:, None, None, :]),
        "local_global": (qkv.local_global_mask_mod(S, 3, [2]), qkv.local_global_mask(S, 3, [2])),
    }[which]
    block = flex.create_block_mask(mod, B if which == "padding" else None, None, L, S, device="cpu")
    got = eager_flex(q, k, v, block_mask=block)
    torch.testing.assert_close(got, qkv.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_alibi_score_mod_is_the_papers_bias(eager_flex):
    H, n = 4, 7
    slopes = 2.0 ** (-8.0 * torch.arange(1, H + 1, dtype=torch.float64) / H)  # Press et al., sec. 3
    q, k, v = _rand(1, H, n, 8, seed=1), _rand(1, H, n, 8, seed=2), _rand(1, H, n, 8, seed=3)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    bias = (-slopes[:, None, None] * (i - j)).masked_fill(j > i, float("-inf"))
    want = qkv.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    block = flex.create_block_mask(qkv.causal_mask_mod, None, None, n, n, device="cpu")
    got = eager_flex(q, k, v, score_mod=qkv.alibi_score_mod(slopes), block_mask=block)
    torch.testing.assert_close(got, want)


def test_flex_gqa_equals_grouped_query_attention(eager_flex):
    q, k, v = _rand(1, 8, 6, 4, seed=1), _rand(1, 2, 6, 4, seed=2), _rand(1, 2, 6, 4, seed=3)
    block = flex.create_block_mask(qkv.causal_mask_mod, None, None, 6, 6, device="cpu")
    got = eager_flex(q, k, v, block_mask=block, enable_gqa=True)
    torch.testing.assert_close(got, qkv.grouped_query_attention(q, k, v, is_causal=True))


# ----------------------------------------------------------------------------- paths
def _forwards(d=4):
    g = torch.Generator().manual_seed(0)
    return {
        "recurrent": (paths.recurrent(d, g), lambda n: n),
        "convolution k=3": (paths.convolutional(d, 3, g), lambda n: math.ceil((n - 1) / 2)),
        "dilated convolution k=3": (paths.convolutional(d, 3, g, dilated=True),
                                    lambda n: math.ceil(math.log(n, 3) - 1e-9)),
        "self-attention": (paths.self_attention_stack(d, g), lambda n: 1),
        "self-attention, window 4": (paths.self_attention_stack(d, g, window=4),
                                     lambda n: math.ceil((n - 1) / 3)),
    }


@pytest.mark.parametrize("n", [9, 16, 27])
def test_path_lengths_match_vaswani_table_1(n):
    for name, (forward, expected) in _forwards().items():
        assert paths.path_length(forward, n, 4, generator=torch.Generator().manual_seed(1)) == expected(n), name


def test_path_length_says_none_when_the_hops_do_not_suffice():
    forward, _ = _forwards()["convolution k=3"]
    assert paths.path_length(forward, 20, 4, max_hops=5) is None


def test_sequential_steps_grow_with_n_only_for_the_recurrence():
    steps = {}
    for name, (forward, _) in _forwards().items():
        for n in (8, 16, 32):
            x = _rand(n, 4).requires_grad_()
            steps[name, n] = paths.sequential_steps(forward(x, n if name == "recurrent" else 1))
    rnn = [steps["recurrent", n] for n in (8, 16, 32)]
    assert rnn[2] - rnn[1] == 2 * (rnn[1] - rnn[0]) > 0  # linear in n
    for name in _forwards():
        if name != "recurrent":
            assert steps[name, 8] == steps[name, 16] == steps[name, 32], name
    assert paths.sequential_steps(torch.ones(3)) == 0
