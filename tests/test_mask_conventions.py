"""Masks as chapter 6 uses them: the convention probe, invariances, fully masked rows."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import qkv

PERM = [2, 0, 3, 1]


def follows_course_convention(attend) -> bool:
    """True if ``attend(q, k, v, mask)`` treats ``True`` as "may attend" (SDPA, qkv).

    Each query is allowed exactly one key; with that convention the output is that
    key's value. With the inverted one each query sees the other keys instead.
    """
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 8, generator=g) for _ in range(3))
    only = torch.zeros(4, 4, dtype=torch.bool)
    only[torch.arange(4), torch.tensor(PERM)] = True
    with torch.no_grad():
        out = attend(q, k, v, only)
    return torch.allclose(out, v[:, PERM], atol=1e-5)


def identity_torch_mha() -> nn.MultiheadAttention:
    """One head with identity projections, so the output is the attended value itself."""
    m = nn.MultiheadAttention(8, 1, batch_first=True, bias=False).eval()
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.eye(8).repeat(3, 1))
        m.out_proj.weight.copy_(torch.eye(8))
    return m


def test_probe_accepts_the_course_convention():
    assert follows_course_convention(lambda q, k, v, m: qkv.scaled_dot_product_attention(q, k, v, m))
    assert follows_course_convention(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m))
    mha = identity_torch_mha()
    assert follows_course_convention(lambda q, k, v, m: mha(q, k, v, attn_mask=qkv.to_torch_mask(m))[0])
    ours = qkv.MultiHeadAttention.from_torch(mha)
    assert follows_course_convention(lambda q, k, v, m: ours(q, k, v, mask=m)[0])


def test_probe_catches_the_inverted_convention():
    mha = identity_torch_mha()
    assert not follows_course_convention(lambda q, k, v, m: mha(q, k, v, attn_mask=m)[0])
    assert not follows_course_convention(
        lambda q, k, v, m: qkv.scaled_dot_product_attention(q, k, v, qkv.from_torch_mask(m))
    )
    ours = qkv.MultiHeadAttention.from_torch(mha)
    assert not follows_course_convention(lambda q, k, v, m: ours(q, k, v, mask=~m)[0])


def test_padded_tokens_change_nothing_at_real_positions():
    torch.manual_seed(0)
    mha = qkv.MultiHeadAttention(16, 4).eval()
    keep = qkv.padding_mask([7, 5, 2], 7)
    x = torch.randn(3, 7, 16)
    garbage = torch.where(keep[..., None], x, 1e3 * torch.randn(3, 7, 16))
    with torch.no_grad():
        a, _ = mha(x, key_mask=keep)
        b, _ = mha(garbage, key_mask=keep)
        c, _ = mha(garbage)
    assert torch.equal(a[keep], b[keep])
    assert not torch.allclose(a[keep], c[keep])  # without the mask the garbage leaks in


@pytest.mark.parametrize("t", [1, 3, 5])
def test_future_tokens_change_nothing_before_them(t):
    torch.manual_seed(t)
    mha = qkv.MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 6, 16)
    y = x.clone()
    y[:, t:] = torch.randn(2, 6 - t, 16)
    with torch.no_grad():
        a, _ = mha(x, is_causal=True)
        b, _ = mha(y, is_causal=True)
    assert torch.equal(a[:, :t], b[:, :t])
    assert not torch.allclose(a[:, t:], b[:, t:])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_fully_masked_rows_give_zeros_like_sdpa(dtype):
    torch.manual_seed(0)
    L = 5
    left_keep = torch.tensor([[False, False, True, True, True]])
    mask = (qkv.causal_mask(L) & left_keep[:, None, :])[:, None]
    q, k, v = (torch.randn(1, 2, L, 8).to(dtype) for _ in range(3))
    out, w = qkv.scaled_dot_product_attention_with_weights(q, k, v, attn_mask=mask)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.equal(w[..., :2, :], torch.zeros_like(w[..., :2, :]))
    assert torch.equal(out[..., :2, :], torch.zeros_like(out[..., :2, :]))
    assert torch.equal(ref[..., :2, :], torch.zeros_like(ref[..., :2, :]))
    tol = dict(atol=2e-3, rtol=1e-3) if dtype == torch.float16 else {}
    torch.testing.assert_close(out, ref, **tol)


def test_finite_fill_turns_a_fully_masked_row_uniform():
    """The hazard chapter 6 shows: a large negative constant instead of -inf."""
    scores = torch.tensor([2.0, 1.0, 0.5])
    w = torch.softmax(scores.masked_fill(torch.ones(3, dtype=torch.bool), -1e9), -1)
    torch.testing.assert_close(w, torch.full((3,), 1 / 3))
    with pytest.raises(RuntimeError):
        scores.half().masked_fill(torch.ones(3, dtype=torch.bool), -1e9)


# Every public callable that takes a mask, called so that ``follows_course_convention`` can
# probe it. A new one must be added here: the course has one mask convention, and the
# names PyTorch uses for the inverted one (True = forbidden) are never reused.
def _torch_free_mha():
    return qkv.MultiHeadAttention.from_torch(identity_torch_mha())


MASK_PROBES = {
    "scaled_dot_product_attention": lambda q, k, v, m: qkv.scaled_dot_product_attention(q, k, v, attn_mask=m),
    "scaled_dot_product_attention_with_weights": lambda q, k, v, m: qkv.scaled_dot_product_attention_with_weights(q, k, v, attn_mask=m)[0],
    "chunked_attention": lambda q, k, v, m: qkv.chunked_attention(q, k, v, attn_mask=m, chunk_size=2),
    "memory_efficient_attention": lambda q, k, v, m: qkv.memory_efficient_attention(
        q, k, v, attn_mask=m, chunk_size=2, query_chunk_size=3),
    "grouped_query_attention": lambda q, k, v, m: qkv.grouped_query_attention(q[None], k[None], v[None], attn_mask=m)[0],
    "attention_scores": lambda q, k, v, m: qkv.attend(qkv.attention_scores(q, k, attn_mask=m), v)[0],
    "attend": lambda q, k, v, m: qkv.attend(q @ k.transpose(-2, -1), v, attn_mask=m)[0],
    "AdditiveAttention": lambda q, k, v, m: qkv.AdditiveAttention(8, 8, 8)(q, k, v, attn_mask=m)[0],
    "LuongAttention": lambda q, k, v, m: qkv.LuongAttention(8, method="general")(q, k, v, attn_mask=m)[0],
    "MultiHeadAttention": lambda q, k, v, m: _torch_free_mha()(q, k, v, mask=m)[0],
    "combine_masks": lambda q, k, v, m: qkv.scaled_dot_product_attention(
        q, k, v, qkv.combine_masks(m, None, False, 1, 4, 4, q)),
    "to_additive_mask": lambda q, k, v, m: qkv.scaled_dot_product_attention(
        q, k, v, qkv.to_additive_mask(m, q.dtype)),
    # The two converters take PyTorch's convention in and give the course's out.
    "from_torch_mask": lambda q, k, v, m: qkv.scaled_dot_product_attention(
        q, k, v, qkv.from_torch_mask(~m)),
    "to_torch_mask": lambda q, k, v, m: qkv.scaled_dot_product_attention(
        q, k, v, ~qkv.to_torch_mask(m)),
}
# Names whose bool masks PyTorch reads as True = forbidden (nn.MultiheadAttention, nn.Transformer).
INVERTED_IN_TORCH = {"key_padding_mask", "src_key_padding_mask", "tgt_key_padding_mask",
                     "memory_key_padding_mask", "src_mask", "tgt_mask", "memory_mask"}
# attn_mask means True = allowed in SDPA but True = forbidden in nn.MultiheadAttention, so
# the course's mirror of that module must not take it.
MIRRORS_TORCH_MHA = {"MultiHeadAttention"}


def _mask_taking_callables():
    import inspect
    found = {}
    for name in qkv.__all__:
        obj = getattr(qkv, name)
        f = obj.forward if inspect.isclass(obj) and issubclass(obj, nn.Module) else obj
        try:
            params = inspect.signature(f).parameters
        except (TypeError, ValueError):
            continue
        masks = [p for p in params if "mask" in p]
        if masks:
            found[name] = masks
    return found


def test_every_public_mask_argument_is_probed():
    assert set(_mask_taking_callables()) == set(MASK_PROBES)


@pytest.mark.parametrize("name", sorted(MASK_PROBES))
def test_every_public_mask_follows_the_course_convention(name):
    assert follows_course_convention(MASK_PROBES[name]), name


def test_no_pytorch_name_is_reused_for_the_opposite_meaning():
    for name, params in _mask_taking_callables().items():
        assert not INVERTED_IN_TORCH & set(params), (name, params)
        if name in MIRRORS_TORCH_MHA:
            assert "attn_mask" not in params, name
