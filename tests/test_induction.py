"""qkv.induction and the head scores of qkv.heads: the task, the model, the scores, ablation, training."""

import pytest
import torch

import qkv
from qkv import heads
from qkv.induction import (AttentionOnlyTransformer, InductionTask, ablate_heads, measure_induction,
                           train_induction)


def sample(task: InductionTask, n: int = 64, seed: int = 0):
    return task.sample(n, torch.Generator().manual_seed(seed))


def test_task_repeats_one_segment_and_nothing_else():
    task = InductionTask(vocab_size=40, length=20, min_repeat=3, max_repeat=8)
    b = sample(task, 200)
    assert b.tokens.shape == b.first.shape == b.repeat.shape == (200, 20)
    assert b.tokens.min() >= 0 and b.tokens.max() < 40
    for tokens, first, repeat in zip(b.tokens, b.first, b.repeat):
        # the two copies: queries predicting segment tokens 1..n-1, first and second time
        n = int(first.sum()) + 1
        assert int(repeat.sum()) == n - 1 and task.min_repeat <= n <= task.max_repeat
        s = int(first.nonzero()[0])
        assert torch.equal(tokens[s: s + n], tokens[s + n: s + 2 * n])
        # every other token appears once: the segment is the only thing that repeats
        assert len(set(tokens.tolist())) == len(tokens) - n
        assert torch.equal(repeat.nonzero()[:, 0], first.nonzero()[:, 0] + n)
    # lengths and places vary, so no fixed offset finds the first copy
    lengths = b.first.sum(1) + 1
    starts = b.first.int().argmax(1)
    assert len(lengths.unique()) == task.max_repeat - task.min_repeat + 1 and len(starts.unique()) > 5


def test_task_is_reproducible_and_checks_its_sizes():
    task = InductionTask()
    assert all(torch.equal(x, y) for x, y in zip(sample(task, seed=3), sample(task, seed=3)))
    with pytest.raises(ValueError, match="do not fit"):
        InductionTask(vocab_size=32, length=10, min_repeat=2, max_repeat=6)
    with pytest.raises(ValueError, match="vocab_size"):
        InductionTask(vocab_size=8, length=10, min_repeat=2, max_repeat=5)


def test_induction_targets_follow_the_last_earlier_occurrence():
    tokens = torch.tensor([[5, 1, 2, 5, 3, 1, 5]])
    # 5 at t=3 follows 5 at 0 -> key 1; 1 at t=5 -> key 2; 5 at t=6: last seen at 3 -> key 4
    assert heads.induction_targets(tokens).tolist() == [[-1, -1, -1, 1, -1, 2, 4]]


def perfect_heads(tokens: torch.Tensor) -> torch.Tensor:
    """Hand-made weights (B, 3, T, T): a previous-token head, an induction head, a uniform causal head."""
    B, T = tokens.shape
    prev = torch.zeros(B, T, T, dtype=torch.float64)
    prev[:, 0, 0] = 1
    prev[:, torch.arange(1, T), torch.arange(T - 1)] = 1
    target = heads.induction_targets(tokens)
    ind = torch.zeros(B, T, T, dtype=torch.float64)
    rows = torch.arange(T).expand(B, T)
    ind[torch.arange(B)[:, None], rows, torch.where(target >= 0, target, rows)] = 1
    causal = qkv.causal_mask(T).double()
    uniform = (causal / causal.sum(-1, keepdim=True)).expand(B, T, T)
    return torch.stack([prev, ind, uniform], dim=1)


def test_scores_of_hand_made_heads():
    b = sample(InductionTask(vocab_size=32, length=16, min_repeat=2, max_repeat=8), 8)
    w = perfect_heads(b.tokens)
    prev, ind = heads.previous_token_score(w), heads.induction_score(w, b.tokens)
    assert prev.shape == ind.shape == (3,)
    assert prev[0].item() == pytest.approx(1.0) and ind[1].item() == pytest.approx(1.0)
    assert prev[1] < 0.5 and ind[0] < 0.5
    # a uniform causal row t gives 1/(t+1) to each key
    T = b.tokens.shape[1]
    assert prev[2].item() == pytest.approx(sum(1 / (t + 1) for t in range(1, T)) / (T - 1))
    # layers stack in front: (layers, B, H, T, T) -> (layers, H)
    assert heads.induction_score(torch.stack([w, w]), b.tokens).shape == (2, 3)


def test_induction_score_needs_a_repeat():
    w = torch.full((1, 1, 4, 4), 0.25)
    with pytest.raises(ValueError, match="no token repeats"):
        heads.induction_score(w, torch.tensor([[0, 1, 2, 3]]))


def test_model_shapes_and_causality(device):
    model = AttentionOnlyTransformer(20, 12, d_model=16, num_layers=2, num_heads=4,
                                     device=device, dtype=torch.float64)
    tokens = torch.randint(20, (3, 12), generator=torch.Generator().manual_seed(0)).to(device)
    logits, w = model(tokens)
    assert logits.shape == (3, 12, 20) and logits.dtype == torch.float64
    assert w.shape == (2, 3, 4, 12, 12)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 4, 12, dtype=torch.float64, device=device))
    changed = tokens.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 20  # the future changes, the past's predictions must not
    torch.testing.assert_close(model(changed)[0][:, :7], logits[:, :7])


def test_ablating_nothing_changes_nothing_and_ablation_is_undone():
    torch.manual_seed(0)
    model = AttentionOnlyTransformer(24, 16, d_model=16, num_layers=2, num_heads=2)
    tokens = sample(InductionTask(24, 16, 2, 8), 4).tokens
    before, _ = model(tokens)
    with ablate_heads(model, []):
        torch.testing.assert_close(model(tokens)[0], before, rtol=0, atol=0)
    with ablate_heads(model, [(1, 0)]):
        ablated, w = model(tokens)
    assert not torch.allclose(ablated, before)
    torch.testing.assert_close(model(tokens)[0], before, rtol=0, atol=0)
    # with every head removed, each layer adds only its output bias: the rest is embed -> unembed
    every = [(layer, head) for layer in range(2) for head in range(2)]
    with ablate_heads(model, every):
        bare, _ = model(tokens)
    x = model.embed(tokens) + sum(layer.out_proj.bias for layer in model.layers)
    torch.testing.assert_close(bare, model.unembed(x))
    with pytest.raises(ValueError, match="not in the model"):
        with ablate_heads(model, [(2, 0)]):
            pass


def test_short_training_lowers_the_loss_on_the_repeat(one_thread):
    task = InductionTask(vocab_size=24, length=16, min_repeat=4, max_repeat=8)
    probe = sample(task, 128, seed=99)
    torch.manual_seed(0)
    model = AttentionOnlyTransformer(24, 16, d_model=32, num_layers=2, num_heads=2)
    at, log = train_induction(model, task, steps=100, probe=probe, every=40, lr=1e-2)
    assert at.tolist() == [0, 40, 80, 100]
    assert log.previous.shape == log.induction.shape == (4, 2, 2)
    # the repeat's loss falls, and by more than the first copy's: the model starts to use the context
    drop_repeat, drop_first = log.loss_repeat[0] - log.loss_repeat[-1], log.loss_first[0] - log.loss_first[-1]
    assert drop_repeat > 0.3 and drop_repeat > 2 * drop_first
    final = measure_induction(model, probe)
    torch.testing.assert_close(final.loss_repeat, log.loss_repeat[-1])
