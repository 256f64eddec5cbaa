"""qkv.MultiHeadAttention against nn.MultiheadAttention, split/merge heads."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import qkv


def make_torch_mha(D=16, H=4, bias=True, kdim=None, vdim=None, seed=0):
    torch.manual_seed(seed)
    return nn.MultiheadAttention(D, H, bias=bias, kdim=kdim, vdim=vdim, batch_first=True).eval()


def rand(*shape, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


KPM = torch.tensor([[False] * 6, [False] * 4 + [True] * 2, [False] * 5 + [True]])  # torch: True = pad


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(
    "masks",
    ["none", "key_mask", "attn_mask", "both", "float attn_mask", "is_causal + padding"],
)
def test_from_torch_same_output_and_weights(bias, masks):
    m = make_torch_mha(bias=bias)
    ours = qkv.MultiHeadAttention.from_torch(m)
    x = rand(3, 6, 16)
    causal_torch = torch.ones(6, 6, dtype=torch.bool).triu(1)  # torch: True = forbidden
    kw = {}
    if masks in ("key_mask", "both", "is_causal + padding"):
        kw["key_padding_mask"] = KPM  # torch's name and meaning (True = padding)
    if masks in ("attn_mask", "both"):
        kw["attn_mask"] = causal_torch
    if masks == "float attn_mask":
        kw["attn_mask"] = rand(6, 6, seed=5)
    if masks == "is_causal + padding":
        kw["attn_mask"] = causal_torch
    want, want_w = m(x, x, x, **kw)
    ours_name = {"key_padding_mask": "key_mask", "attn_mask": "mask"}  # ours: True = allowed
    conv = {ours_name.get(k, k): qkv.from_torch_mask(val) for k, val in kw.items()}
    if masks == "is_causal + padding":
        del conv["mask"]
        conv["is_causal"] = True
    got, got_w = ours(x, need_weights=True, **conv)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_w, want_w)


def test_from_torch_cross_attention_with_kdim_vdim_and_per_head_weights():
    m = make_torch_mha(D=12, H=3, kdim=5, vdim=7)
    ours = qkv.MultiHeadAttention.from_torch(m)
    q, k, v = rand(2, 4, 12), rand(2, 6, 5, seed=2), rand(2, 6, 7, seed=3)
    want, want_w = m(q, k, v, average_attn_weights=False)
    got, got_w = ours(q, k, v, need_weights=True, average_attn_weights=False)
    assert got_w.shape == (2, 3, 4, 6)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_w, want_w)


def test_unbatched_input():
    m = make_torch_mha()
    ours = qkv.MultiHeadAttention.from_torch(m)
    x = rand(5, 16)
    torch.testing.assert_close(ours(x)[0], m(x, x, x)[0])


def test_float64_module(device):
    m = make_torch_mha().double().to(device)
    ours = qkv.MultiHeadAttention.from_torch(m)
    assert ours.q_proj.weight.dtype == torch.float64 and ours.q_proj.weight.device.type == device
    x = rand(2, 3, 16).double().to(device)
    torch.testing.assert_close(ours(x)[0], m(x, x, x)[0])


def test_split_merge_round_trip_and_layout():
    x = torch.arange(2 * 3 * 8.0).reshape(2, 3, 8)
    h = qkv.split_heads(x, 4)
    assert h.shape == (2, 4, 3, 2)
    # head 1 of token 2 holds features 2..3 of token 2
    assert h[0, 1, 2].tolist() == x[0, 2, 2:4].tolist()
    assert torch.equal(qkv.merge_heads(h), x)
    # One sequence (L, D), or more leading dims, split as each of its rows would be.
    assert torch.equal(qkv.split_heads(x[0], 4), h[0])
    assert torch.equal(qkv.merge_heads(h[0]), x[0])
    assert torch.equal(qkv.split_heads(x[None], 4), h[None])


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: qkv.MultiHeadAttention(10, 3), ["embed_dim (10)", "num_heads (3)", "divisible"]),
        (lambda: qkv.MultiHeadAttention(0, 1), ["embed_dim", "positive"]),
        (lambda: qkv.split_heads(torch.zeros(2, 3, 10), 4), ["10", "num_heads=4"]),
        (lambda: qkv.split_heads(torch.zeros(10), 2), ["(B, L, D)", "(10)"]),
        (lambda: qkv.merge_heads(torch.zeros(3, 10)), ["(B, H, L, Dh)"]),
        (lambda: qkv.MultiHeadAttention(8, 2)(torch.zeros(2, 3, 6)), ["query", "(B, S, 8)", "(2, 3, 6)"]),
        (
            lambda: qkv.MultiHeadAttention(8, 2)(torch.zeros(2, 3, 8), key_mask=torch.ones(2, 4, dtype=torch.bool)),
            ["key_mask", "(2, 3)", "(2, 4)"],
        ),
        (
            lambda: qkv.MultiHeadAttention(8, 2)(torch.zeros(2, 3, 8), key_mask=torch.ones(2, 3)),
            ["key_mask", "bool", "float32"],
        ),
        (
            lambda: qkv.MultiHeadAttention(8, 2)(torch.zeros(2, 3, 8), mask=torch.ones(3, 3, dtype=torch.bool), is_causal=True),
            ["mask", "is_causal"],
        ),
        (
            lambda: qkv.MultiHeadAttention(8, 2)(torch.zeros(2, 3, 8), attn_mask=torch.ones(3, 3, dtype=torch.bool)),
            ["not attn_mask", "True = forbidden", "mask=~attn_mask"],
        ),
        (
            lambda: qkv.MultiHeadAttention(8, 2)(torch.zeros(2, 3, 8), mask=torch.ones(3, 3, dtype=torch.int64)),
            ["mask must be bool", "int64"],
        ),
        (lambda: qkv.MultiHeadAttention.from_torch(nn.Linear(2, 2)), ["nn.MultiheadAttention", "Linear"]),
        (lambda: qkv.MultiHeadAttention.from_bert(nn.Linear(2, 2)), ["BertLayer", "Linear"]),
    ],
)
def test_errors_name_what_was_wrong(call, words):
    with pytest.raises((ValueError, TypeError)) as e:
        call()
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_pytorch_padding_mask_name_is_refused_not_misread():
    """PyTorch's key_padding_mask means True = padding; ours is key_mask, True = real token."""
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    ours = qkv.MultiHeadAttention.from_torch(theirs)
    x = torch.randn(2, 4, 8)
    padding = torch.tensor([[False] * 4, [False, False, True, True]])  # PyTorch: True = padding
    with pytest.raises(ValueError) as e:
        ours(x, key_padding_mask=padding)
    assert "key_mask=~key_padding_mask" in str(e.value)
    with torch.no_grad():
        ref, _ = theirs(x, x, x, key_padding_mask=padding)
        out, _ = ours(x, key_mask=~padding)
    torch.testing.assert_close(out, ref)
    with pytest.raises(TypeError, match="unexpected keyword arguments: masks"):
        ours(x, masks=padding)
