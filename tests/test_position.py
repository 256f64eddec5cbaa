"""qkv.position (sinusoidal, RoPE, ALiBi) against the published definitions and Hugging Face's
code, and the properties chapter 7 relies on; qkv.extrapolation's model and experiment."""

import math

import pytest
import torch
import torch.nn.functional as F

import qkv
from qkv import extrapolation
from qkv.extrapolation import TinyTransformer

f64 = torch.float64


# ------------------------------------------------------------------------ sinusoidal_encoding
@pytest.mark.parametrize("L,E,base", [(7, 8, 10000.0), (5, 2, 10000.0), (12, 6, 100.0)])
def test_sinusoidal_is_the_formula_of_vaswani_et_al(L, E, base):
    # PE(p, 2i) = sin(p / base^(2i/E)), PE(p, 2i+1) = cos(p / base^(2i/E)), written element by element.
    expected = torch.tensor([[math.sin(p / base ** (d / E)) if d % 2 == 0 else math.cos(p / base ** ((d - 1) / E))
                              for d in range(E)] for p in range(L)], dtype=f64)
    torch.testing.assert_close(qkv.sinusoidal_encoding(L, E, base, dtype=f64), expected)


def test_sinusoidal_shift_is_one_linear_map_for_every_position():
    E, k = 10, 3
    pe = qkv.sinusoidal_encoding(30, E, dtype=f64)
    shifted = torch.linalg.lstsq(pe[:-k], pe[k:]).solution  # the one matrix with PE[p] @ M = PE[p + k]
    torch.testing.assert_close(pe[:-k] @ shifted, pe[k:])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, f64])
def test_sinusoidal_dtype_and_device(dtype):
    out = qkv.sinusoidal_encoding(6, 8, dtype=dtype)
    assert out.dtype == dtype and out.shape == (6, 8)
    torch.testing.assert_close(out, qkv.sinusoidal_encoding(6, 8, dtype=f64).to(dtype))
    assert qkv.sinusoidal_encoding(6, 8, device="meta").device.type == "meta"


def test_odd_widths_and_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="E must be even"):
        qkv.sinusoidal_encoding(4, 5)
    with pytest.raises(ValueError, match="E must be even"):
        qkv.apply_rope(torch.randn(2, 3, 7))
    with pytest.raises(ValueError, match="pairing"):
        qkv.apply_rope(torch.randn(3, 4), pairing="pairs")
    with pytest.raises(ValueError, match="offset"):
        qkv.apply_rope(torch.randn(3, 4), offset=-1)
    with pytest.raises(TypeError, match="floating-point"):
        qkv.apply_rope(torch.ones(3, 4, dtype=torch.long))


# ---------------------------------------------------------------------------------- apply_rope
def _rope_complex(x, offset=0, base=10000.0):
    """Su et al.'s definition: pair (2i, 2i+1) as a complex number, times e^{i p theta_i}."""
    L, E = x.shape[-2:]
    theta = base ** (-torch.arange(0, E, 2, dtype=f64) / E)
    angles = torch.arange(offset, offset + L, dtype=f64)[:, None] * theta
    pairs = torch.view_as_complex(x.to(f64).unflatten(-1, (E // 2, 2)).contiguous())
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2)


@pytest.mark.parametrize("offset,base", [(0, 10000.0), (5, 10000.0), (3, 50.0)])
def test_rope_is_the_complex_rotation_of_su_et_al(offset, base):
    x = torch.randn(2, 3, 6, 8, dtype=f64)
    torch.testing.assert_close(qkv.apply_rope(x, offset, base), _rope_complex(x, offset, base))


def test_rope_half_pairing_matches_hugging_face_llama():
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    q, k = torch.randn(2, 4, 9, 16, dtype=f64), torch.randn(2, 4, 9, 16, dtype=f64)
    theta = 10000.0 ** (-torch.arange(0, 16, 2, dtype=f64) / 16)
    angles = torch.arange(9, dtype=f64)[:, None] * theta
    emb = torch.cat([angles, angles], -1)[None]  # (1, L, E), as LlamaRotaryEmbedding builds it
    q_hf, k_hf = llama.apply_rotary_pos_emb(q, k, emb.cos(), emb.sin())
    torch.testing.assert_close(qkv.apply_rope(q, pairing="half"), q_hf)
    torch.testing.assert_close(qkv.apply_rope(k, pairing="half"), k_hf)


def test_rope_pairings_differ_by_a_permutation_of_the_dims():
    x = torch.randn(3, 5, 12, dtype=f64)
    to_half = torch.cat([torch.arange(0, 12, 2), torch.arange(1, 12, 2)])
    torch.testing.assert_close(qkv.apply_rope(x)[..., to_half], qkv.apply_rope(x[..., to_half], pairing="half"))


@pytest.mark.parametrize("pairing", ["interleaved", "half"])
def test_rope_score_depends_only_on_the_offset(pairing):
    q, k = torch.randn(2, 16, dtype=f64)
    Q = qkv.apply_rope(q.expand(40, 16), pairing=pairing)
    K = qkv.apply_rope(k.expand(40, 16), pairing=pairing)
    scores = Q @ K.T
    for d in range(-39, 40):
        diag = scores.diagonal(d)
        assert (diag - diag[0]).abs().max() < 1e-10, d
    # and the rotation keeps every norm
    torch.testing.assert_close(Q.norm(dim=-1), q.norm().expand(40))


def test_rope_offset_continues_the_positions():
    x = torch.randn(2, 2, 10, 8, dtype=f64)
    torch.testing.assert_close(qkv.apply_rope(x[..., 6:, :], offset=6), qkv.apply_rope(x)[..., 6:, :])


def test_rope_attention_ignores_a_shift_of_every_position():
    q, k, v = (torch.randn(1, 2, 7, 8, dtype=f64) for _ in range(3))
    at = lambda o: qkv.scaled_dot_product_attention(qkv.apply_rope(q, o), qkv.apply_rope(k, o), v, is_causal=True)
    torch.testing.assert_close(at(0), at(37))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, f64])
def test_rope_keeps_dtype_and_device(dtype):
    x = torch.randn(2, 3, 5, 8).to(dtype)
    out = qkv.apply_rope(x, offset=3)
    assert out.dtype == dtype and out.shape == x.shape
    torch.testing.assert_close(out, qkv.apply_rope(x.to(f64), offset=3).to(dtype))
    assert qkv.apply_rope(torch.empty(2, 4, device="meta")).device.type == "meta"


# ---------------------------------------------------------------------------------- alibi_bias
def _paper_slopes(n):
    """The slope code published with Press et al. (2022)."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + _paper_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("H", [1, 2, 4, 6, 8, 12, 16, 20])
def test_alibi_slopes_are_the_papers(H):
    torch.testing.assert_close(qkv.alibi_slopes(H, dtype=f64), torch.tensor(_paper_slopes(H), dtype=f64))


def test_alibi_slopes_for_eight_heads():
    assert qkv.alibi_slopes(8).tolist() == [2.0 ** -h for h in range(1, 9)]


def test_alibi_bias_is_minus_slope_times_distance():
    bias = qkv.alibi_bias(4, 3, 5, dtype=f64)
    assert bias.shape == (4, 3, 5)
    for h, m in enumerate(_paper_slopes(4)):
        for i in range(3):
            for j in range(5):
                assert bias[h, i, j].item() == -m * abs(i - j)
    assert not torch.signbit(bias.diagonal(dim1=-2, dim2=-1)).any()  # +0 on the diagonal, not -0


def test_alibi_under_a_causal_mask_matches_bloom():
    # BLOOM adds slope * key position; under a causal mask that differs from -slope * (i - j) by a
    # constant per row, which the softmax ignores.
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    H, L = 6, 7
    alibi = bloom.build_alibi_tensor(torch.ones(1, L), H, f64).reshape(1, H, 1, L)
    scores = torch.randn(1, H, L, L, dtype=f64)
    keep = qkv.causal_mask(L)
    ours = torch.softmax((scores + qkv.alibi_bias(H, L, dtype=f64)).masked_fill(~keep, -math.inf), -1)
    theirs = torch.softmax((scores + alibi).masked_fill(~keep, -math.inf), -1)
    torch.testing.assert_close(ours, theirs)


def test_alibi_is_an_attn_mask_for_qkv_and_sdpa():
    H, L, S = 4, 5, 7
    q, k, v = torch.randn(2, H, L, 8), torch.randn(2, H, S, 8), torch.randn(2, H, S, 8)
    bias = qkv.alibi_bias(H, L, S)
    torch.testing.assert_close(qkv.scaled_dot_product_attention(q, k, v, attn_mask=bias),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=bias))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, f64])
def test_alibi_dtype_and_device(dtype):
    out = qkv.alibi_bias(8, 4, 6, dtype=dtype)
    assert out.dtype == dtype
    torch.testing.assert_close(out, qkv.alibi_bias(8, 4, 6, dtype=f64).to(dtype))
    assert qkv.alibi_bias(2, 3, device="meta").device.type == "meta"


# ----------------------------------------------------------------- equivariance, causal counting
def _gap(model, tokens, perm):
    with torch.no_grad():
        return (model(tokens[:, perm]) - model(tokens)[:, perm]).abs().max().item()


def test_without_position_a_bidirectional_model_is_permutation_equivariant_and_each_encoding_breaks_it():
    tokens, perm = torch.randint(0, 16, (2, 9)), torch.randperm(9)
    for enc in extrapolation.ENCODINGS:
        torch.manual_seed(0)
        gap = _gap(TinyTransformer(16, enc, causal=False).double(), tokens, perm)
        assert (gap < 1e-12) if enc == "none" else (gap > 1e-3), (enc, gap)


def test_a_causal_mask_alone_breaks_equivariance_and_lets_attention_count():
    torch.manual_seed(0)
    tokens, perm = torch.randint(0, 16, (2, 9)), torch.randperm(9)
    assert _gap(TinyTransformer(16, "none", causal=True).double(), tokens, perm) > 1e-3
    marker = torch.zeros(1, 10, 1, dtype=f64)
    marker[0, 0] = 1.0
    zeros = torch.zeros(1, 10, 4, dtype=f64)
    share = qkv.scaled_dot_product_attention(zeros, zeros, marker, is_causal=True)[0, :, 0]
    torch.testing.assert_close(share, 1 / torch.arange(1, 11, dtype=f64))


def test_previous_token_batch():
    tokens, targets = extrapolation.previous_token_batch(3, 6, 16, torch.Generator().manual_seed(0))
    assert (targets[:, 0] == extrapolation.IGNORE).all()
    assert torch.equal(targets[:, 1:], tokens[:, :-1])


def test_learned_positions_past_the_training_length_get_no_gradient():
    model = TinyTransformer(16, "learned", max_len=32)
    tokens, targets = extrapolation.previous_token_batch(4, 8, 16, torch.Generator().manual_seed(0))
    F.cross_entropy(model(tokens).flatten(0, 1), targets.flatten(), ignore_index=-100).backward()
    grad = model.positions.weight.grad
    assert grad[:8].abs().sum() > 0 and grad[8:].abs().sum() == 0


@pytest.mark.slow
def test_extrapolation_alibi_holds_and_absolute_encodings_fail_past_the_training_length():
    results = extrapolation.run_extrapolation(test_lengths=(16, 64), steps=300, seed=1)
    acc = {enc: r["accuracy"] for enc, r in results.items()}
    for enc in ("sinusoidal", "learned", "rope", "alibi"):
        assert acc[enc][16] > 0.95, (enc, acc)
    assert acc["alibi"][64] > 0.9, acc
    assert acc["learned"][64] < 0.3 and acc["sinusoidal"][64] < 0.3, acc
