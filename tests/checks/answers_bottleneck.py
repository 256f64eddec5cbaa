"""Catalogue of student answers for the bottleneck check (``bahdanau_attention``): wrong ones (each
with the words its hint must contain) and right ones written differently (each must pass)."""

import torch

import qkv


# ----------------------------------------------------------------------------- bahdanau_attention
def bahdanau(query, keys, W_q, W_k, v_a, *, dim=-1, norm="stable", context="weighted",
             swap_out=False, swap_w=False, delegate=False):
    """Build-a-bahdanau_attention; the defaults give a right answer."""
    if delegate:
        return qkv.bahdanau_attention(query, keys, W_q, W_k, v_a)
    if swap_w:
        W_q, W_k = W_k, W_q
    e = torch.tanh(query[:, None, :] @ W_q.T + keys @ W_k.T) @ v_a  # (B, S)
    if norm == "stable":
        x = (e - e.amax(dim, keepdim=True)).exp()
        w = x / x.sum(dim, keepdim=True)
    elif norm == "unstable":
        w = e.exp() / e.exp().sum(-1, keepdim=True)
    else:
        w = e
    c = {"weighted": lambda: torch.bmm(w[:, None, :], keys)[:, 0], "mean": lambda: keys.mean(1),
         "last": lambda: keys[:, -1]}[context]()
    return (w, c) if swap_out else (c, w)


def _b(**kw):
    return lambda q, k, W_q, W_k, v_a: bahdanau(q, k, W_q, W_k, v_a, **kw)


def bahdanau_loop(query, keys, W_q, W_k, v_a):
    B, S = keys.shape[:2]
    scores = torch.stack([torch.tanh(query @ W_q.T + keys[:, j] @ W_k.T) @ v_a for j in range(S)], 1)
    w = torch.softmax(scores, dim=1)
    return (w.unsqueeze(-1) * keys).sum(1), w


BAHDANAU_WRONG = {
    "pair swapped": (_b(swap_out=True), "order (context, weights)"),
    "softmax over batch": (_b(dim=0), "softmax over the batch"),
    "raw scores": (_b(norm="raw"), "no softmax"),
    "unstable": (_b(norm="unstable"), "overflows"),
    "W swapped": (_b(swap_w=True), "W_q projects the decoder state"),
    "mean context": (_b(context="mean"), "weights unused"),
    "last state": (_b(context="last"), "the bottleneck again"),
    "delegates": (_b(delegate=True), "calls qkv.bahdanau_attention"),
    "via additive_score": (lambda q, k, W_q, W_k, v_a: qkv.attend(
        qkv.additive_score(q[:, None], k, W_q, W_k, v_a), k), "calls qkv.additive_score"),
}
BAHDANAU_RIGHT = {"stable softmax and bmm": _b(), "loop over positions": bahdanau_loop}


# Found by trying the exercise (issue 13, item 5): bmm keeps the axis of the single query.
def bahdanau_bmm_kept_axis(query, keys, W_q, W_k, v_a):
    scores = torch.tanh((query @ W_q.T).unsqueeze(1) + keys @ W_k.T) @ v_a
    weights = torch.softmax(scores, dim=-1)
    return torch.bmm(weights.unsqueeze(1), keys), weights


BAHDANAU_WRONG["context (B, 1, He) from bmm"] = (bahdanau_bmm_kept_axis, "an extra axis of size 1")
