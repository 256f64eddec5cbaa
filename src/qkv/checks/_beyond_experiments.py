"""The experiments of assignments 2, 3, 4 and 8 that draw only random numbers (no model):
each is a measurement from a generator, judged by :mod:`._experiment` against the same
experiment written here, with the slips it names seed for seed.

- ``lookup_entropy`` (2): the entropy of soft-lookup weights as the temperature changes;
- ``self_weight`` (3): the weight a token gives itself, with and without shared W_q = W_k;
- ``max_weight`` (4): the largest weight of a row, with and without the 1/sqrt(d_k) scale;
- ``fp16_overflow_rate`` (8): how often a naive float16 softmax overflows.

All but ``self_weight`` are means over many independent rows or queries, light-tailed enough
for their spread to be compared (``spread``): measured on one row or query instead of the
256, 16 or 32 asked for, a number has the right mean but varies 4 to 16 times as much (or,
where one row's number is nearly always the same, far less). Over 60 tries of each setting, a
right answer's spread was 0.5 to 2.0 times the reference's (fp16_overflow_rate's, a coarse
fraction, reached 4 once in 100,000 tries: it is allowed 12).
"""

from __future__ import annotations

import math
from functools import partial

import torch

import qkv

from ._experiment import SPREAD, Experiment
from .harness import Mistake

__all__: list = []

# --------------------------------------------------------------- assignment 2: lookup entropy

#: Found by a student walk: the same distribution, so only the numbers seed for seed tell it.
_KEYS_FIRST = ("the keys drawn before the queries (the text draws the queries first)",
               "draw the queries first, then the keys, from the generator: the same seed then "
               "gives the experiment's numbers")


def lookup_entropy(temperature: float, generator: torch.Generator, *, multiply: bool = False,
                   bits: bool = False, root: bool = False, dim: int = -1,
                   sign: float = -1.0, reduce=lambda h: h.sum(dim=-1).mean(),
                   keys_first: bool = False) -> float:
    """The mean entropy (nats) of the soft-lookup weights of 16 queries over 32 keys (E=8); or
    with a slip (``multiply``: by the temperature; ``bits``: log2; ``root``: also / sqrt(8);
    ``dim``: the softmax axis; ``sign=1``: the minus sign dropped; ``reduce``: how the
    (16, 32) terms -w log w become one number; ``keys_first``: the keys drawn first)."""
    if keys_first:
        k = torch.randn(32, 8, generator=generator)
    q = torch.randn(16, 8, generator=generator)
    if not keys_first:
        k = torch.randn(32, 8, generator=generator)
    scores = q @ k.T * temperature if multiply else q @ k.T / temperature
    w = torch.softmax(scores / math.sqrt(8) if root else scores, dim=dim)
    log = w.clamp_min(1e-30).log2() if bits else w.clamp_min(1e-30).log()
    return reduce(sign * (w * log)).item()


LOOKUP_ENTROPY = Experiment(
    name="lookup_entropy", reference=lookup_entropy, settings=((0.1,), (1.0,), (10.0,)),
    quantity="mean entropy of the weights", helpers={"softmax": qkv.softmax},
    mistakes=(
        Mistake("temperature multiplies the scores instead of dividing them",
                "a high temperature flattens the weights: q @ k.T / temperature",
                partial(lookup_entropy, multiply=True)),
        Mistake("entropy in bits (log2) instead of nats", "use the natural log: w.log()",
                partial(lookup_entropy, bits=True)),
        Mistake("scores also divided by sqrt(E)", "this lookup's scores are q @ k.T / temperature,"
                " with no 1/sqrt(E)", partial(lookup_entropy, root=True)),
        # Found by a student walk: its mean is near the bits slip's at temperature 0.1.
        Mistake("softmax over the queries (dim=0)", "each query's weights over the keys sum to "
                "one: softmax(dim=-1), then the entropy of each row", partial(lookup_entropy,
                                                                            dim=0)),
        Mistake("the minus sign dropped (a negative entropy)", "an entropy is -sum(w * log w): "
                "log w <= 0, so it is never negative", partial(lookup_entropy, sign=1.0)),
        # Found by a student walk: the first query's entropy has the right mean (its spread
        # alone told it, and not on every seed); the other two are exactly 1/32 and 16 times.
        Mistake("the entropy of one query, not the mean over the 16", "take the entropy of "
                "every row, then the mean over all 16 queries: .sum(dim=-1).mean()",
                partial(lookup_entropy, reduce=lambda h: h[0].sum())),
        Mistake("the mean over the keys too (1/32 of the entropy)", "an entropy is a sum over "
                "the keys, -sum_j w_j log w_j: .sum(dim=-1), then .mean() over the queries",
                partial(lookup_entropy, reduce=lambda h: h.mean())),
        Mistake("summed over the queries instead of averaged (16 times the entropy)",
                "the entropy of each row (.sum(dim=-1)), then their mean over the queries",
                partial(lookup_entropy, reduce=lambda h: h.sum())),
        Mistake(*_KEYS_FIRST, partial(lookup_entropy, keys_first=True)),
    ),
    spread=SPREAD,
    hint="draw 16 queries (16, 8) then 32 keys (32, 8) from the generator, take the softmax of "
         "q @ k.T / temperature over the keys and return the mean over the queries of "
         "-sum(w * log w), in nats")

# --------------------------------------------------------------- assignment 3: self weight


def self_weight(shared: bool, generator: torch.Generator, *, div: float = 4.0,
                div_k: float = 4.0, dim: int = -1) -> float:
    """The mean weight 16 random tokens (d=16) give themselves, with W_k = W_q (``shared``) or
    an independent W_k; weights of shape (8, 16), standard normal / 4; or with a slip
    (``div``, ``div_k``: what the weights, or the independent W_k, are divided by; ``dim``:
    the softmax axis)."""
    x = torch.randn(16, 16, generator=generator)
    W_q = torch.randn(8, 16, generator=generator) / div
    W_k = W_q if shared else torch.randn(8, 16, generator=generator) / min(div, div_k)
    scores = (x @ W_q.T) @ (x @ W_k.T).T / math.sqrt(8)
    return torch.softmax(scores, dim=dim).diagonal().mean().item()


SELF_WEIGHT = Experiment(
    name="self_weight", reference=self_weight, settings=((True,), (False,)),
    quantity="mean weight a token gives itself",
    mistakes=(
        Mistake("weights not divided by 4", "W_q and W_k are torch.randn(8, 16) / 4",
                partial(self_weight, div=1.0)),
        # Without sharing, every key is as likely as the token itself whatever the scale: the
        # mean is 1/16 either way, and only the numbers seed for seed tell this slip apart.
        Mistake("the independent W_k not divided by 4", "W_k, like W_q, is torch.randn(8, 16) "
                "/ 4", partial(self_weight, div_k=1.0)),
        # With shared weights the scores are symmetric and both axes give the same diagonal.
        Mistake("softmax over the queries (dim=0)", "each token's weights over the keys sum to "
                "one: softmax(dim=-1)", partial(self_weight, dim=0)),
    ),
    hint="draw x (16, 16), then W_q (8, 16), then (only when not shared) W_k (8, 16) from the "
         "generator, divide the weights by 4, and return the mean of the diagonal of "
         "softmax((x W_q^T)(x W_k^T)^T / sqrt(8))")

# --------------------------------------------------------------- assignment 4: the largest weight


def max_weight(d_k: int, scaled: bool, generator: torch.Generator, *, power: float = 0.5,
               always: bool = False, dim: int = -1, max_dim: int = -1,
               median: bool = False, inverted: bool = False, take=None,
               keys_first: bool = False) -> float:
    """The mean over 32 queries of the largest weight each gives to 32 random keys (width d_k);
    or with a slip (``power``: divided by d_k ** power; ``always``: ``scaled`` ignored;
    ``dim``: the softmax axis; ``max_dim``: the axis the largest is taken along; ``median``:
    the median over the queries; ``inverted``: divided only when ``scaled`` is False; ``take``:
    the number made of the (32, 32) weights otherwise; ``keys_first``: the keys drawn first)."""
    q, k = (torch.randn(32, d_k, generator=generator) for _ in "qk")
    q, k = (k, q) if keys_first else (q, k)
    scores = q @ k.T / (d_k ** power if (scaled != inverted) or always else 1.0)
    if take:
        return take(torch.softmax(scores, dim=dim)).item()
    largest = torch.softmax(scores, dim=dim).max(dim=max_dim).values
    return (largest.median() if median else largest.mean()).item()


MAX_WEIGHT = Experiment(
    name="max_weight", reference=max_weight,
    settings=((16, True), (512, True), (512, False)),
    quantity="mean largest weight", helpers={"softmax": qkv.softmax},
    mistakes=(
        Mistake("scores divided by d_k instead of sqrt(d_k)", "the scale is 1/sqrt(d_k)",
                partial(max_weight, power=1.0)),
        Mistake("scaled ignored (the scores always divided)",
                "divide by sqrt(d_k) only when scaled is True", partial(max_weight, always=True)),
        Mistake("scaled inverted (the scores divided only when scaled is False)",
                "divide by sqrt(d_k) when scaled is True: if scaled:, not if not scaled:",
                partial(max_weight, inverted=True)),
        Mistake("softmax over the queries (dim=0)", "each query's weights over the keys sum to "
                "one: softmax(dim=-1), then the largest of each row", partial(max_weight, dim=0)),
        Mistake("the largest weight of each column (max over the queries, dim=0)",
                "the largest weight of each query's row: weights.max(dim=-1)",
                partial(max_weight, max_dim=0)),
        # Found by a student walk: on some seeds its mean is near one of the slips above.
        Mistake("the median over the queries instead of the mean", "return the mean over the "
                "32 queries of each row's largest weight", partial(max_weight, median=True)),
        Mistake("each row averaged before the max (a row of weights averages 1/32)",
                "the largest weight of each row, then their mean: w.max(dim=-1).values.mean()",
                partial(max_weight, take=lambda w: w.mean(dim=-1).max())),
        Mistake("the positions of the largest weights (argmax), not the weights",
                "w.max(dim=-1) gives (values, indices): take .values",
                partial(max_weight, take=lambda w: w.max(dim=-1)[1].float().mean())),
        Mistake(*_KEYS_FIRST, partial(max_weight, keys_first=True)),
    ),
    spread=SPREAD,
    hint="draw 32 queries and 32 keys of width d_k from the generator (torch.randn), divide the "
         "scores by sqrt(d_k) only when scaled, and return the mean over the queries of each "
         "row's largest softmax weight")

# --------------------------------------------------------------- assignment 8: float16 overflow


def fp16_overflow_rate(spread: float, generator: torch.Generator, *, safe: bool = False,
                       power: float = 1.0, returned: str = "fraction") -> float:
    """The fraction of 256 rows of 64 logits ~ N(0, spread^2) whose softmax, computed naively
    (no max subtracted) in float16, holds a non-finite weight; ``safe``: the maximum
    subtracted (nothing overflows); ``power=2``: the logits multiplied by spread ** 2;
    ``returned``: ``"count"`` (the number of such rows), ``"percent"`` (their percentage) or
    ``"elements"`` (the fraction of the weights, not of the rows, that are not finite)."""
    x = (torch.randn(256, 64, generator=generator) * spread ** power).half()
    if safe:
        x = x - x.max(dim=-1, keepdim=True).values
    w = x.exp() / x.exp().sum(dim=-1, keepdim=True)
    if returned == "elements":
        return (~torch.isfinite(w)).float().mean().item()
    rows = (~torch.isfinite(w)).any(dim=-1).float()
    return {"fraction": rows.mean(), "count": rows.sum(), "percent": 100 * rows.mean()}[
        returned].item()


FP16_OVERFLOW_RATE = Experiment(
    name="fp16_overflow_rate", reference=fp16_overflow_rate, settings=((4.0,), (6.0,)),
    quantity="fraction of rows that overflow",
    mistakes=(
        # Counting only inf (torch.isinf) gives the same zeros: an overflowed row's inf / inf
        # is NaN, never inf.
        # The logits multiplied by sqrt(spread) (spread taken for a variance, the other way
        # round) overflow nowhere either at spread 4 (2 standard deviations): the same zeros.
        Mistake("no row overflows: the maximum subtracted, the softmax taken in float32, "
                "only inf counted (an overflowed row holds inf / inf = NaN, not inf), or the "
                "logits too small to overflow (multiplied by sqrt(spread))",
                "the experiment measures the naive softmax in float16: multiply the standard "
                "normal logits by spread itself (their standard deviation), convert with .half() "
                "before exp, do not subtract the maximum, and count a row whose weights hold an "
                "inf or a NaN (~torch.isfinite(w)): inf / inf is NaN",
                partial(fp16_overflow_rate, safe=True)),
        # Every row overflows then, 1 on every seed: named here before "not a measurement".
        Mistake("the logits multiplied by spread ** 2 (spread taken for a variance)",
                "spread is the standard deviation of the logits: torch.randn(256, 64) * spread",
                partial(fp16_overflow_rate, power=2.0)),
        Mistake("the number of rows that overflow, not their fraction", "divide by the 256 "
                "rows: (~torch.isfinite(w)).any(dim=-1).float().mean()",
                partial(fp16_overflow_rate, returned="count")),
        Mistake("a percentage of the rows, not a fraction", "return the fraction, between 0 "
                "and 1: (~torch.isfinite(w)).any(dim=-1).float().mean(), not times 100",
                partial(fp16_overflow_rate, returned="percent")),
        Mistake("the fraction of the weights that are not finite, not of the rows", "a row "
                "overflows when any of its 64 weights is inf or NaN: take .any(dim=-1) before "
                "the mean over the 256 rows", partial(fp16_overflow_rate, returned="elements")),
    ),
    # A fraction of 256 rows: coarse values, whose median deviation is coarse too (a right
    # answer's ratio reached 4 once in 100,000 tries); one row's is 0 (nearly every value
    # alike), which any factor refuses.
    spread=3 * SPREAD,
    hint="draw 256 rows of 64 standard normal logits from the generator, multiply by spread, "
         "convert to float16 (.half()), compute x.exp() / x.exp().sum(-1, keepdim=True) and "
         "return the fraction of rows holding an inf or NaN")
