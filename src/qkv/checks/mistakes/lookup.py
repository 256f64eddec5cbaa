"""The known wrong answers of the lookup checks: ``softmax``, ``soft_lookup``, ``additive_score``,
``luong_score``.

Each ``*_variant`` function computes the exercise with switches that reproduce a
common mistake (its defaults give the right answer); each list names the
mistakes, most specific first, with the hint a student gets.
"""

from __future__ import annotations

import math
from functools import partial
from typing import List

import torch

from .attention import transposed_key
from ..harness import Mistake, picked

KEY_HINT = ("transpose only the last two axes of the keys: keys.transpose(-2, -1) (.T reverses "
            "every axis of a batched tensor)")


# --------------------------------------------------------------------------- softmax


def softmax_variant(x, dim=-1, *, ignore_dim=False, stable=True, keep=True, norm="sum",
                    log=False, global_max=False, max_last=False):
    """``softmax`` with switches that reproduce common mistakes (defaults: right)."""
    d = -1 if ignore_dim else dim
    peak = x.amax(dim=d, keepdim=True) if keep else x.amax(dim=d)
    if global_max:
        peak = x.amax()
    if max_last:  # the max over the last axis, the sum over dim
        peak = x.amax(dim=-1, keepdim=True)
    shifted = x - peak if stable else x
    e = shifted.exp()
    if norm == "max":
        return e / e.amax(dim=d, keepdim=True)
    if norm == "none":
        return e
    out = e / (e.sum(dim=d, keepdim=True) if keep else e.sum(dim=d))
    return out.log() if log else out


SOFTMAX_MISTAKES = [
    Mistake("the dim argument ignored (always the last axis)",
            "reduce along dim (amax(dim=dim, keepdim=True), sum(dim=dim, keepdim=True))",
            partial(softmax_variant, ignore_dim=True)),
    Mistake("a softmax that overflows on large logits",
            "subtract the maximum along dim before exp: softmax does not change, exp cannot "
            "overflow", partial(softmax_variant, stable=False)),
    Mistake("one maximum over the whole tensor, not one per row along dim",
            "subtract x.amax(dim=dim, keepdim=True): a row far below the global maximum "
            "underflows to exp(...) = 0 everywhere, and 0 / 0 is NaN",
            partial(softmax_variant, global_max=True)),
    Mistake("the max taken over the last axis, not over dim (the sum over dim)",
            "take the max along the same axis as the sum: x.amax(dim=dim, keepdim=True); "
            "a max over another axis shifts each row along dim by a different amount",
            partial(softmax_variant, max_last=True)),
    Mistake("max or sum taken without keepdim=True",
            "keep the reduced axis (keepdim=True) so that it broadcasts back along dim",
            partial(softmax_variant, keep=False)),
    Mistake("not normalised (exp only)", "divide by the sum of the exponentials along dim",
            partial(softmax_variant, norm="none")),
    Mistake("normalised by the maximum instead of the sum",
            "divide by the sum of the exponentials along dim, so the result sums to one",
            partial(softmax_variant, norm="max")),
    Mistake("log-softmax instead of softmax", "return the probabilities, not their logarithm",
            partial(softmax_variant, log=True)),
]


# --------------------------------------------------------------------------- soft_lookup


def soft_variant(query, keys, values, temperature=1.0, *, temp="divide", sdpa="no", dim=-1,
                 stable=True, key_t=None, hard=False, swap=False):
    """``soft_lookup`` with switches that reproduce common mistakes (defaults: right)."""
    E = query.shape[-1]
    factor = {"divide": 1.0 / temperature, "multiply": temperature, "ignored": 1.0,
              "sqrt": 1.0 / math.sqrt(temperature)}[temp]
    if sdpa == "also":
        factor /= math.sqrt(E)
    elif sdpa == "instead":
        factor = 1.0 / math.sqrt(E)
    scores = (query @ transposed_key(keys, key_t)) * factor
    if hard:
        weights = torch.zeros_like(scores).scatter(-1, scores.argmax(-1, keepdim=True), 1.0)
    elif stable:
        weights = torch.softmax(scores, dim=dim)
    else:
        e = scores.exp()
        weights = e / e.sum(dim=dim, keepdim=True)
    out = weights @ values
    return (weights, out) if swap else (out, weights)


def soft_mistakes(i: int) -> List[Mistake]:
    """The mistakes of ``soft_lookup``, reduced to item ``i`` of the pair (0 output, 1 weights)."""
    v = partial(picked, i=i)
    temp_hint = "divide the scores by the temperature: softmax(query @ keys^T / temperature)"
    axis_hint = "each query's weights over the entries sum to one: softmax over the last dim (-1)"
    return [
        Mistake("returning (weights, output) instead of (output, weights)",
                "return the pair in the order (output, weights)", v(partial(soft_variant, swap=True))),
        Mistake("multiplying by the temperature instead of dividing", temp_hint,
                v(partial(soft_variant, temp="multiply"))),
        Mistake("the temperature ignored", temp_hint, v(partial(soft_variant, temp="ignored"))),
        Mistake("divided by sqrt(temperature) instead of the temperature",
                temp_hint + " itself, not its square root (the square root belongs to sqrt(E), "
                "which a soft lookup does not have)", v(partial(soft_variant, temp="sqrt"))),
        Mistake("scaling by 1/sqrt(E) as well as the temperature",
                "a soft lookup has no 1/sqrt(E): only the temperature divides the scores",
                v(partial(soft_variant, sdpa="also"))),
        Mistake("scaling by 1/sqrt(E) instead of the temperature",
                "divide the scores by the temperature argument, not by sqrt(E)",
                v(partial(soft_variant, sdpa="instead"))),
        Mistake("a hard lookup (argmax) instead of a softmax",
                "weight every entry by the softmax of its score; argmax keeps only the best one",
                v(partial(soft_variant, hard=True))),
        Mistake("softmax over the wrong axis", axis_hint, v(partial(soft_variant, dim=-2))),
        Mistake("softmax over the wrong axis", axis_hint, v(partial(soft_variant, dim=0))),
        Mistake("a softmax that overflows on large scores",
                "subtract each row's maximum before exp (the softmax does not change, exp no "
                "longer overflows)", v(partial(soft_variant, stable=False))),
        Mistake("wrong axes transposed on the keys (keys.T)", KEY_HINT,
                v(partial(soft_variant, key_t="T"))),
        Mistake("wrong axes transposed on the keys", KEY_HINT, v(partial(soft_variant, key_t=(0, 1)))),
    ]


# --------------------------------------------------------------------------- additive_score


def additive_variant(query, key, W_q, W_k, v_a, *, proj="ok", act="tanh", swap=False,
                     separate=False, flip=False, softmax=False, v_a_used=True):
    """``additive_score`` with switches that reproduce common mistakes (defaults: right)."""
    if swap:
        W_q, W_k = W_k, W_q
    f = {"tanh": torch.tanh, "none": lambda x: x, "sigmoid": torch.sigmoid, "relu": torch.relu}[act]
    pq = query @ (W_q.T if proj == "ok" else W_q)
    pk = key @ (W_k.T if proj == "ok" else W_k)
    feats = f(pq).unsqueeze(-2) + f(pk).unsqueeze(-3) if separate else f(pq.unsqueeze(-2) + pk.unsqueeze(-3))
    s = feats @ v_a if v_a_used else feats.sum(-1)
    if flip:
        s = s.transpose(-2, -1)
    return torch.softmax(s, dim=-1) if softmax else s


_ADD_HINT = "the score is v_a^T tanh(W_q q + W_k k): project with query @ W_q.T and key @ W_k.T"
ADDITIVE_MISTAKES = [
    Mistake("the projections not transposed (query @ W_q)",
            "W_q has shape (A, Eq): project the queries with query @ W_q.T (and the keys with "
            "key @ W_k.T)", partial(additive_variant, proj="no")),
    Mistake("W_q and W_k swapped", "W_q projects the queries and W_k the keys",
            partial(additive_variant, swap=True)),
    Mistake("no tanh", _ADD_HINT + "; the tanh is what makes the score more than a sum of two "
            "linear terms", partial(additive_variant, act="none")),
    Mistake("sigmoid instead of tanh", _ADD_HINT, partial(additive_variant, act="sigmoid")),
    Mistake("v_a not applied (the tanh features summed instead)",
            _ADD_HINT + ": the last step is a dot product with v_a, tanh(...) @ v_a",
            partial(additive_variant, v_a_used=False)),
    Mistake("relu instead of tanh", _ADD_HINT, partial(additive_variant, act="relu")),
    Mistake("tanh applied to each projection separately",
            "add the two projections first, then take one tanh of the sum",
            partial(additive_variant, separate=True)),
    Mistake("scores laid out (S, L) instead of (L, S)",
            "broadcast the projected queries over a new key axis (unsqueeze(-2)) and the keys "
            "over a new query axis (unsqueeze(-3)), so that row i is query i",
            partial(additive_variant, flip=True)),
    Mistake("returning softmax weights instead of scores",
            "return the unnormalised scores; the softmax comes later", partial(additive_variant, softmax=True)),
]


# --------------------------------------------------------------------------- luong_score


def luong_variant(query, key, W=None, *, w_mode="ok", key_t=None, scale=False, softmax=False):
    """``luong_score`` with switches that reproduce common mistakes (defaults: right)."""
    kt = transposed_key(key, key_t)
    if W is None or w_mode == "ignored":
        s = query @ kt
    elif w_mode == "transposed":
        s = query @ W.T @ kt
    else:
        s = query @ W @ kt
    if scale:
        s = s / math.sqrt(query.shape[-1])
    return torch.softmax(s, dim=-1) if softmax else s


LUONG_MISTAKES = [
    Mistake("W ignored (the dot score when W is given)",
            "with W the general score is query @ W @ key^T", partial(luong_variant, w_mode="ignored")),
    Mistake("W transposed (query @ W.T @ key^T)",
            "W has shape (Eq, Ek): the general score is query @ W @ key.transpose(-2, -1)",
            partial(luong_variant, w_mode="transposed")),
    Mistake("scaling by 1/sqrt(E)", "Luong's scores are not scaled; that comes with the transformer",
            partial(luong_variant, scale=True)),
    Mistake("returning softmax weights instead of scores",
            "return the unnormalised scores; the softmax comes later", partial(luong_variant, softmax=True)),
    Mistake("wrong axes transposed on the key (key.T)", KEY_HINT, partial(luong_variant, key_t="T")),
    Mistake("wrong axes transposed on the key", KEY_HINT, partial(luong_variant, key_t=(0, 1))),
]
