"""Slips that got only "largest difference" (wrong14 B3, B5): the null slot of assignment 3
misplaced or kept out of the softmax; assignment 10's repeat loss summed or computed with
nll_loss on raw logits, and the duplicate-token score with the mean weight. Each is written
as a student would; the words are what the message must say."""

import math

import pytest
import torch
import torch.nn.functional as F

from qkv import checks

from named import assert_named


def null(kind=""):
    def self_attention_with_null(x, W_q, W_k, W_v, k_null, v_null):
        Q, K, V = x @ W_q.T, x @ W_k.T, x @ W_v.T
        kn = k_null.expand(*K.shape[:-2], 1, K.shape[-1])
        vn = v_null.expand(*V.shape[:-2], 1, V.shape[-1])
        s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
        if kind == "outside":
            return torch.softmax(s, -1) @ V + v_null
        if kind == "gate":
            sn = Q @ k_null[:, None] / math.sqrt(Q.shape[-1])
            return torch.softmax(s, -1) @ V + torch.sigmoid(sn) * v_null
        K = torch.cat([K, kn], -2)
        V = torch.cat([vn, V], -2) if kind == "misplaced" else torch.cat([V, vn], -2)
        return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V
    return self_attention_with_null


def repeat(kind=""):
    def repeat_loss(logits, tokens, repeat):
        lose = F.nll_loss if kind == "nll" else F.cross_entropy
        loss = lose(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
        marked = loss[repeat[:, :-1]]
        return marked.sum() if kind == "sum" else marked.mean()
    return repeat_loss


def duplicate(mean=False):
    def duplicate_token_score(weights, tokens):
        T = tokens.shape[1]
        earlier = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril(-1)
        same = (tokens[:, :, None] == tokens[:, None, :]) & earlier
        on = (weights * same[:, None]).sum(-1)
        if mean:
            on = on / same[:, None].sum(-1).clamp(min=1)
        has = same.any(-1)[:, None].to(weights.dtype)
        return (on * has).sum((0, 2)) / has.sum((0, 2))
    return duplicate_token_score


# name: (check, answer, words the message must hold)
NAMED = {
    "null slot: null key last, null value first": (
        "check_self_attention_with_null", null("misplaced"), "the null value put before"),
    "null slot: v_null added outside the softmax": (
        "check_self_attention_with_null", null("outside"), "v_null added outside the softmax"),
    "null slot: a separate sigmoid gate": (
        "check_self_attention_with_null", null("gate"), "gated apart from the softmax"),
    "repeat_loss: .sum()": ("check_repeat_loss", repeat("sum"), "summed (.sum())"),
    "repeat_loss: nll_loss on raw logits": ("check_repeat_loss", repeat("nll"),
                                            "F.nll_loss on the logits themselves"),
    "duplicate_token_score: the mean weight": ("check_duplicate_token_score", duplicate(True),
                                               "the mean weight per earlier copy"),
}


@pytest.mark.parametrize("name", NAMED)
def test_the_slip_is_named(name):
    assert_named(*NAMED[name])


@pytest.mark.parametrize("check,answer", [("check_self_attention_with_null", null()),
                                          ("check_repeat_loss", repeat()),
                                          ("check_duplicate_token_score", duplicate())])
def test_the_right_answers_written_so_pass(check, answer):
    getattr(checks, check)(answer)
