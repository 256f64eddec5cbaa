"""Checks for the qkv assignment: ``self_attention`` and ``cross_attention``.

The checks compare with :func:`qkv.self_attention` and :func:`qkv.cross_attention`
on seeded inputs and name the usual mistakes (projections swapped or applied
transposed, keys and values taken from the wrong sequence, the scale, the softmax
axis).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, List

import torch

import qkv

from .mistakes.attention import TORCH_ATTENTION, attend
from .harness import Case, checks_of, Exercise, half_case, Mistake, randn, make_check, via_float32
from . import _beyond_early as e, _beyond_experiments as x, _variations_early as v
from ._experiment import ExperimentCheck

__all__ = [
    "check_cross_attention",
    "check_self_attention",
    "check_self_attention_no_self",
    "check_self_attention_with_null",
    "check_self_weight",
]

_LAYOUT = ("the weights are (out_features, in_features), as nn.Linear's weight: Q = x @ W_q.T, "
           "K = context @ W_k.T, V = context @ W_v.T")


# --------------------------------------------------------------------------- wrong variants


def _cross(x, context, W_q, W_k, W_v, *, q_from="x", kv_from="context", swap_kv=False,
           swap_qk=False, transposed=False, by: str = "", keys_by_q=False, weights_t=False,
           **attend_kw):
    """Cross-attention with switches that reproduce common mistakes (all off: right).

    ``by`` scales by 1/sqrt of another size than E: ``"x"`` (D, the width of x),
    ``"context"`` (Dc, the context's width) or ``"keys"`` (S, the number of keys);
    ``keys_by_q``: the keys projected with W_q; ``weights_t``: the weights transposed before
    they take the values.
    """
    src = {"x": x, "context": context}
    if by:
        size = {"x": x.shape[-1], "context": context.shape[-1], "keys": src[kv_from].shape[-2]}
        attend_kw["scale"] = 1.0 / math.sqrt(size[by])
    # Right: nn.Linear's layout, applied as x @ W.T; the mistake applies them as they are.
    if not transposed:
        W_q, W_k, W_v = W_q.transpose(-2, -1), W_k.transpose(-2, -1), W_v.transpose(-2, -1)
    if swap_kv:
        W_k, W_v = W_v, W_k
    q = src[q_from] @ W_q
    k = src[kv_from] @ (W_q if keys_by_q else W_k)
    v = src[kv_from] @ W_v
    if swap_qk:
        q, k = k, q
    if weights_t:
        return attend(q, k, v, give="weights", **attend_kw).transpose(-2, -1) @ v
    return attend(q, k, v, **attend_kw)


def _self(x, W_q, W_k, W_v, **kw):
    return _cross(x, x, W_q, W_k, W_v, **kw)


def _mistakes(fn: Callable[..., Any], cross: bool) -> List[Mistake]:
    scale_hint = "divide the scores by sqrt(E), E = W_q.shape[0] (the width of queries and keys)"
    out = []
    if cross:
        out += [
            Mistake("keys and values taken from x instead of the context",
                    "in cross-attention the queries come from x, the keys and values from "
                    "context", partial(fn, kv_from="x")),
            Mistake("queries taken from the context and keys and values from x",
                    "queries come from x (the sequence that asks), keys and values from context",
                    partial(fn, q_from="context", kv_from="x")),
            Mistake("scaling by sqrt(Dc), the context's width, instead of sqrt(E)",
                    scale_hint + ", not context.shape[-1]: the scores are dot products of the "
                    "projected queries and keys", partial(fn, by="context")),
        ]
    out += [
        Mistake("the weight matrices applied untransposed (x @ W instead of x @ W.T)", _LAYOUT,
                partial(fn, transposed=True)),
        Mistake("W_k and W_v swapped", "keys come from W_k, values from W_v",
                partial(fn, swap_kv=True)),
        Mistake("queries and keys swapped (the weight matrix is transposed)",
                "row i of the scores compares query i with every key: Q @ K.transpose(-2, -1)",
                partial(fn, swap_qk=True)),
        Mistake("no scaling", scale_hint, partial(fn, factor=lambda E, Ev, s: 1.0)),
        Mistake("scaling by E instead of sqrt(E)", scale_hint,
                partial(fn, factor=lambda E, Ev, s: 1.0 / E)),
        Mistake("scaling by sqrt(Ev), the width of the values", scale_hint,
                partial(fn, factor=lambda E, Ev, s: 1.0 / math.sqrt(Ev))),
        Mistake("scaling by sqrt(D), the width of x, instead of sqrt(E)",
                scale_hint + ", not x.shape[-1]: the scores are dot products of the projected "
                "queries and keys", partial(fn, by="x")),
        Mistake("scaling by sqrt(S), the number of keys, instead of sqrt(E)",
                scale_hint + ": the scale follows the width of the dot products, not how many "
                "keys there are", partial(fn, by="keys")),
        Mistake("softmax over the wrong axis",
                "each query's weights over the keys sum to one: softmax over the last dim (-1)",
                partial(fn, dim=-2)),
        Mistake("softmax with no dim (F.softmax(scores)): torch picks the axis, not the keys'",
                "when dim is omitted torch picks the axis itself (0 of a 3-D tensor, 1 of a "
                "4-D one, with a warning): give it, softmax over the keys, dim=-1",
                partial(fn, dim=None)),
        Mistake("returning the weights instead of the output",
                "return weights @ V, the weighted sum of the values", partial(fn, give="weights")),
        Mistake("returning the scores instead of the output",
                "apply the softmax to the scores, then take the weighted sum weights @ V",
                partial(fn, give="scores")),
        Mistake("wrong axes transposed on the keys",
                "transpose only the last two axes of K: K.transpose(-2, -1) "
                "(transpose(K, 0, 1) swaps batch and sequence on a batch)",
                partial(fn, key_t=(0, 1))),
        Mistake("wrong axes transposed on the keys (K.T)",
                "transpose only the last two axes of K: K.transpose(-2, -1) (K.T reverses every "
                "axis of a batched tensor)", partial(fn, key_t="T")),
        Mistake("the keys projected with W_q instead of W_k", "each projection has its own "
                f"weights: K = {'context' if cross else 'x'} @ W_k.T",
                partial(fn, keys_by_q=True)),
    ]
    if not cross:  # L = S: weights.T @ V runs (in cross-attention it raises as Q, K swapped do)
        out.append(Mistake("the weights transposed before they take the values (weights.T @ V)",
                           "row i of the weights is query i's distribution over the keys: the "
                           "output is weights @ V, (L, S) @ (S, Ev)", partial(fn, weights_t=True)))
    return out


# --------------------------------------------------------------------------- cases


def _cases(cross: bool) -> List[Case]:
    def make(batch, L, D, E, Ev, S=None, Dc=None, ctx_batch=None):
        def build(gen, device, dtype):
            x = randn(gen, *batch, L, D)
            ws = [randn(gen, E, D) / math.sqrt(D)]  # nn.Linear's layout, (out, in)
            args = [x]
            if cross:
                c_in = D if Dc is None else Dc
                cb = batch if ctx_batch is None else ctx_batch
                args.append(randn(gen, *cb, L if S is None else S, c_in))
            else:
                c_in = D
            ws += [randn(gen, E, c_in) / math.sqrt(c_in), randn(gen, Ev, c_in) / math.sqrt(c_in)]
            return tuple(t.to(device=device, dtype=dtype) for t in args + ws), {}
        return build

    f32, f64 = torch.float32, torch.float64
    if not cross:
        return [
            Case("unbatched x (L=4, D=6) with E=3, Ev=5", make((), 4, 6, 3, 5), f32),
            Case("batched x (B=2, L=5, D=8) with E=4, Ev=3", make((2,), 5, 8, 4, 3), f64),
            Case("x with two batch dims (2, 3, L=4, D=5), E=6, Ev=2", make((2, 3), 4, 5, 6, 2), f32),
            Case("batched x (B=3, L=3, D=4) with square weights E=Ev=D=4", make((3,), 3, 4, 4, 4),
                 f64),
            Case("batched x (B=4, L=4, D=4) with E=Ev=4 (B = L = E)", make((4,), 4, 4, 4, 4), f64),
            Case("a single token (L=1, D=3) with E=2, Ev=3", make((), 1, 3, 2, 3), f32),
            half_case("batched x (B=2, L=4, D=6) with E=4, Ev=3", make((2,), 4, 6, 4, 3)),
        ]
    return [
        Case("unbatched x (L=3, D=6) and context (S=5, Dc=4), E=3, Ev=2",
             make((), 3, 6, 3, 2, S=5, Dc=4), f32),
        Case("batched x (B=2, L=4, D=5) and context (B=2, S=6, Dc=7), E=4, Ev=3",
             make((2,), 4, 5, 4, 3, S=6, Dc=7), f64),
        Case("batched x (B=2, L=3, D=4) and context (B=2, S=3, Dc=4): same sizes, E=Ev=4",
             make((2,), 3, 4, 4, 4, S=3, Dc=4), f64),
        Case("batched x (B=3, L=2, D=5) and one unbatched context (S=4, Dc=6), E=3, Ev=5",
             make((3,), 2, 5, 3, 5, S=4, Dc=6, ctx_batch=()), f32),
        Case("x with two batch dims (2, 2, L=3, D=4) and context (2, 2, S=5, Dc=3), E=2, Ev=4",
             make((2, 2), 3, 4, 2, 4, S=5, Dc=3), f64),
        half_case("batched x (B=2, L=3, D=4) and context (B=2, S=5, Dc=6), E=4, Ev=3",
                  make((2,), 3, 4, 4, 3, S=5, Dc=6), torch.bfloat16),
    ]


#: K.transpose(1, 2) (or a softmax over dim=2) assumes a batch axis: unbatched input has two.
_AXES_FROM_THE_END = ("an axis counted from the front assumes a batch axis, and unbatched input "
                      "has none: count from the end, K.transpose(-2, -1) and softmax(dim=-1)")


SELF_ATTENTION = Exercise(
    name="self_attention", reference=via_float32(qkv.self_attention), cases=_cases(cross=False),
    mistakes=_mistakes(_self, cross=False), forbid=TORCH_ATTENTION,
    legend="(..., L, Ev)",
    error_hints=[("cannot be multiplied", _LAYOUT), ("x.T", "transpose only the last two axes: "
                                                              "K.transpose(-2, -1)"),
                 ("Dimension out of range", _AXES_FROM_THE_END)],
)

CROSS_ATTENTION = Exercise(
    name="cross_attention", reference=via_float32(qkv.cross_attention), cases=_cases(cross=True),
    mistakes=_mistakes(_cross, cross=True), forbid=TORCH_ATTENTION, legend="(..., L, Ev)",
    error_hints=[("cannot be multiplied", _LAYOUT + "; keys and values come from context"),
                 ("x.T", "transpose only the last two axes: K.transpose(-2, -1)"),
                 ("Dimension out of range", _AXES_FROM_THE_END),
                 ("batch2 tensor", "the batch axes broadcast (one unbatched context may serve "
                  "a batch of x): use @ or torch.matmul, which broadcast, not torch.bmm")],
)


#: This module's checks, by the name test cells call them (for :mod:`.grading`).
CHECKS = checks_of(SELF_ATTENTION, CROSS_ATTENTION, e.SELF_ATTENTION_NO_SELF,
                   ExperimentCheck(x.SELF_WEIGHT), v.SELF_ATTENTION_WITH_NULL)


# --------------------------------------------------------------------------- the checks

check_self_attention = make_check(
    CHECKS, "check_self_attention", __name__,
    "Check a student's ``self_attention(x, W_q, W_k, W_v)`` against :func:`qkv.self_attention`.\n\n"
    "Weights are ``(out_features, in_features)``, as ``nn.Linear``'s; x is ``(L, D)`` or batched "
    "``(..., L, D)``.")

check_cross_attention = make_check(
    CHECKS, "check_cross_attention", __name__,
    "Check ``cross_attention(x, context, W_q, W_k, W_v)`` against :func:`qkv.cross_attention`.")

check_self_attention_no_self = make_check(
    CHECKS, "check_self_attention_no_self", __name__,
    "Check the fixed ``self_attention_no_self(x, W_q, W_k, W_v)``: self-attention in which no "
    "token attends to itself; a bug of the printed version left in is named.")

check_self_weight = make_check(
    CHECKS, "check_self_weight", __name__,
    "Check the experiment ``self_weight(shared, generator)`` as a measurement (see "
    ":mod:`._experiment`).")

check_self_attention_with_null = make_check(
    CHECKS, "check_self_attention_with_null", __name__,
    "Check ``self_attention_with_null(x, W_q, W_k, W_v, k_null, v_null)``: self-attention in "
    "which each query may also attend to a learned null key ``k_null`` (E,), whose value is "
    "``v_null`` (Ev,).")
