"""Assignment 5's debugging exercise: multi-head self-attention as one function (see
:mod:`._beyond`); its experiment is in :mod:`._beyond_mid`."""

from __future__ import annotations

import math
from functools import partial
from itertools import combinations

import torch
from torch import Tensor

import qkv

from .harness import Case, Exercise, half_case, Mistake, via_float32
from .mistakes.attention import TORCH_ATTENTION
from .mistakes.multi_head import HEAD_LAYOUT_SLIPS, merge_variant, split_variant
from ._beyond_early import F32, F64, _initialised, _inputs


# --------------------------------------------------------------- assignment 5: heads, functionally


def mhsa(x: Tensor, W_q: Tensor, W_k: Tensor, W_v: Tensor, W_o: Tensor, num_heads: int, *,
         no_transpose: bool = False, full_scale: bool = False,
         merge_no_transpose: bool = False, no_value: bool = False, no_out: bool = False,
         dim: int = -1, plain: str = "", by: str = "", split: str = "ok",
         merge: str = "ok") -> Tensor:
    """Multi-head self-attention as one function; or a bug of the printed version put back
    (or another slip: ``no_value``/``no_out``: W_v/W_o left out; ``dim``: the softmax axis;
    ``plain``: the projections, of "qkvo", used without .T (``x @ W_q``, ``merged @ W_o``);
    ``by``: the scale, "d" or "H"; ``split``/``merge``: how the heads are split or merged, as
    :func:`.mistakes.multi_head.split_variant` and ``merge_variant`` read it)."""
    B, L, D = x.shape
    d = D // num_heads

    def split_(t):
        return t.reshape(B, num_heads, L, d) if no_transpose else split_variant(t, num_heads,
                                                                                 how=split)
    q, k, v = (split_(x @ (W if p in plain else W.T)) for W, p in zip((W_q, W_k, W_v), "qkv"))
    v = split_(x) if no_value else v
    scale = {"d": d, "H": math.sqrt(num_heads)}.get(by, math.sqrt(D if full_scale else d))
    scores = q @ k.transpose(-2, -1) / scale
    out = torch.softmax(scores, dim=dim) @ v
    merged = out.reshape(B, L, D) if merge_no_transpose else merge_variant(out, how=merge)
    return merged if no_out else merged @ (W_o if "o" in plain else W_o.T)


_LEFT = {"q": "x @ W_q", "k": "x @ W_k", "v": "x @ W_v", "o": "merged @ W_o"}


def _listed(words):
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


def _untransposed():
    """A mistake for each set of projections used without .T (``x @ W_q`` for ``x @ W_q.T``):
    a student often transposes some and forgets others."""
    out = []
    for n in range(1, 5):
        for left in combinations("qkvo", n):
            wrong = _listed([_LEFT[p] for p in left])
            right = _listed([_LEFT[p] + ".T" for p in left])
            mats = _listed([f"W_{p}" for p in left])
            done = [f"W_{p}" for p in "qkvo" if p not in left]
            like = f", like {done[0]}, which you transposed" if done else ""
            name = (f"no projection transposed: {wrong}" if n == 4 else
                    f"{wrong} instead of {right}")
            out.append(Mistake(name, f"{mats} {'is' if n == 1 else 'are'} (D, D) in nn.Linear's "
                               f"layout (out, in){like}: {right} (a square matrix the wrong way "
                               f"round raises nothing)", partial(mhsa, plain="".join(left))))
    return out


def _mhsa_case(B, L, D, H):
    return _inputs((B, L, D), (D, D), (D, D), (D, D), (D, D), extra=(H,))


MULTI_HEAD_SELF_ATTENTION = Exercise(
    name="multi_head_self_attention", reference=via_float32(mhsa), legend="(B, L, D)", forbid=TORCH_ATTENTION,
    helpers={"split_heads": qkv.split_heads, "merge_heads": qkv.merge_heads},
    cases=[Case("B=2, L=3, D=8, 2 heads", _mhsa_case(2, 3, 8, 2), F64),
           Case("B=1, L=5, D=12, 3 heads", _mhsa_case(1, 5, 12, 3), F32),
           Case("B=2, L=4, D=8, 4 heads", _mhsa_case(2, 4, 8, 4), F64),
           half_case("B=2, L=4, D=8, 2 heads, the weights divided by sqrt(8)",
                     _initialised(_mhsa_case(2, 4, 8, 2)))],
    mistakes=[
        Mistake("heads split by reshape alone (positions mixed into heads) (a bug of the "
                "printed function)", "view (B, L, H, d), then transpose(1, 2) to (B, H, L, d)",
                partial(mhsa, no_transpose=True)),
        Mistake("scaled by sqrt(D) instead of the head's width (a bug of the printed function)",
                "each head's scores are divided by sqrt(D / num_heads)",
                partial(mhsa, full_scale=True)),
        Mistake("heads merged by reshape alone (a bug of the printed function)",
                "transpose(1, 2) back to (B, L, H, d) before reshaping to (B, L, D)",
                partial(mhsa, merge_no_transpose=True)),
        Mistake("the output projection W_o left out", "the heads, merged back to (B, L, D), "
                "go through W_o: merged @ W_o.T", partial(mhsa, no_out=True)),
        Mistake("the value projection W_v left out", "the values are x @ W_v.T, split into "
                "heads like the queries and keys", partial(mhsa, no_value=True)),
        Mistake("softmax over the queries (dim=-2)", "each query's weights over the keys sum "
                "to one: softmax(scores, dim=-1)", partial(mhsa, dim=-2)),
        *_untransposed(),
        *(Mistake(name, hint, partial(mhsa, **switches))
          for name, hint, switches in HEAD_LAYOUT_SLIPS),
        Mistake("scaled by the head's width itself, not its square root",
                "divide by sqrt(D / num_heads)", partial(mhsa, by="d")),
        Mistake("scaled by sqrt(num_heads) instead of sqrt(D / num_heads)", "the scale is the "
                "square root of each head's width, D / num_heads", partial(mhsa, by="H")),
        Mistake("softmax over the heads (dim=1)", "each query's weights over the keys sum to "
                "one: softmax(scores, dim=-1), the last axis of (B, H, L, L)",
                partial(mhsa, dim=1)),
    ],
)
