"""Tests of qkv.retrieval: the toy task and the one-head model of chapters 3 and 4."""

import pytest
import torch

from qkv.retrieval import RetrievalHead, evaluate_retrieval, retrieval_batch, train_retrieval


def test_batch_query_is_the_address_of_the_target_item():
    b = retrieval_batch(5, 7, 3, 4, torch.Generator().manual_seed(0))
    assert b.query.shape == (5, 1, 7) and b.items.shape == (5, 7, 7)
    assert b.target.shape == (5, 4) and b.contents.shape == (5, 7, 4)
    rows = torch.arange(5)
    torch.testing.assert_close(b.query[:, 0, :3], b.items[rows, b.index, :3])
    assert torch.all(b.query[:, 0, 3:] == 0)
    torch.testing.assert_close(b.target, b.items[rows, b.index, 3:])
    torch.testing.assert_close(b.contents, b.items[..., 3:])


def test_batch_is_reproducible_from_the_generator():
    a = retrieval_batch(4, 5, 2, 2, torch.Generator().manual_seed(1))
    b = retrieval_batch(4, 5, 2, 2, torch.Generator().manual_seed(1))
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_batch_rejects_bad_sizes():
    with pytest.raises(ValueError, match="num_items must be a positive int"):
        retrieval_batch(4, 0, 2, 2, torch.Generator())


def test_tied_head_uses_the_keys_as_values():
    g = torch.Generator().manual_seed(2)
    tied = RetrievalHead(8, 4, 6, tie_kv=True, generator=g)
    assert tied.W_v is None
    b = retrieval_batch(3, 5, 4, 4, g)
    keys = b.items @ tied.W_k.T
    w = torch.softmax((b.query @ tied.W_q.T) @ keys.transpose(-2, -1) / 6**0.5, dim=-1)
    torch.testing.assert_close(tied(b.query, b.items), ((w @ keys) @ tied.W_o.T)[:, 0])


def test_scale_one_means_unscaled_scores():
    g = torch.Generator().manual_seed(3)
    head = RetrievalHead(8, 4, 16, scale=1.0, generator=g)
    b = retrieval_batch(3, 5, 4, 4, g)
    w = torch.softmax((b.query @ head.W_q.T) @ (b.items @ head.W_k.T).transpose(-2, -1), dim=-1)
    torch.testing.assert_close(head(b.query, b.items), ((w @ (b.items @ head.W_v.T)) @ head.W_o.T)[:, 0])




def test_a_separate_head_learns_the_task(one_thread):
    g = torch.Generator().manual_seed(4)
    head = RetrievalHead(16, 8, 8, generator=g)
    test = retrieval_batch(500, 4, 8, 8, torch.Generator().manual_seed(5))
    mse_before, acc_before = evaluate_retrieval(head, test)
    losses = train_retrieval(head, 150, 4, 8, 8, g)
    mse_after, acc_after = evaluate_retrieval(head, test)
    assert len(losses) == 150
    assert mse_after < 0.5 * mse_before and acc_after > acc_before + 0.3
