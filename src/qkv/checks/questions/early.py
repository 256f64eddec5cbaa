"""The conceptual questions of assignments 1 to 5 (see :mod:`.kinds`).

Each assignment asks its questions in a markdown cell that prints the choices as written here
(``tests/checks/test_checks_questions.py`` checks that, and checks every right answer against
:mod:`qkv`).
"""

from __future__ import annotations

import torch

import qkv

from .kinds import Choice, Computed, Number

def _additive_parameters(attn_dim: int) -> int:
    """How many parameters the additive score of ``qkv.AdditiveAttention(64, 32, attn_dim)``
    has, built on the meta device (no memory, no random draws)."""
    with torch.device("meta"):
        return sum(p.numel() for p in qkv.AdditiveAttention(64, 32, attn_dim).parameters())


# Per student: attn_dim comes from the student's seed (the assignment says how).
BOTTLENECK_Q1 = Computed(
    id="bottleneck_q1",
    params=("attn_dim",),
    answer=_additive_parameters,
    why=lambda attn_dim: (f"W_q is ({attn_dim}, 64), W_k is ({attn_dim}, 32) and v_a is "
                          f"({attn_dim},): {attn_dim * 64} + {attn_dim * 32} + {attn_dim}"),
    wrong=lambda attn_dim: {
        attn_dim * 96: "that is W_q and W_k only: v_a, which turns each tanh vector into one "
                       "score, has attn_dim parameters too",
        attn_dim * 129: "W_k reads the keys, of width key_dim = 32, not 64: it is "
                        "(attn_dim, 32)",
        attn_dim * 65: "W_k counts too: the keys are projected to attn_dim as the query is",
        attn_dim * 99: "that counts biases for W_q and W_k: the additive score has none, "
                       "its parameters are W_q, W_k and v_a alone",
        attn_dim * 99 + 1: "that counts biases: the additive score has none, its parameters "
                           "are W_q, W_k and v_a alone",
    },
    hint="W_q is (attn_dim, query_dim), W_k is (attn_dim, key_dim) and v_a is (attn_dim,): "
         "add the three sizes",
    examples=tuple({"attn_dim": 8 * (seed % 6 + 1)} for seed in range(6)),
)

BOTTLENECK_Q2 = Choice(
    id="bottleneck_q2",
    choices={"a": "(4, 10)", "b": "(4, 32)", "c": "(4, 10, 16)", "d": "(4, 64)"},
    key="fa0a5e0fbb1facf1e7f47b77",
    explain={
        "a": "one weight per encoder state, for each sequence of the batch: (B, S)",
        "b": "(B, He) is the context vector's shape, the weighted sum of the keys; "
             "the weights have one entry per key",
        "c": "that is W_k applied to every key, before tanh and v_a reduce attn_dim to "
             "one score per key",
        "d": "that is the query's shape; the weights have one entry per key",
    },
)

LOOKUP_Q1 = Choice(
    id="lookup_q1",
    choices={"a": "the mean of all the values", "b": "the value of the best-matching key",
             "c": "a vector of zeros", "d": "the value of the last key"},
    key="73f8d2e0f547eb1d43092e46",
    explain={
        "a": "that is the other end: as the temperature grows, every weight tends to 1 / S",
        "b": "the softmax of scores / temperature puts all its weight on the largest score as the "
             "temperature goes to 0: the hard lookup",
        "c": "the weights still sum to one, so the result stays a weighted mean of the values",
        "d": "the order of the keys plays no role in a lookup: only the scores do",
    },
)

LOOKUP_Q2 = Choice(
    id="lookup_q2",
    choices={"a": "they do not change", "b": "they are all multiplied by exp(c)",
             "c": "they concentrate on the largest score", "d": "they become uniform"},
    key="1e6b74edd5ee317b3079da9a",
    explain={
        "a": "exp(s + c) = exp(c) exp(s), and exp(c) cancels in the normalisation: that is why "
             "subtracting the row's max is safe",
        "b": "the sum they are divided by is multiplied by exp(c) as well: the factor cancels",
        "c": "multiplying the scores (a lower temperature) does that; adding a constant "
             "moves them all together",
        "d": "the differences between the scores are unchanged, and only they matter",
    },
)

QKV_Q1 = Choice(
    id="qkv_q1",
    choices={"a": "(2, 5, 8)", "b": "(2, 5, 12)", "c": "(2, 5, 16)", "d": "(2, 5, 5)"},
    key="743979e079f08548eeb5d7de",
    explain={
        "a": "8 is the width of the queries and keys: it is summed away in the scores",
        "b": "each output is a weighted mean of the values, and W_v (12, 16) makes values of width 12",
        "c": "16 is the width of x; the output has the values' width (only an output "
             "projection would bring it back to 16)",
        "d": "(2, 5, 5) is the shape of the attention weights, one row per query",
    },
)

QKV_Q2 = Choice(
    id="qkv_q2",
    choices={"a": "the same outputs, in the new order of the tokens",
             "b": "the same outputs, in the original order",
             "c": "different outputs", "d": "the same output at every position"},
    key="8964688a4f31417a652cf802",
    explain={
        "a": "without positions, each output depends on its own token and on the set of tokens, "
             "not on their order: self-attention is permutation equivariant",
        "b": "each output belongs to its query token, and moves with it",
        "c": "each output is a sum over all keys and values, and a sum does not depend on "
             "the order of its terms",
        "d": "each query has its own scores, so its own weights and its own output",
    },
)

SCALING_Q1 = Number(
    id="scaling_q1",
    key="65ad963f029bf90d75c8b9be",
    why="each product q_i k_i has variance 1, and the variances of 64 independent terms add",
    wrong=lambda: {
        8: "8 = sqrt(64) is the standard deviation of q . k, not its variance",
        1: "1 is the variance after dividing the score by sqrt(d_k); the question asks "
           "before the scale",
        0.125: "1 / sqrt(64) is the scale itself, not a variance",
        4096: "the variances of the 64 terms add, each 1: d_k, not d_k squared",
    },
    hint="each q_i k_i has mean 0 and variance 1, and the score sums d_k of them",
)

SCALING_Q2 = Choice(
    id="scaling_q2",
    choices={"a": "it makes each row of weights sum to one",
             "b": "it keeps the scores' variance near 1 whatever d_k",
             "c": "it stops exp from overflowing", "d": "it normalises the values"},
    key="8c23d46c2b7a7553fe9ef04a",
    explain={
        "a": "the softmax does that, with or without the scale",
        "b": "so the softmax does not saturate on one key as d_k grows, and its gradient does "
             "not vanish",
        "c": "subtracting each row's max does that; a scaled score can still overflow "
             "without it",
        "d": "the scale touches the scores only; the values are mixed as they are",
    },
)

def _mha_parameters(embed_dim: int) -> int:
    """How many parameters ``qkv.MultiHeadAttention(embed_dim, 8)`` has, built on the meta
    device: no memory, no random draws (a check must leave the global random state alone)."""
    with torch.device("meta"):
        return sum(p.numel() for p in qkv.MultiHeadAttention(embed_dim, 8).parameters())


def _mha_wrong(embed_dim: int) -> dict:
    D = embed_dim
    return {
        4 * D * D: "that forgets the biases: bias=True gives each projection embed_dim of them",
        3 * (D * D + D): "that forgets the output projection, the fourth nn.Linear",
        3 * D * D: "that forgets the output projection and the biases",
        (4 * D * D + 4 * D) // 8: "that counts one head: the 8 heads share the four "
                                  "projections, each head reading embed_dim / 8 of their outputs",
        8 * (4 * D * D + 4 * D): "the heads do not have projections of their own: they split "
                                 "the outputs of the shared ones",
        (4 * D * D + 4 * D) / 10**6: "that is in millions: answer the count itself, every "
                                     "parameter one (an integer), not millions of them",
    }


# Per student: embed_dim comes from the student's seed (the assignment says how).
MULTI_HEAD_Q1 = Computed(
    id="multi_head_q1",
    params=("embed_dim",),
    answer=_mha_parameters,
    why=lambda embed_dim: (f"four nn.Linear({embed_dim}, {embed_dim}) (queries, keys, values, "
                           f"output), each {embed_dim} * {embed_dim} weights and {embed_dim} "
                           "biases"),
    wrong=_mha_wrong,
    hint="count the weights and biases of the four projections (q, k, v and the output)",
    examples=tuple({"embed_dim": 64 * (seed % 8 + 1)} for seed in range(8)),
)

MULTI_HEAD_Q2 = Choice(
    id="multi_head_q2",
    choices={"a": "(2, 8, 10, 64)", "b": "(2, 10, 8, 64)", "c": "(2, 8, 10, 512)",
             "d": "(16, 10, 64)"},
    key="9f5a9e68a094135a0cad5bbb",
    explain={
        "a": "each head gets D // H = 64 dims, and the heads come before the sequence so that "
             "attention runs over L in every head",
        "b": "that is the view before the transpose: the heads must come before L",
        "c": "each head gets D // H = 64 of the 512 dims, not all of them",
        "d": "batch and heads stay two dims, (B, H, L, D // H)",
    },
)

QUESTIONS = (BOTTLENECK_Q1, BOTTLENECK_Q2, LOOKUP_Q1, LOOKUP_Q2, QKV_Q1, QKV_Q2,
             SCALING_Q1, SCALING_Q2, MULTI_HEAD_Q1, MULTI_HEAD_Q2)
