"""Bad input to the attention functions is reported in terms of the user's arguments."""

from __future__ import annotations

import pytest
import torch

import qkv

Q, K, V = torch.zeros(2, 3, 4), torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)
FUNCS = {
    "scaled_dot_product_attention": qkv.scaled_dot_product_attention,
    "chunked_attention": qkv.chunked_attention,
}

CASES = [
    ("mismatched E", (Q, torch.zeros(2, 5, 3), V), {}, ValueError, ["same last dim E", "(2, 3, 4)", "(2, 5, 3)"]),
    ("mismatched S", (Q, K, torch.zeros(2, 4, 6)), {}, ValueError, ["sequence length S", "(2, 5, 4)", "(2, 4, 6)"]),
    ("1-D query", (torch.zeros(4), K, V), {}, ValueError, ["query", "(..., L, E)", "(4)"]),
    ("int dtype", (Q.long(), K, V), {}, TypeError, ["query", "floating-point", "torch.int64"]),
    ("mixed dtypes", (Q, K.double(), V), {}, TypeError, ["dtype", "key: torch.float64"]),
    ("batch mismatch", (Q, torch.zeros(3, 5, 4), torch.zeros(3, 5, 6)), {}, ValueError, ["batch dimensions", "(2, 3, 4)", "(3, 5, 4)"]),
    ("mask shape", (Q, K, V), {"attn_mask": torch.ones(3, 4, dtype=torch.bool)}, ValueError, ["attn_mask", "(..., 3, 5)", "(3, 4)"]),
    ("mask batch", (Q, K, V), {"attn_mask": torch.ones(4, 3, 5, dtype=torch.bool)}, ValueError, ["attn_mask", "(4, 3, 5)", "batch"]),
    ("mask dtype", (Q, K, V), {"attn_mask": torch.ones(3, 5, dtype=torch.int64)}, TypeError, ["attn_mask", "bool", "torch.int64"]),
    ("mask float64 on float32", (Q, K, V), {"attn_mask": torch.zeros(3, 5, dtype=torch.float64)}, TypeError, ["attn_mask", "torch.float32", "torch.float64"]),
    ("mask and causal", (Q, K, V), {"attn_mask": torch.ones(3, 5, dtype=torch.bool), "is_causal": True}, ValueError, ["attn_mask", "is_causal", "not both"]),
    ("bad scale", (Q, K, V), {"scale": -1.0}, ValueError, ["scale", "-1.0"]),
    ("not a tensor", ([[1.0]], K, V), {}, TypeError, ["query", "torch.Tensor", "list"]),
]


@pytest.mark.parametrize("fname", list(FUNCS))
@pytest.mark.parametrize("name, args, kwargs, exc, words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_messages(fname, name, args, kwargs, exc, words):
    with pytest.raises(exc) as e:
        FUNCS[fname](*args, **kwargs)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_sdpa_only_errors_and_softmax():
    with pytest.raises(ValueError, match="dropout_p"):
        qkv.scaled_dot_product_attention(Q, K, V, dropout_p=1.5)
    with pytest.raises(ValueError, match="dim=3 is out of range"):
        qkv.softmax(torch.zeros(2, 2), dim=3)
    with pytest.raises(TypeError, match="floating-point"):
        qkv.softmax(torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="chunk_size"):
        qkv.chunked_attention(Q, K, V, chunk_size=0)
