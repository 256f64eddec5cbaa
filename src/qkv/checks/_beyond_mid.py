"""Assignments 5 and 7: variations and an experiment that copying a page cannot answer (see
:mod:`._beyond`).

- Assignment 5, a variation: ``talking_heads_attention`` (Shazeer et al., 2020), where the
  heads' scores are mixed across heads before the softmax and their weights after it; the
  reference :mod:`qkv` has no such function.
- Assignment 5, an experiment: ``head_difference``, how different the attention patterns of
  random heads are, with separate projections, a key projection shared by every head (as
  multi-query attention shares it) or both shared.
- Assignment 7, a variation: ``apply_partial_rope``, RoPE on the first ``rotary_dim`` dims
  only (GPT-J, GPT-NeoX), the rest passed through; checked against :func:`qkv.apply_rope`
  applied to that slice.
"""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import Tensor

import qkv

from ._experiment import Experiment
from .harness import Case, Exercise, Forbidden, half_case, Mistake, randn, via_float32
from .mistakes.attention import TORCH_ATTENTION

F32, F64 = torch.float32, torch.float64

# --------------------------------------------------------------- assignment 5: talking heads


def _mix(matrix: Tensor, t: Tensor) -> Tensor:
    """New head ``j`` = ``sum_h matrix[j, h] * t[..., h, :, :]`` (heads on dim -3)."""
    return torch.einsum("jh,...hls->...jls", matrix, t)


def talking_heads(query: Tensor, key: Tensor, value: Tensor, pre_mix: Tensor, post_mix: Tensor,
                  *, transposed: str = "", swapped: bool = False, pre: bool = True,
                  post: bool = True, mix_outputs: bool = False, scaled: bool = True,
                  softmax_dim: int = -1, post_first: bool = False) -> Tensor:
    """Talking-heads attention: the scores mixed across heads by ``pre_mix``, the softmax over
    the keys, the weights mixed by ``post_mix``; or one mistake put back (the switches;
    ``transposed``: "pre", "post" or "both" mixing matrices transposed; ``post_first``: the
    post_mix applied to the scores too, before the softmax, and not after it)."""
    first, second = (post_mix, pre_mix) if swapped else (pre_mix, post_mix)
    if transposed in ("pre", "both"):
        first = first.transpose(0, 1)
    if transposed in ("post", "both"):
        second = second.transpose(0, 1)
    scores = query @ key.transpose(-2, -1)
    if scaled:
        scores = scores / math.sqrt(query.shape[-1])
    if pre:
        scores = _mix(first, scores)
    if post_first:
        scores, post = _mix(second, scores), False
    weights = torch.softmax(scores, dim=softmax_dim)
    if mix_outputs:
        return _mix(second, weights @ value)
    if post:
        weights = _mix(second, weights)
    return weights @ value


def _talking_case(B, H, L, S, E, Ev, pre="random", post="random"):
    def build(gen, device, dtype):
        q = randn(gen, B, H, L, E, device=device, dtype=dtype)
        k = randn(gen, B, H, S, E, device=device, dtype=dtype)
        v = randn(gen, B, H, S, Ev, device=device, dtype=dtype)
        mixes = [randn(gen, H, H, device=device, dtype=dtype) if how == "random" else
                 torch.eye(H, device=device, dtype=dtype) for how in (pre, post)]
        return (q, k, v, *mixes), {}
    return build


_MIX_HINT = ("new head j is the sum over h of mix[j, h] times head h (the rows of the matrix "
             "say what each new head reads): torch.einsum('jh,bhls->bjls', mix, scores)")

TALKING_HEADS_ATTENTION = Exercise(
    name="talking_heads_attention", reference=via_float32(talking_heads), legend="(B, H, L, Ev)",
    forbid=TORCH_ATTENTION,
    cases=[Case("B=2, H=3, L=4, S=5, E=4, Ev=3, random mixes", _talking_case(2, 3, 4, 5, 4, 3), F64),
           Case("B=1, H=4, L=3, S=6, E=8, Ev=2, random mixes", _talking_case(1, 4, 3, 6, 8, 2), F32),
           Case("B=2, H=3, L=S=4, E=4, Ev=3, pre_mix random, post_mix the identity",
                _talking_case(2, 3, 4, 4, 4, 3, post="eye"), F64),
           Case("B=1, H=2, L=3, S=5, E=4, Ev=4, pre_mix the identity, post_mix random",
                _talking_case(1, 2, 3, 5, 4, 4, pre="eye"), F64),
           Case("B=2, H=2, L=3, S=4, E=6, Ev=2, both mixes the identity (plain multi-head)",
                _talking_case(2, 2, 3, 4, 6, 2, pre="eye", post="eye"), F32),
           half_case("B=2, H=3, L=4, S=5, E=4, Ev=3, random mixes", _talking_case(2, 3, 4, 5, 4, 3))],
    mistakes=[
        *(Mistake(f"{which} transposed (new head j = sum_h mix[h, j] * head h)", _MIX_HINT,
                  partial(talking_heads, transposed=how))
          for which, how in (("mixing matrices", "both"), ("pre_mix", "pre"),
                             ("post_mix", "post"))),
        Mistake("pre_mix and post_mix swapped",
                "pre_mix mixes the scores before the softmax, post_mix the weights after it",
                partial(talking_heads, swapped=True)),
        Mistake("the outputs mixed instead of the weights (post_mix after multiplying by the "
                "values)", "mix the weights (B, H, L, S) with post_mix, then multiply by the "
                "values: each mixed head averages its own head's values",
                partial(talking_heads, mix_outputs=True)),
        Mistake("no mix before the softmax (pre_mix ignored)",
                "mix the scores across heads with pre_mix before the softmax",
                partial(talking_heads, pre=False)),
        Mistake("no mix after the softmax (post_mix ignored)",
                "mix the weights across heads with post_mix after the softmax",
                partial(talking_heads, post=False)),
        Mistake("post_mix applied before the softmax (to the mixed scores), not to the weights "
                "after it", "softmax first, then mix the weights (B, H, L, S) across heads with "
                "post_mix: the mixed weights are what multiplies the values",
                partial(talking_heads, post_first=True)),
        Mistake("scores not scaled by 1/sqrt(E)", "divide q @ k^T by sqrt(E), E = query.shape[-1]",
                partial(talking_heads, scaled=False)),
        Mistake("softmax over the heads instead of the keys",
                "each query's weights over the keys sum to one: softmax(dim=-1)",
                partial(talking_heads, softmax_dim=-3)),
    ],
    error_hints=[("einsum", "the heads are dim 1 of (B, H, L, S): mix over that axis"),
                 ("size of tensor", "mix over the heads, dim 1 of (B, H, L, S)")],
)


def head_difference(share: str, generator: torch.Generator, *, split: str = "heads",
                    shared: str = "keys", both: str = "both", width: int = 8,
                    half: float = 0.5) -> float:
    """The mean total-variation distance between the attention weights of 4 random heads
    (D=32, width 8) on 16 random tokens, over the 6 pairs of heads; ``share`` is ``"none"``,
    ``"key"`` (every head uses head 0's keys) or ``"both"`` (head 0's queries and keys); or
    with a slip (``split``: ``"reshape"`` (4, 16, 8) without a transpose, ``"strided"`` head h
    the features h::4; ``shared="queries"``: head 0's queries shared for ``"key"``, ``"both"``:
    its queries and keys; ``half``: the factor of the distance, 1.0 without the 1/2; ``both``:
    what ``"both"`` is taken for; ``width``: the scores divided by sqrt(width), 32 for the
    model's width)."""
    share = both if share == "both" else share
    x = torch.randn(16, 32, generator=generator)
    W_q = torch.randn(32, 32, generator=generator) / math.sqrt(32)
    W_k = torch.randn(32, 32, generator=generator) / math.sqrt(32)

    def heads(t: Tensor) -> Tensor:
        if split == "reshape":
            return t.reshape(4, 16, 8)
        if split == "strided":
            return t.reshape(16, 8, 4).permute(2, 0, 1)
        return qkv.split_heads(t[None], 4)[0]
    q, k = heads(x @ W_q.T), heads(x @ W_k.T)
    if share == "key" and shared in ("queries", "both"):
        q = q[:1].expand_as(q)
        k = k[:1].expand_as(k) if shared == "both" else k
    elif share in ("key", "both"):
        k = k[:1].expand_as(k)
    if share == "both":
        q = q[:1].expand_as(q)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(width), dim=-1)  # (4, 16, 16)
    tv = half * (w[:, None] - w[None, :]).abs().sum(dim=-1).mean(dim=-1)  # (4, 4)
    a, b = torch.triu_indices(4, 4, offset=1)
    return tv[a, b].mean().item()


HEAD_DIFFERENCE = Experiment(
    name="head_difference", reference=head_difference,
    # With share="both" every head is head 0: the distance is exactly 0 (the floor allows
    # rounding in an answer that computes the heads apart).
    settings=(("none",), ("key",), ("both",)), floor=1e-6,
    helpers={"split_heads": qkv.split_heads, "merge_heads": qkv.merge_heads},
    quantity="mean total-variation distance between two heads' weights",
    mistakes=(
        Mistake("heads split with reshape(4, 16, 8), no transpose: each head mixes tokens",
                "head h is features 8h..8h+7 of every token: reshape to (16, 4, 8), then "
                "transpose to (4, 16, 8) (split_heads)", partial(head_difference, split="reshape")),
        Mistake("head h taken as the strided features h, h+4, ... instead of 8h..8h+7",
                "head h is the contiguous features 8h..8h+7 (split_heads)",
                partial(head_difference, split="strided")),
        Mistake("share='key' shares the queries instead of the keys",
                "with share='key' every head uses head 0's keys, k[:1], with its own queries",
                partial(head_difference, shared="queries")),
        Mistake("share='key' shares the queries too: every head is head 0, so the distance "
                "is 0", "with share='key' only the keys are shared (k[:1]): every head keeps "
                "its own queries", partial(head_difference, shared="both")),
        Mistake("the total-variation distance without its 1/2 (twice the distance)",
                "the total-variation distance is 0.5 * sum over keys of |w_a - w_b|: between 0 "
                "and 1", partial(head_difference, half=1.0)),
        Mistake("the scores divided by sqrt(32), the model's width, instead of sqrt(8), a head's",
                "each head's scores are dot products of width 8 (32 // 4 heads): divide them by "
                "sqrt(8)", partial(head_difference, width=32)),
        *(Mistake(f"share='both' taken for '{taken}': {what}", "with share='both' every head "
                  "uses head 0's queries and keys: q[:1] and k[:1]",
                  partial(head_difference, both=taken))
          for taken, what in (("key", "the queries are not shared"),
                              ("none", "nothing is shared"))),
    ),
    hint="draw x (16, 32), then W_q and W_k (32, 32) from the generator, divide the weights by "
         "sqrt(32), split x @ W_q.T and x @ W_k.T into 4 heads of width 8 (head h: features "
         "8h..8h+7), give every head head 0's keys when share is 'key', take each head's "
         "softmax(q k^T / sqrt(8)) and return, over the 6 pairs of heads, the mean over queries "
         "of 0.5 * sum over keys of |w_a - w_b|")

# --------------------------------------------------------------- assignment 7: partial RoPE


def _rotate(x: Tensor, offset: int, base: float, width: int, half: bool = False) -> Tensor:
    """Interleaved RoPE on every dim of ``x`` (``half``: pairs (i, i + E/2)), the frequencies
    ``base ** (-2i / width)``, in float64."""
    L, r = x.shape[-2], x.shape[-1]
    pos = torch.arange(offset, offset + L, dtype=F64, device=x.device)[:, None]
    angles = pos * base ** (-torch.arange(0, r, 2, dtype=F64, device=x.device) / width)
    cos, sin = angles.cos(), angles.sin()
    xw = x.to(F64)
    a, b = (xw[..., : r // 2], xw[..., r // 2:]) if half else (xw[..., 0::2], xw[..., 1::2])
    ra, rb = a * cos - b * sin, a * sin + b * cos
    out = torch.cat((ra, rb), -1) if half else torch.stack((ra, rb), -1).flatten(-2)
    return out.to(x.dtype)


def partial_rope(x: Tensor, rotary_dim: int, offset: int = 0, base: float = 10000.0) -> Tensor:
    """RoPE on the first ``rotary_dim`` dims of ``x`` (their own frequencies), the rest as they
    are: :func:`qkv.apply_rope` on that slice."""
    rotated = qkv.apply_rope(x[..., :rotary_dim], offset=offset, base=base)
    return torch.cat((rotated, x[..., rotary_dim:]), dim=-1)


def partial_rope_variant(x: Tensor, rotary_dim: int, offset: int = 0, base: float = 10000.0, *,
                         full_width: bool = False, last: bool = False, half: bool = False,
                         every_dim: bool = False, zero_rest: bool = False,
                         ignore_offset: bool = False, shift: int = 0,
                         fixed_base: bool = False) -> Tensor:
    """:func:`partial_rope` with one mistake put back (the switches; ``shift``: positions
    from ``offset + shift``; ``fixed_base``: base not passed on, 10000 used)."""
    base = 10000.0 if fixed_base else base
    E = x.shape[-1]
    r = E if every_dim else rotary_dim
    part = x[..., E - r:] if last else x[..., :r]
    rest = x[..., :E - r] if last else x[..., r:]
    rotated = _rotate(part, 0 if ignore_offset else offset + shift, base, E if full_width else r,
                      half)
    if zero_rest:
        rest = torch.zeros_like(rest)
    return torch.cat((rest, rotated) if last else (rotated, rest), dim=-1)


def _rope_case(shape, rotary_dim, **kw):
    def build(gen, device, dtype):
        return (randn(gen, *shape, device=device, dtype=dtype), rotary_dim), dict(kw)
    return build


def _drawn_rope(gen, device, dtype):
    """E = 16; rotary_dim and the offset drawn from the seed."""
    rotary_dim = 2 * int(torch.randint(1, 8, (1,), generator=gen))
    offset = int(torch.randint(0, 40, (1,), generator=gen))
    return (randn(gen, 2, 2, 5, 16, device=device, dtype=dtype), rotary_dim), {"offset": offset}


_ROTARY_HINT = ("rotate x[..., :rotary_dim] exactly as apply_rope rotates a tensor of width "
                "rotary_dim (pairs (2i, 2i + 1), frequencies base ** (-2i / rotary_dim)) and "
                "pass x[..., rotary_dim:] through unchanged")

APPLY_PARTIAL_ROPE = Exercise(
    name="apply_partial_rope", reference=via_float32(partial_rope), legend="the shape of x, (..., L, E)",
    helpers={"apply_rope": qkv.apply_rope},
    # Ready-made rotary embeddings of the libraries at hand (the course's apply_rope excepted).
    forbid=Forbidden(patterns=("rotary",)),
    cases=[Case("x (B=2, H=2, L=5, E=8), rotary_dim=4", _rope_case((2, 2, 5, 8), 4), F32),
           Case("x (L=6, E=16), rotary_dim=4, offset=3", _rope_case((6, 16), 4, offset=3), F64,
                rtol=1e-5, atol=1e-5),
           Case("x (B=1, L=4, E=12), rotary_dim=6, base=100.0",
                _rope_case((1, 4, 12), 6, base=100.0), F64, rtol=1e-5, atol=1e-5),
           Case("x (B=2, H=1, L=3, E=6), rotary_dim=6 (every dim: plain RoPE)",
                _rope_case((2, 1, 3, 6), 6), F32),
           Case("x (B=2, H=2, L=5, E=16), rotary_dim and offset drawn from the seed",
                _drawn_rope, F32),
           half_case("x (B=2, H=2, L=4, E=8), rotary_dim=4, offset=1",
                     _rope_case((2, 2, 4, 8), 4, offset=1))],
    mistakes=[
        Mistake("frequencies over the full width E (base ** (-2i / E)) instead of rotary_dim",
                _ROTARY_HINT, partial(partial_rope_variant, full_width=True)),
        Mistake("the last rotary_dim dims rotated instead of the first", _ROTARY_HINT,
                partial(partial_rope_variant, last=True)),
        Mistake("pairs (i, i + rotary_dim/2) (half-split) instead of (2i, 2i + 1)", _ROTARY_HINT,
                partial(partial_rope_variant, half=True)),
        Mistake("base not passed on (10000 used whatever base is)", "pass base on: "
                "apply_rope(x[..., :rotary_dim], offset=offset, base=base)",
                partial(partial_rope_variant, fixed_base=True)),
        Mistake("every dim rotated (rotary_dim ignored)", _ROTARY_HINT,
                partial(partial_rope_variant, every_dim=True)),
        Mistake("the dims past rotary_dim zeroed instead of passed through", _ROTARY_HINT,
                partial(partial_rope_variant, zero_rest=True)),
        Mistake("offset ignored (the rows always start at position 0)",
                "row l of x is at position offset + l", partial(partial_rope_variant,
                                                                ignore_offset=True)),
        Mistake("positions off by one (row l at offset + l + 1)", "row l of x is at position "
                "offset + l: torch.arange(offset, offset + L)", partial(partial_rope_variant,
                                                                       shift=1)),
    ],
)
