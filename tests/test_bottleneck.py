"""The bottleneck experiment of chapter 1: its parts, and its claim in a quick setting."""

import pytest
import torch

from qkv import additive_score
from qkv.bottleneck import (
    BOS,
    EOS,
    ReverseTask,
    accuracy_by_length,
    bahdanau_attention,
    make_model,
    run_experiment,
    train,
)




def test_reverse_task_batches():
    task = ReverseTask(n_symbols=5, min_len=2, max_len=6)
    src, tgt_in, tgt_out = task.sample(8, 4, torch.Generator().manual_seed(0))
    assert src.shape == (8, 4) and tgt_in.shape == tgt_out.shape == (8, 5)
    assert src.min() >= 2 and src.max() < task.vocab_size == 7
    assert torch.equal(tgt_out[:, :4], src.flip(1)) and torch.all(tgt_out[:, 4] == EOS)
    assert torch.all(tgt_in[:, 0] == BOS) and torch.equal(tgt_in[:, 1:], tgt_out[:, :4])
    again = task.sample(8, 4, torch.Generator().manual_seed(0))[0]
    assert torch.equal(src, again)
    with pytest.raises(ValueError, match="length"):
        task.sample(8, 7, torch.Generator())


def test_bahdanau_attention_matches_the_formula():
    g = torch.Generator().manual_seed(0)
    B, S, Hd, He, A = 3, 5, 4, 6, 7
    s, h = torch.randn(B, Hd, generator=g, dtype=torch.float64), torch.randn(B, S, He, generator=g, dtype=torch.float64)
    W_q, W_k = torch.randn(A, Hd, generator=g, dtype=torch.float64), torch.randn(A, He, generator=g, dtype=torch.float64)
    v_a = torch.randn(A, generator=g, dtype=torch.float64)
    context, weights = bahdanau_attention(s, h, W_q, W_k, v_a)
    assert context.shape == (B, He) and weights.shape == (B, S)
    for b in range(B):
        e = torch.stack([v_a @ torch.tanh(W_q @ s[b] + W_k @ h[b, j]) for j in range(S)])
        alpha = torch.exp(e) / torch.exp(e).sum()
        torch.testing.assert_close(weights[b], alpha)
        torch.testing.assert_close(context[b], (alpha[:, None] * h[b]).sum(0))
    torch.testing.assert_close(weights, torch.softmax(additive_score(s[:, None], h, W_q, W_k, v_a)[:, 0], -1))
    with pytest.raises(ValueError, match="query"):
        bahdanau_attention(s[0], h, W_q, W_k, v_a)


def test_model_shapes_and_attention_weights():
    task = ReverseTask(n_symbols=5, min_len=2, max_len=6)
    src, tgt_in, _ = task.sample(4, 6, torch.Generator().manual_seed(1))
    for attention in (False, True):
        model = make_model(task, attention, seed=0, emb_dim=8, hidden_dim=16)
        logits, w = model(src, tgt_in)
        assert logits.shape == (4, 7, task.vocab_size)
        tokens, w2 = model.greedy(src, 7)
        assert tokens.shape == (4, 7) and tokens.dtype == src.dtype
        if attention:
            assert w.shape == (4, 7, 6) and w2.shape == (4, 7, 6)
            torch.testing.assert_close(w.sum(-1), torch.ones(4, 7))
        else:
            assert w is None and w2 is None
    plain, attn = make_model(task, False, 0, hidden_dim=16), make_model(task, True, 0, hidden_dim=16)
    extra = sum(p.numel() for p in attn.parameters()) - sum(p.numel() for p in plain.parameters())
    assert extra == 16 * 16 * 2 + 16  # W_q, W_k and v_a: the only difference between the two


def test_the_attention_step_can_be_swapped():
    task = ReverseTask(n_symbols=5, min_len=2, max_len=6)
    src, tgt_in, _ = task.sample(4, 5, torch.Generator().manual_seed(2))
    model = make_model(task, True, seed=0, hidden_dim=16)
    calls = []

    def uniform(query, keys, W_q, W_k, v_a):
        calls.append(1)
        w = torch.full(keys.shape[:2], 1.0 / keys.shape[1], dtype=keys.dtype, device=keys.device)
        return (w[..., None] * keys).sum(1), w

    reference, _ = model(src, tgt_in)
    model.attention_step = uniform
    logits, w = model(src, tgt_in)
    assert len(calls) == tgt_in.shape[1]
    torch.testing.assert_close(w, torch.full_like(w, 1 / 5))
    assert not torch.allclose(logits, reference)


def test_make_model_and_train_are_seeded(one_thread):
    task = ReverseTask(n_symbols=5, min_len=2, max_len=5)
    state = torch.random.get_rng_state()
    a, b = make_model(task, True, 3, hidden_dim=16), make_model(task, True, 3, hidden_dim=16)
    assert torch.equal(torch.random.get_rng_state(), state)  # the global RNG is left alone
    la = train(a, task, 5, batch_size=8, seed=7, progress=False)
    lb = train(b, task, 5, batch_size=8, seed=7, progress=False)
    assert la == lb and len(la) == 5
    assert accuracy_by_length(a, task, 10, seed=1) == accuracy_by_length(b, task, 10, seed=1)
    assert set(accuracy_by_length(a, task, 10)) == {2, 3, 4, 5}


def test_training_lowers_the_loss(one_thread):
    task = ReverseTask(n_symbols=5, min_len=2, max_len=4)
    model = make_model(task, True, 0, hidden_dim=16)
    losses = train(model, task, 150, batch_size=32, seed=0, progress=False)
    assert sum(losses[-20:]) / 20 < 0.5 * sum(losses[:20]) / 20


# The chapter's claim, in a quick setting: same widths, same budget, same data;
# at the longest inputs the model with attention is clearly more accurate.
QUICK = dict(task=ReverseTask(n_symbols=10, min_len=2, max_len=12), steps=500, hidden_dim=32)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_attention_beats_the_bottleneck_on_long_inputs(seed, one_thread):
    res = run_experiment(QUICK["task"], QUICK["steps"], seed=seed, progress=False, hidden_dim=QUICK["hidden_dim"])
    plain, attn = res["plain"]["accuracy"], res["attention"]["accuracy"]
    longest = range(10, 13)
    mean = lambda acc: sum(acc[n] for n in longest) / len(longest)  # noqa: E731
    # Both learned the task on short inputs, so the gap is about length, not training failure.
    assert plain[2] > 0.9 and attn[2] > 0.9
    assert mean(attn) > mean(plain) + 0.2, (plain, attn)
    assert mean(attn) > 0.5
