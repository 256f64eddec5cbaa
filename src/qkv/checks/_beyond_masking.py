"""Assignment 6: exercises that copying a page cannot answer (see :mod:`._beyond`): a debugging
exercise, attention under two masks at once (``padded_causal_attention``: causal and padding),
and an experiment, ``padding_leak``, the weight queries give to padded keys without a mask.
"""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import Tensor

import qkv

from ._experiment import SPREAD, Experiment
from .harness import Case, Exercise, Mistake, half_case, via_float32
from .mistakes.attention import FILL_HINT, OVERFLOW, TORCH_ATTENTION, qkv_inputs, row_softmax


def padded_causal(query: Tensor, key: Tensor, value: Tensor, lengths: Tensor, *,
                  future: bool = False, inclusive: bool = False, after: bool = False,
                  invert: bool = False, stable: bool = True, short: bool = False,
                  max_over_all: bool = False, queries_axis: bool = False, drop: str = "",
                  by_keys: bool = False) -> Tensor:
    """Attention where query ``i`` of sequence ``b`` sees keys ``j <= i`` with ``j <
    lengths[b]``; or one bug of the printed version put back (``future``: ``triu``;
    ``inclusive``: ``<=``; ``after``: weights zeroed after the softmax; ``invert``: the mask's
    meaning flipped; ``stable=False``: no row maximum subtracted; ``short``: ``< lengths - 1``;
    ``max_over_all``: the maximum taken over every key, hidden ones too, and the exponentials
    zeroed where hidden; ``queries_axis``: the padding mask broadcast over the queries;
    ``drop``: the ``"padding"`` or ``"causal"`` mask left out; ``by_keys``: scaled by sqrt(S))."""
    L, S = query.shape[-2], key.shape[-2]
    ones = torch.ones(L, S, dtype=torch.bool, device=query.device)
    causal = ones.triu() if future else ones.tril()
    pos = torch.arange(S, device=query.device)[None, :]
    real = pos <= lengths[:, None] if inclusive else pos < lengths[:, None] - int(short)
    real = real | (drop == "padding")
    allowed = (causal | (drop == "causal")) & (real[:, None, :, None] if queries_axis
                                               else real[:, None, None, :])
    if invert:
        allowed = ~allowed
    if not (future or inclusive or after or invert or short or max_over_all
            or queries_axis or drop or by_keys) and stable:
        mask = (qkv.causal_mask(L, S, device=query.device)
                & qkv.padding_mask(lengths, S)[:, None, None, :])
        return qkv.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    scores = query @ key.transpose(-2, -1) / math.sqrt(S if by_keys else query.shape[-1])
    if after:
        return torch.softmax(scores, dim=-1).masked_fill(~allowed, 0.0) @ value
    if max_over_all:
        e = torch.exp(scores - scores.amax(dim=-1, keepdim=True)) * allowed
        return e / e.sum(dim=-1, keepdim=True) @ value
    return row_softmax(scores.masked_fill(~allowed, float("-inf")), stable=stable) @ value


def _padded_cases():
    def make(B, H, L, E, Ev, lengths, big=0.0, hidden_high=False):
        def build(gen, device, dtype):
            q, k, v = qkv_inputs(gen, device, dtype, (B, H), L, L, E, Ev, big=big)
            if hidden_high:  # every key but the first scores about 800 for every query: query
                q[..., 0], k[..., 1:, 0] = 40.0, 40.0  # 0 sees key 0 only, far below the rest
            return (q, k, v, torch.tensor(lengths, device=device)), {}
        return build
    f32, f64 = torch.float32, torch.float64
    return [
        Case("B=2, H=1, L=S=4, E=4, Ev=3, lengths=[4, 2]", make(2, 1, 4, 4, 3, [4, 2]), f64),
        Case("B=3, H=2, L=S=6, E=8, Ev=5, lengths=[6, 3, 1]", make(3, 2, 6, 8, 5, [6, 3, 1]), f32),
        Case("B=2, H=4, L=S=5, E=4, Ev=2, lengths=[2, 5]", make(2, 4, 5, 4, 2, [2, 5]), f64),
        Case("B=2, H=1, L=S=4 with large logits (scores near 800), lengths=[4, 3]",
             make(2, 1, 4, 4, 3, [4, 3], big=40.0), f64),
        Case("B=2, H=1, L=S=4 with every score very negative (near -800), lengths=[4, 2]: a "
             "finite fill outweighs the real keys", make(2, 1, 4, 4, 3, [4, 2], big=-40.0), f64),
        Case("B=2, H=1, L=S=5, lengths=[5, 1]: the keys a query may not see (the future, the "
             "padding) score about 800 above the ones it may", make(2, 1, 5, 4, 3, [5, 1],
                                                                   hidden_high=True), f64),
        half_case("B=2, H=2, L=S=5, E=4, Ev=3, lengths=[5, 2]", make(2, 2, 5, 4, 3, [5, 2])),
    ]


PADDED_CAUSAL_ATTENTION = Exercise(
    name="padded_causal_attention", reference=via_float32(padded_causal), cases=_padded_cases(),
    forbid=TORCH_ATTENTION, legend="(B, H, L, Ev)",
    mistakes=[
        Mistake("the future allowed instead of the past (triu) (a bug of the printed function)",
                "query i may see keys 0..i: torch.tril", partial(padded_causal, future=True)),
        Mistake("one padding key allowed (<= lengths) (a bug of the printed function)",
                "keys 0..length-1 are real: arange(S) < lengths", partial(padded_causal,
                                                                          inclusive=True)),
        Mistake("weights zeroed after the softmax (a bug of the printed function)",
                "mask the scores with -inf before the softmax, so each row still sums to one",
                partial(padded_causal, after=True)),
        Mistake("the mask inverted (True marks what is hidden)",
                "True is allowed: masked_fill(~allowed, -inf)", partial(padded_causal, invert=True)),
        Mistake(*OVERFLOW, partial(padded_causal, stable=False)),
        Mistake("the row maximum taken over every key, the hidden ones too",
                "subtract the largest score among the keys the query may see: fill the hidden "
                "ones with -inf first, then softmax (a hidden key far above the rest leaves "
                "exp 0 everywhere it may look, and 0 / 0)",
                partial(padded_causal, max_over_all=True)),
        Mistake("one real key too few (< lengths - 1)", "keys 0..length-1 are real: "
                "arange(S) < lengths", partial(padded_causal, short=True)),
        Mistake("the padding mask over the queries instead of the keys (real[:, None, :, None])",
                "the padding hides keys: the mask is (B, 1, 1, S), real[:, None, None, :], so "
                "that it broadcasts over the queries; over the queries it leaves a padded "
                "query's row with no key at all (NaN)", partial(padded_causal, queries_axis=True)),
        Mistake("the padding not masked (the causal mask alone)", "hide the padded keys too: "
                "allowed = causal & (arange(S) < lengths)[:, None, None, :]",
                partial(padded_causal, drop="padding")),
        Mistake("the causal mask left out (the padding mask alone)", "query i may see keys "
                "0..i as well as only real ones: causal & real", partial(padded_causal,
                                                                        drop="causal")),
        Mistake("scaling by sqrt(S), the number of keys, instead of sqrt(E)", "divide the scores "
                "by sqrt(E), E = query.shape[-1]: the scale follows the width of the dot "
                "products, not how many keys there are", partial(padded_causal, by_keys=True)),
    ],
    error_hints=[("same device", "build the masks on query.device"),
                 ("without overflow", FILL_HINT)],
)


def padding_leak(length: int, S: int, generator: torch.Generator, *, scale: float = 4.0,
                 dim: int = -1, real: bool = False, queries: int = 8,
                 median: bool = False) -> float:
    """Without a padding mask, the mean weight 8 queries give to the ``S - length`` padded keys;
    or with a slip (``scale``: what the scores are divided by; ``dim``: the softmax axis;
    ``real``: the weight on the real keys; ``queries``: how many are drawn; ``median``: the
    median over the queries)."""
    q = torch.randn(queries, 16, generator=generator)
    k = torch.randn(S, 16, generator=generator)
    weights = torch.softmax(q @ k.T / scale, dim=dim)
    leak = (weights[:, :length] if real else weights[:, length:]).sum(dim=-1)
    return (leak.median() if median else leak.mean()).item()


PADDING_LEAK = Experiment(
    name="padding_leak", reference=padding_leak, settings=((4, 16), (12, 16), (4, 64)),
    quantity="weight on the padding", spread=SPREAD,
    mistakes=(
        # Every key gets 1/S on average whatever the scale: these two change only the spread.
        Mistake("scores not divided by 4", "the scores are q @ k.T / 4 (4 = sqrt(16))",
                partial(padding_leak, scale=1.0)),
        Mistake("scores divided by 16 (the width) instead of 4 = sqrt(16)",
                "the scores are q @ k.T / 4", partial(padding_leak, scale=16.0)),
        Mistake("softmax over the queries (dim=0)", "each query's weights over the keys sum to "
                "one: softmax(dim=-1)", partial(padding_leak, dim=0)),
        Mistake("the weight on the real keys 0..length-1, not on the padding",
                "the padding is keys length..S-1: weights[:, length:]",
                partial(padding_leak, real=True)),
        # Found passing by a student walk (the mean is the same by symmetry), named seed for seed.
        Mistake("scores divided by sqrt(8) instead of 4 = sqrt(16)", "the scores are q @ k.T / 4: "
                "the keys' width is 16", partial(padding_leak, scale=math.sqrt(8))),
        Mistake("16 queries drawn instead of 8", "draw 8 queries (8, 16), then the keys (S, 16)",
                partial(padding_leak, queries=16)),
        Mistake("the median over the queries instead of the mean", "return the mean over the 8 "
                "queries of each one's weight on the padding", partial(padding_leak, median=True)),
    ),
    hint="draw 8 queries (8, 16) and S keys (S, 16) from the generator, take the softmax of "
         "q @ k.T / 4 with no mask, and return the mean over the queries of the weight on keys "
         "length..S-1")
