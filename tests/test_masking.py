"""Masks: one convention (True = may attend) and the conversions to and from PyTorch's other one."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import qkv


def test_causal_mask_values_and_shape():
    m = qkv.causal_mask(3, 4)
    assert m.dtype == torch.bool and m.shape == (3, 4)
    assert m.tolist() == [
        [True, False, False, False],
        [True, True, False, False],
        [True, True, True, False],
    ]
    assert torch.equal(qkv.causal_mask(4), qkv.causal_mask(4, 4))


def test_causal_mask_device(device):
    assert qkv.causal_mask(2, 2, device=device).device.type == device


def test_padding_mask_from_list_and_tensor(device):
    m = qkv.padding_mask([3, 1, 0], S=4)
    assert m.tolist() == [
        [True, True, True, False],
        [True, False, False, False],
        [False, False, False, False],
    ]
    t = qkv.padding_mask(torch.tensor([2, 4], device=device))
    assert t.device.type == device and t.shape == (2, 4)
    assert t.tolist() == [[True, True, False, False], [True, True, True, True]]


def test_padding_mask_matches_sdpa_with_padding_ignored():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 1, 3, 4, generator=g, dtype=torch.float64) for _ in range(3))
    keep = qkv.padding_mask([3, 2], S=3)[:, None, None, :]
    ours = qkv.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=keep))
    # The second sequence's third key is padding: changing it changes nothing.
    k2, v2 = k.clone(), v.clone()
    k2[1, :, 2], v2[1, :, 2] = 100.0, -100.0
    torch.testing.assert_close(ours, qkv.scaled_dot_product_attention(q, k2, v2, attn_mask=keep))


def test_from_torch_mask_inverts_bool_and_keeps_float():
    m = torch.tensor([[False, True], [True, False]])
    assert torch.equal(qkv.from_torch_mask(m), ~m)
    assert torch.equal(qkv.to_torch_mask(qkv.from_torch_mask(m)), m)
    f = torch.tensor([[0.0, float("-inf")]])
    assert qkv.from_torch_mask(f) is f
    assert qkv.from_torch_mask(None) is None


def test_additive_mask_equals_bool_mask():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(4, 5, generator=g) for _ in range(3))  # L = S = 4, E = 5
    m = qkv.causal_mask(4, 4)
    bool_out = qkv.scaled_dot_product_attention(q, k, v, attn_mask=m)
    add_out = qkv.scaled_dot_product_attention(q, k, v, attn_mask=qkv.to_additive_mask(m))
    torch.testing.assert_close(bool_out, add_out)
    assert qkv.to_additive_mask(m).tolist()[0] == [0.0] + [float("-inf")] * 3


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: qkv.causal_mask(-1), ["L", "non-negative"]),
        (lambda: qkv.causal_mask(2.5), ["L", "2.5"]),
        (lambda: qkv.padding_mask([3, 5], S=4), ["exceeds", "S=4"]),
        (lambda: qkv.padding_mask(torch.tensor([1.5])), ["lengths", "integer", "float"]),
        (lambda: qkv.padding_mask([-1]), ["non-negative"]),
        (lambda: qkv.to_additive_mask(torch.zeros(2, 2)), ["bool", "float32"]),
    ],
)
def test_mask_errors_say_what_was_wrong(call, words):
    with pytest.raises((ValueError, TypeError)) as e:
        call()
    for w in words:
        assert w in str(e.value), (w, str(e.value))
