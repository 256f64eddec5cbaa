"""Assignments 1 to 4: a **variation** each, a function the reference :mod:`qkv` does not contain
(see :mod:`._beyond`): Bahdanau attention with a coverage term (1), a sparsemax lookup whose
weights can be exactly 0 (2), self-attention with a learned null key-value pair (3) and
attention whose softmax has an extra 1 in its denominator (4).

Each reference is written here with torch; each :class:`Mistake` is it with one error put back.
"""

from __future__ import annotations

from functools import partial
from typing import Tuple

import torch
from torch import Tensor

from .harness import Case, Exercise, half_case, Mistake, picked, randn, via_float32
from .mistakes.attention import TORCH_ATTENTION, qkv_case, qkv_inputs, row_softmax
from ._variations_null import SELF_ATTENTION_WITH_NULL, null_slot  # noqa: F401 (assignment 3)

F32, F64 = torch.float32, torch.float64


# --------------------------------------------------------------- assignment 1: coverage


def coverage(query: Tensor, keys: Tensor, cover: Tensor, W_q: Tensor, W_k: Tensor, w_c: Tensor,
             v_a: Tensor, *, use: str = "inside", dim: int = -1, stable: bool = True,
             act: bool = True, swap_w: bool = False, context: str = "weighted",
             swap_out: bool = False) -> Tuple[Tensor, Tensor]:
    """Bahdanau attention with a coverage term, ``e_j = v_a . tanh(W_q s + W_k h_j + w_c c_j)``:
    ``(context (B, He), weights (B, S))``; or one mistake put back (``use="none"``: the coverage
    left out, ``"after"``: ``w_c c_j`` added after the tanh)."""
    if swap_w:
        W_q, W_k = W_k, W_q
    hidden = (query @ W_q.T)[:, None, :] + keys @ W_k.T  # (B, S, A)
    term = cover[..., None] * w_c  # (B, S, A)
    if use == "inside":
        hidden = hidden + term
    e = (torch.tanh(hidden) if act else hidden)
    if use == "after":
        e = e + term
    w = row_softmax(e @ v_a, dim=dim, stable=stable)
    c = (w[..., None] * keys).sum(1) if context == "weighted" else keys.mean(1)
    return (w, c) if swap_out else (c, w)


def _coverage_case(B, S, Dq, Dk, A, steps=1.0, big=1.0):
    def build(gen, device, dtype):
        ts = (randn(gen, B, Dq), randn(gen, B, S, Dk), randn(gen, B, S).abs() * steps,
              randn(gen, A, Dq) / Dq**0.5, randn(gen, A, Dk) / Dk**0.5, randn(gen, A),
              randn(gen, A) * big)
        return tuple(t.to(device=device, dtype=dtype) for t in ts), {}
    return build


def _coverage_exercise(item: int) -> Exercise:
    v = partial(picked, i=item)
    return Exercise(
        name="coverage_attention", reference=via_float32(picked(coverage, item)),
        legend="(B, S) for the weights" if item else "(B, He) for the context",
        cases=[Case("B=3, S=5, query_dim=4, key_dim=6, attn_dim=7", _coverage_case(3, 5, 4, 6, 7), F32),
               Case("B=2, S=4, query_dim=key_dim=attn_dim=5", _coverage_case(2, 4, 5, 5, 5), F64),
               Case("B=4, S=7, query_dim=3, key_dim=5, attn_dim=6 and coverage up to about 8",
                    _coverage_case(4, 7, 3, 5, 6, steps=3.0), F64),
               Case("B=2, S=6, query_dim=key_dim=attn_dim=4 and large scores (v_a times 1000)",
                    _coverage_case(2, 6, 4, 4, 4, big=1000.0), F32, rtol=1e-3, atol=1e-4),
               half_case("B=3, S=5, query_dim=4, key_dim=6, attn_dim=7",
                         _coverage_case(3, 5, 4, 6, 7), torch.bfloat16)],
        mistakes=[
            Mistake("returning (weights, context) instead of (context, weights)",
                    "return the pair in the order (context, weights)", v(partial(coverage, swap_out=True))),
            Mistake("the coverage left out (plain Bahdanau attention)",
                    "add w_c * c_j to W_q s + W_k h_j inside the tanh: coverage[..., None] * w_c",
                    v(partial(coverage, use="none"))),
            Mistake("w_c c_j added after the tanh", "the coverage term goes inside the tanh, with "
                    "W_q s and W_k h_j: v_a . tanh(W_q s + W_k h_j + w_c c_j)",
                    v(partial(coverage, use="after"))),
            Mistake("softmax over the batch instead of over the encoder positions",
                    "each sequence's weights over its S encoder states sum to one: dim=-1",
                    v(partial(coverage, dim=0))),
            Mistake("a softmax that overflows on large scores", "subtract each row's maximum before exp",
                    v(partial(coverage, stable=False))),
            Mistake("no tanh", "the score is v_a . tanh(W_q s + W_k h_j + w_c c_j)",
                    v(partial(coverage, act=False))),
            Mistake("W_q and W_k swapped", "W_q projects the decoder state (the query), W_k the "
                    "encoder states", v(partial(coverage, swap_w=True))),
            Mistake("the context is the mean of the encoder states (weights unused)",
                    "the context is the weighted sum (weights[..., None] * keys).sum(1)",
                    v(partial(coverage, context="mean"))),
        ],
        error_hints=[("size of tensor", "W_q s is (B, attn_dim), W_k h and the coverage term "
                      "(B, S, attn_dim): add a position axis to the first, (s @ W_q.T)[:, None, :], "
                      "and a last axis to the coverage, coverage[..., None] * w_c")],
    )


COVERAGE_WEIGHTS, COVERAGE_CONTEXT = _coverage_exercise(1), _coverage_exercise(0)

# --------------------------------------------------------------- assignment 2: sparsemax


def sparsemax(z: Tensor, dim: int = -1, *, minus_one: bool = True, clamp: bool = True,
              whole: bool = False, extra: int = 0, at_k: bool = False) -> Tensor:
    """The Euclidean projection of ``z`` onto the simplex along ``dim`` (Martins & Astudillo,
    2016), or one mistake put back (``minus_one=False``: the threshold without its ``- 1``;
    ``clamp=False``: negative weights kept; ``whole``: the threshold from every score, not
    the support's, which is also what sorting the scores in ascending order gives; ``extra``:
    a support that many scores too large, the condition's off-by-one; ``at_k``: the sum read at
    index k, not k - 1, still divided by k)."""
    z = z.transpose(dim, -1)
    srt = z.sort(dim=-1, descending=True).values
    cum = srt.cumsum(-1)
    k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype, device=z.device)
    support = ((1 + k * srt > cum).sum(-1, keepdim=True) + extra).clamp(1, z.shape[-1])
    if whole:
        support = torch.full_like(support, z.shape[-1])
    at = (support if at_k else support - 1).clamp_max(z.shape[-1] - 1)
    tau = (cum.gather(-1, at) - (1.0 if minus_one else 0.0)) / support.to(z.dtype)
    p = z - tau
    return (p.clamp_min(0) if clamp else p).transpose(dim, -1)


def sparse_lookup(query: Tensor, keys: Tensor, values: Tensor, temperature: float = 1.0, *,
                  soft: bool = False, dim: int = -1, times: bool = False, swap_out: bool = False,
                  **bug) -> Tuple[Tensor, Tensor]:
    """``(output, weights)``: weights ``sparsemax(query @ keys^T / temperature)`` over the keys,
    output ``weights @ values``; or one mistake put back."""
    scores = query @ keys.transpose(-2, -1)
    scores = scores * temperature if times else scores / temperature
    w = torch.softmax(scores, dim=dim) if soft else sparsemax(scores, dim=dim, **bug)
    return (w, w @ values) if swap_out else (w @ values, w)


#: float64's absolute tolerance for sparsemax: the text allows tau by bisection stopped within
#: 1e-6 (weights up to about 5e-7 off); the catalogue's mistakes are all off by more than 1e-2.
_BISECTION = 1e-5


def _sparse_exercise(item: int) -> Exercise:
    v = partial(picked, i=item)
    return Exercise(
        name="sparsemax_lookup", reference=via_float32(picked(sparse_lookup, item)), forbid=TORCH_ATTENTION,
        legend="(..., L, S) for the weights" if item else "(..., L, Ev) for the output",
        cases=[Case("L=3 queries, S=6 keys, E=4, Ev=2 (temperature left out)",
                    qkv_case((), 3, 6, 4, 2), F64, atol=_BISECTION),
               Case("batched (B=2), L=4, S=8, E=3, Ev=5 and temperature=0.5",
                    qkv_case((2,), 4, 8, 3, 5, temperature=0.5), F32),
               Case("batched (B=2, H=2), L=3, S=5, E=4, Ev=3 and temperature=4.0 (flatter)",
                    qkv_case((2, 2), 3, 5, 4, 3, temperature=4.0), F64,
                    atol=_BISECTION),
               Case("L=2, S=7, E=6, Ev=3 and temperature=20.0 (most keys kept)",
                    qkv_case((), 2, 7, 6, 3, temperature=20.0), F64,
                    atol=_BISECTION),
               half_case("batched (B=2), L=3, S=6, E=4, Ev=3 and temperature=2.0",
                         qkv_case((2,), 3, 6, 4, 3, temperature=2.0))],
        mistakes=[
            Mistake("returning (weights, output) instead of (output, weights)",
                    "return the pair in the order (output, weights)",
                    v(partial(sparse_lookup, swap_out=True))),
            Mistake("a softmax (no weight is exactly 0)", "sparsemax subtracts a threshold tau "
                    "from the scores and clips at 0: max(z - tau, 0)", v(partial(sparse_lookup, soft=True))),
            Mistake("the threshold without its - 1 (the weights do not sum to one)",
                    "tau = (sum of the k largest scores - 1) / k", v(partial(sparse_lookup, minus_one=False))),
            Mistake("the threshold from every score, not only the support's",
                    "sort each row in descending order; k is the number of sorted scores z_(j) with "
                    "1 + j z_(j) > z_(1) + ... + z_(j); tau averages those k only", v(partial(sparse_lookup, whole=True))),
            Mistake("negative weights kept (no clip at 0)", "the weights are max(z - tau, 0)",
                    v(partial(sparse_lookup, clamp=False))),
            Mistake("the support one score too large (k + 1 scores in tau)",
                    "k counts the sorted scores z_(j) with 1 + j z_(j) > z_(1) + ... + z_(j), "
                    "j from 1: check where your count starts and that the comparison is strict",
                    v(partial(sparse_lookup, extra=1))),
            Mistake("tau read at index k instead of k - 1 (off by one: the sum of k + 1 scores, "
                    "divided by k)", "the k largest sorted scores are at indices 0..k-1: "
                    "tau = (cum.gather(-1, k - 1) - 1) / k", v(partial(sparse_lookup, at_k=True))),
            Mistake("sparsemax over the queries instead of the keys",
                    "each query's weights over the keys sum to one: along dim=-1",
                    v(partial(sparse_lookup, dim=-2))),
            Mistake("scores multiplied by the temperature", "divide the scores by the temperature",
                    v(partial(sparse_lookup, times=True))),
            Mistake("the temperature ignored", "divide the scores by the temperature before the "
                    "sparsemax: a lower temperature keeps fewer keys",
                    v(lambda query, keys, values, temperature=1.0: sparse_lookup(query, keys, values))),
        ],
    )


SPARSE_WEIGHTS, SPARSE_OUTPUT = _sparse_exercise(1), _sparse_exercise(0)

# --------------------------------------------------------------- assignment 3: a null slot
# In its own module, :mod:`._variations_null` (imported above).

# --------------------------------------------------------------- assignment 4: off by one


def quiet(query: Tensor, key: Tensor, value: Tensor, scale=None, *, one: str = "right",
          stable: bool = True, scale_power: float = 0.5, dim: int = -1,
          ignore_scale: bool = False) -> Tensor:
    """Attention whose weights are ``exp(s_j) / (1 + sum_k exp(s_k))`` (softmax "off by one"),
    ``s = query @ key^T * scale``; or one mistake put back (``one``: ``"none"`` (a plain
    softmax), ``"shifted"`` (the 1 added after subtracting the maximum), ``"each"`` (1 added to
    every term))."""
    E = query.shape[-1]
    if scale is None or ignore_scale:
        scale = 1 / E ** scale_power
    s = query @ key.transpose(-2, -1) * scale
    m = s.amax(dim=dim, keepdim=True).clamp_min(0) if stable else torch.zeros_like(s[..., :1])
    e = (s - m).exp()
    n = s.shape[dim]  # "each": sum_k (exp(s_k) + 1) = sum_k exp(s_k) + S
    extra = {"right": (-m).exp(), "none": 0.0, "shifted": 1.0, "each": n * (-m).exp()}[one]
    total = e.sum(dim=dim, keepdim=True) + extra
    return (e / total) @ value


def _quiet_case(batch, L, S, E, Ev, big=0.0, sign=1.0, **kw):
    def build(gen, device, dtype):
        q, k, v = qkv_inputs(gen, device, dtype, batch, L, S, E, Ev, big)
        if sign < 0:
            k[..., 0] = -k[..., 0]
        return (q, k, v), kw
    return build


QUIET_ATTENTION = Exercise(
    name="quiet_attention", reference=via_float32(quiet), legend="(..., L, Ev)", forbid=TORCH_ATTENTION,
    cases=[Case("unbatched input with L=3, S=5, E=4, Ev=6 (scale left out)",
                _quiet_case((), 3, 5, 4, 6), F32),
           Case("batched input (B=2, H=3) with L=4, S=6, E=8, Ev=3 and scale=0.3",
                _quiet_case((2, 3), 4, 6, 8, 3, scale=0.3), F64),
           Case("input with large scores (near +800)", _quiet_case((2,), 4, 5, 4, 3, big=40.0), F64),
           # `scale or 1 / sqrt(E)` takes a given scale of 0 for none.
           Case("input with scale=0.0 (every score 0)", _quiet_case((2,), 3, 4, 4, 2, scale=0.0),
                F64),
           Case("input with very negative scores (near -800): every weight near 0",
                _quiet_case((2,), 3, 5, 4, 3, big=40.0, sign=-1.0), F64),
           half_case("batched input (B=2, H=2) with L=4, S=6, E=8, Ev=3",
                     _quiet_case((2, 2), 4, 6, 8, 3))],
    mistakes=[
        Mistake("no 1 in the denominator (a plain softmax)", "the weights are exp(s_j) / (1 + "
                "sum_k exp(s_k)): a row may give less than 1 in all", partial(quiet, one="none")),
        Mistake("the 1 added after subtracting the maximum m", "after subtracting m the extra 1 "
                "is exp(-m) too: exp(s_j - m) / (exp(-m) + sum_k exp(s_k - m))",
                partial(quiet, one="shifted")),
        Mistake("1 added to every term of the sum (S in the denominator)",
                "add 1 once to the row's sum: 1 + sum_k exp(s_k)", partial(quiet, one="each")),
        Mistake("no maximum subtracted: exp overflows", "subtract m = max(0, max_k s_k) from the "
                "scores, and use exp(-m) for the 1", partial(quiet, stable=False)),
        Mistake("scale 1/E instead of 1/sqrt(E)", "the scores are multiplied by 1/sqrt(E) unless "
                "scale is given", partial(quiet, scale_power=1.0)),
        Mistake("the scale argument ignored", "when scale is given, multiply the scores by it "
                "(0.0 too: test `scale is None`, not `scale or ...`)",
                partial(quiet, ignore_scale=True)),
        Mistake("the weights normalised over the queries (dim=-2)",
                "each query's sum runs over the keys: dim=-1", partial(quiet, dim=-2)),
    ],
    error_hints=[("size of tensor", "key.T reverses every axis of a batched tensor: "
                  "key.transpose(-2, -1)")],
)
