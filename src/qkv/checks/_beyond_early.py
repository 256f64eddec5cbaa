"""Assignments 1, 2 and 3: exercises that copying a page cannot answer (see :mod:`._beyond`).

Each debugging exercise prints a function with bugs from the course's catalogue; the check
compares the student's corrected function with the right one (written here with torch, or
:mod:`qkv`), and each :class:`Mistake` is the right function with one bug put back. The
experiments of these assignments are in :mod:`._beyond_experiments` (2 and 3) and
:mod:`._beyond_mid` (5); assignment 5's debugging exercise is in :mod:`._beyond_heads` and
assignment 7's exercises in :mod:`._beyond_position`, which share the case builders here
(:func:`_inputs`).
"""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import Tensor

import qkv

from .harness import Case, Exercise, half_case, Mistake, randn, via_float32
from .mistakes.attention import TORCH_ATTENTION

F32, F64 = torch.float32, torch.float64


def _inputs(*shapes, extra=(), **kw):
    """A case builder: seeded normal tensors of ``shapes``, then ``extra`` arguments."""
    def build(gen, device, dtype):
        return tuple(randn(gen, *s, device=device, dtype=dtype) for s in shapes) + tuple(
            torch.tensor(e, device=device) if isinstance(e, list) else e for e in extra), kw
    return build

def _negative(build, projected=False):
    """``build`` with every score near -900: the first input (queries, or x) gets a component
    of 30 on feature 0, and the keys -30 (``projected``: W_q and W_k pick it up with +1 and -1,
    so that x W_q^T . x W_k^T is about -900)."""
    def negative(gen, device, dtype):
        args, kw = build(gen, device, dtype)
        first, second, *rest = args
        first = first.clone()
        first[..., 0] = 30.0
        if projected:  # args: x, W_q, W_k, W_v
            W_q, W_k = second.clone(), rest[0].clone()
            W_q[0], W_k[0] = 0.0, 0.0
            W_q[0, 0], W_k[0, 0] = 1.0, -1.0
            return (first, W_q, W_k, *rest[1:]), kw
        second = second.clone()
        second[..., 0] = -30.0
        return (first, second, *rest), kw
    return negative


def _initialised(build):
    """``build`` with each weight matrix after x, (out, in), divided by sqrt(in), as a model
    initialises it (a half-precision case): the scores stay near 1, where float16 resolves
    them to 1e-3, instead of near 10, where its rounding alone moves the weights by 1%."""
    def initialised(gen, device, dtype):
        (x, *weights), kw = build(gen, device, dtype)
        return (x, *(w / math.sqrt(w.shape[-1]) if isinstance(w, Tensor) and w.dim() == 2
                     else w for w in weights)), kw
    return initialised


def _separated(build):
    """``build`` with the k-th and (k+1)-th best keys far apart (a half-precision case): the
    queries' feature 0 is 1 and the rest small, the keys' feature 0 a permutation of 0..S-1,
    so every query's scores are at least about 0.5 apart and rounding cannot reorder them."""
    def separated(gen, device, dtype):
        (query, keys, *rest), kw = build(gen, device, dtype)
        query, keys = query * 0.05, keys * 0.05
        query[..., 0] = 1.0
        order = torch.randperm(keys.shape[-2], generator=gen).to(device=device, dtype=dtype)
        keys[..., 0] = order
        return (query, keys, *rest), kw
    return separated

# --------------------------------------------------------------- assignment 1: padded encoder


def padded_bahdanau(s: Tensor, keys: Tensor, W_q: Tensor, W_k: Tensor, v_a: Tensor,
                    lengths: Tensor, *, dim: int = -1, after: bool = False,
                    no_tanh: bool = False, one_more: bool = False,
                    invert: bool = False, one_less: bool = False) -> Tensor:
    """(B, S) additive-attention weights with the padded encoder states (``j >= lengths[b]``)
    at 0; or one bug of the printed version put back (``one_more``: key ``lengths[b]`` kept);
    or another slip (``invert``: the real states masked instead of the padded ones;
    ``one_less``: the last real state masked too, positions counted from 1)."""
    hidden = (s @ W_q.T)[:, None, :] + keys @ W_k.T
    scores = (hidden if no_tanh else torch.tanh(hidden)) @ v_a
    real = (torch.arange(keys.shape[1], device=keys.device)[None, :]
            < lengths[:, None] + int(one_more) - int(one_less))
    if after:
        return torch.softmax(scores, dim=dim) * real
    return torch.softmax(scores.masked_fill(real if invert else ~real, float("-inf")), dim=dim)


def _bahdanau_case(B, S, Dq, Dk, A, lengths):
    return _inputs((B, Dq), (B, S, Dk), (A, Dq), (A, Dk), (A,), extra=(lengths,))


PADDED_BAHDANAU_WEIGHTS = Exercise(
    name="padded_bahdanau_weights", reference=via_float32(padded_bahdanau), legend="(B, S)",
    cases=[Case("B=2, S=5, query_dim=4, key_dim=3, attn_dim=6, lengths=[5, 2]",
                _bahdanau_case(2, 5, 4, 3, 6, [5, 2]), F64),
           Case("B=3, S=4, query_dim=5, key_dim=5, attn_dim=3, lengths=[1, 4, 3]",
                _bahdanau_case(3, 4, 5, 5, 3, [1, 4, 3]), F32),
           Case("B=1, S=6, query_dim=2, key_dim=4, attn_dim=8, lengths=[4]",
                _bahdanau_case(1, 6, 2, 4, 8, [4]), F64),
           half_case("B=2, S=5, query_dim=4, key_dim=3, attn_dim=6, lengths=[5, 3]",
                     _bahdanau_case(2, 5, 4, 3, 6, [5, 3]), torch.bfloat16)],
    mistakes=[
        Mistake("softmax over the batch (dim=0) (a bug of the printed function)",
                "each sequence's weights over its encoder states sum to one: dim=-1",
                partial(padded_bahdanau, dim=0)),
        Mistake("padding zeroed after the softmax (a bug of the printed function)",
                "put -inf on the padded scores before the softmax, so the weights still sum "
                "to one", partial(padded_bahdanau, after=True)),
        Mistake("tanh left out", "the score is v_a . tanh(W_q s + W_k h_j)",
                partial(padded_bahdanau, no_tanh=True)),
        Mistake("one padded state kept (j <= lengths[b] instead of j < lengths[b])",
                "sequence b's real states are j = 0 .. lengths[b] - 1: keep j < lengths[b]",
                partial(padded_bahdanau, one_more=True)),
        Mistake("the last real state masked too (positions counted from 1: arange(1, S + 1) "
                "< lengths, or j < lengths[b] - 1)",
                "sequence b's real states are j = 0 .. lengths[b] - 1: arange(S) starts at 0, "
                "and j < lengths[b] keeps all of them",
                partial(padded_bahdanau, one_less=True)),
        Mistake("the mask inverted: the real states masked, the padded ones kept",
                "masked_fill fills where its mask is True: fill the padded states, "
                "scores.masked_fill(~real, -inf) with real = arange(S) < lengths[:, None]",
                partial(padded_bahdanau, invert=True)),
    ],
    error_hints=[("size of tensor", "W_q s is (B, attn_dim) and W_k h is (B, S, attn_dim): add "
                  "a key axis to the first, (s @ W_q.T)[:, None, :]")],
)

# --------------------------------------------------------------- assignment 2: top-k lookup


def top_k(query: Tensor, keys: Tensor, values: Tensor, k: int, *, renormalise: bool = True,
          strict: bool = False, fill: float = float("-inf"), beyond: bool = False,
          smallest: bool = False, scaled: bool = False, weights: bool = False,
          extra: bool = False, inverted: bool = False) -> Tensor:
    """A soft lookup over each query's ``k`` best keys only (dot-product scores); or a bug of
    the printed version put back (``renormalise=False``: the softmax of all scores, cut;
    ``strict``: the k-th key dropped); or another slip (``fill``: the dropped keys' score;
    ``beyond``: the cut above the (k+1)-th largest, which ``topk`` refuses at k = S;
    ``smallest``: the cut at the k-th smallest; ``scaled``: the scores divided by sqrt(E);
    ``weights``: the weights returned, not weights @ values; ``extra``: k + 1 keys kept;
    ``inverted``: the keep mask used inverted, the k best dropped)."""
    scores = query @ keys.transpose(-2, -1) / (math.sqrt(query.shape[-1]) if scaled else 1)
    cut = min(k + 1, scores.shape[-1]) if extra else k + beyond
    kth = scores.topk(cut, dim=-1, largest=not smallest).values[..., -1:]
    keep = scores > kth if strict or beyond else scores >= kth
    if not renormalise:
        return (torch.softmax(scores, dim=-1) * keep) @ values
    w = torch.softmax(scores.masked_fill(keep if inverted else ~keep, fill), dim=-1)
    return w if weights else w @ values


TOP_K_LOOKUP = Exercise(
    name="top_k_lookup", reference=via_float32(top_k), legend="(..., L, Ev)", forbid=TORCH_ATTENTION,
    helpers={"softmax": qkv.softmax},
    cases=[Case("L=3 queries, S=6 keys, E=4, Ev=2, k=2", _inputs((3, 4), (6, 4), (6, 2),
                                                               extra=(2,)), F64),
           Case("batched (B=2), L=4, S=8, E=3, Ev=5, k=3",
                _inputs((2, 4, 3), (2, 8, 3), (2, 8, 5), extra=(3,)), F32),
           Case("L=2, S=5, E=4, Ev=3, k=1 (the hard lookup)",
                _inputs((2, 4), (5, 4), (5, 3), extra=(1,)), F64),
           Case("L=2, S=5, E=4, Ev=3, k=5 (every key: the soft lookup)",
                _inputs((2, 4), (5, 4), (5, 3), extra=(5,)), F64),
           Case("L=3, S=6, E=4, Ev=2, k=2 with every score very negative (near -900): a finite "
                "fill outweighs the kept keys", _negative(_inputs((3, 4), (6, 4), (6, 2),
                                                                   extra=(2,))), F64),
           half_case("batched (B=2), L=3, S=6, E=4, Ev=3, k=2, the scores well apart",
                     _separated(_inputs((2, 3, 4), (2, 6, 4), (2, 6, 3), extra=(2,))))],
    mistakes=[
        Mistake("the softmax of all the scores, cut to the top k (a bug of the printed "
                "function)", "the kept weights must sum to one: mask the other scores with "
                "-inf before the softmax", partial(top_k, renormalise=False)),
        Mistake("only k - 1 keys kept, the k-th best dropped (> instead of >=, a bug of the "
                "printed function)", "keep the k largest scores: scores >= the k-th largest, "
                "scores.topk(k, dim=-1).values[..., -1:] (the last of the k, not the first)",
                partial(top_k, strict=True)),
        Mistake("the dropped keys' scores set to 0 instead of -inf",
                "a score of 0 still gets weight exp(0) in the softmax: fill the dropped "
                "scores with float('-inf'), so their weight is exactly 0",
                partial(top_k, fill=0.0)),
        Mistake("the cut at the (k+1)-th largest score (topk(k + 1)), which does not exist "
                "when k = S", "k can be S (every key kept): cut at the k-th largest itself, "
                "scores >= scores.topk(k, dim=-1).values[..., -1:]",
                partial(top_k, beyond=True)),
        Mistake("k + 1 keys kept (the cut at the (k+1)-th largest score, kept)",
                "keep exactly k keys: scores >= scores.topk(k, dim=-1).values[..., -1:]",
                partial(top_k, extra=True)),
        Mistake("the keep mask inverted: the k best keys dropped, the others kept",
                "masked_fill puts the fill where the mask is True: fill the dropped keys, "
                "scores.masked_fill(~keep, float('-inf')) (or scores < kth)",
                partial(top_k, inverted=True)),
        Mistake("the threshold at the k-th smallest score (kthvalue, or an ascending sort), "
                "which keeps S - k + 1 keys", "kthvalue(k) and sort() count from the smallest: "
                "the k-th largest is scores.topk(k, dim=-1).values[..., -1:]",
                partial(top_k, smallest=True)),
        Mistake("the scores divided by sqrt(E)", "this lookup has no scale: the scores are "
                "query @ keys^T as they are", partial(top_k, scaled=True)),
        Mistake("the weights returned, (..., L, S)", "the lookup returns what the weights "
                "select: weights @ values, (..., L, Ev)", partial(top_k, weights=True)),
    ],
    error_hints=[("selected index k out of range", "topk along the keys: dim=-1; and k can be "
                  "S (every key kept): take the k-th largest, topk(k), not topk(k + 1)")],
)

# --------------------------------------------------------------- assignment 3: no self-attention


def no_self(x: Tensor, W_q: Tensor, W_k: Tensor, W_v: Tensor, *, untransposed: bool = False,
            scale_by_input: bool = False, fill: float = float("-inf"),
            after: bool = False, only_self: bool = False) -> Tensor:
    """Self-attention where no token attends to itself (diagonal masked); or a bug put back
    (``after``: the diagonal weight zeroed after the softmax, the rows not renormalised;
    ``only_self``: every token but itself masked, the mask inverted)."""
    if untransposed:
        q, k, v = x @ W_q, x @ W_k, x @ W_v
    else:
        q, k, v = x @ W_q.T, x @ W_k.T, x @ W_v.T
    width = x.shape[-1] if scale_by_input else q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(width)
    eye = torch.eye(x.shape[-2], dtype=torch.bool, device=x.device)
    eye = ~eye if only_self else eye
    if after:
        return torch.softmax(scores, dim=-1).masked_fill(eye, 0.0) @ v
    return torch.softmax(scores.masked_fill(eye, fill), dim=-1) @ v


SELF_ATTENTION_NO_SELF = Exercise(
    name="self_attention_no_self", reference=via_float32(no_self), legend="(..., L, d_v)",
    forbid=TORCH_ATTENTION,
    cases=[Case("x (L=4, d=6), W_q and W_k (3, 6), W_v (5, 6)",
                _inputs((4, 6), (3, 6), (3, 6), (5, 6)), F64),
           Case("batched x (B=2, L=5, d=4), W_q and W_k (8, 4), W_v (4, 4)",
                _inputs((2, 5, 4), (8, 4), (8, 4), (4, 4)), F32),
           Case("x (L=3, d=5), square weights (5, 5)", _inputs((3, 5), (5, 5), (5, 5), (5, 5)),
                F64),
           Case("x (L=4, d=6), W_q and W_k (3, 6), W_v (5, 6), every score very negative "
                "(near -900): a finite fill outweighs the other tokens",
                _negative(_inputs((4, 6), (3, 6), (3, 6), (5, 6)), projected=True), F64),
           half_case("batched x (B=2, L=5, d=6), W_q and W_k (4, 6), W_v (3, 6), each divided "
                     "by sqrt(6)", _initialised(_inputs((2, 5, 6), (4, 6), (4, 6), (3, 6))))],
    mistakes=[
        Mistake("the diagonal filled with 0 instead of -inf (a bug of the printed function)",
                "a score of 0 still gets weight: fill the diagonal with -inf",
                partial(no_self, fill=0.0)),
        Mistake("scaled by sqrt of x's width instead of the queries' (a bug of the printed "
                "function)", "the scores are divided by sqrt(d_k), d_k = W_q.shape[0]",
                partial(no_self, scale_by_input=True)),
        Mistake("x @ W instead of x @ W.T (a bug of the printed function)",
                "W_q is (d_k, d): the queries are x @ W_q.T", partial(no_self, untransposed=True)),
        Mistake("the diagonal zeroed after the softmax (the rows no longer sum to one)",
                "mask the diagonal's scores with -inf before the softmax, so the other "
                "tokens' weights still sum to one", partial(no_self, after=True)),
        Mistake("the mask inverted: each token attends only to itself (the other tokens "
                "masked)", "masked_fill fills where its mask is True: fill the diagonal, "
                "scores.masked_fill(torch.eye(L, dtype=torch.bool), -inf); filling ~eye (the "
                "allowed pairs) leaves each token only itself, and the output is its own value",
                partial(no_self, only_self=True)),
    ],
    error_hints=[("cannot be multiplied", "W_q is (d_k, d): the queries are x @ W_q.T")],
)
