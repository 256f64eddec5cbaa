"""Assignment 3's variation: self-attention with a learned null key-value pair (see
:mod:`._variations_early`, which holds the other variations of assignments 1 to 4). The
reference is written here with torch; each :class:`Mistake` is it with one error put back.
"""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import Tensor

from .harness import Case, Exercise, half_case, Mistake, randn, via_float32
from .mistakes.attention import TORCH_ATTENTION

F32, F64 = torch.float32, torch.float64


def null_slot(x: Tensor, W_q: Tensor, W_k: Tensor, W_v: Tensor, k_null: Tensor, v_null: Tensor, *,
              slot: str = "both", scale_null: bool = True, projected: bool = False,
              untransposed: bool = False, scale_by_input: bool = False) -> Tensor:
    """Self-attention over the tokens of ``x`` plus a learned null key ``k_null`` (E,) with
    value ``v_null`` (Ev,): ``(..., L, Ev)``; or one mistake put back (``slot``: ``"none"``
    (no null slot), ``"key"`` (its value left out), ``"zero"`` (its score fixed at 0),
    ``"misplaced"`` (the null key appended after the keys, its value put before the values),
    ``"outside"`` (plain attention plus ``v_null``), ``"gate"`` (plain attention plus
    ``sigmoid(q . k_null / sqrt(E)) * v_null``, a gate apart from the softmax))."""
    q, k, v = (x @ W_q, x @ W_k, x @ W_v) if untransposed else (x @ W_q.T, x @ W_k.T, x @ W_v.T)
    if projected:
        k_null, v_null = k_null @ W_k.T, v_null @ W_v.T
    scale = 1 / math.sqrt(x.shape[-1] if scale_by_input else q.shape[-1])
    scores = q @ k.transpose(-2, -1) * scale  # (..., L, L)
    if slot in ("none", "outside", "gate"):
        out = torch.softmax(scores, dim=-1) @ v
        if slot == "outside":
            return out + v_null
        if slot == "gate":
            return out + torch.sigmoid((q @ k_null)[..., None] * scale) * v_null
        return out
    null = torch.zeros_like(q[..., :1]) if slot == "zero" else (q @ k_null)[..., None] * (
        scale if scale_null else 1.0)  # (..., L, 1)
    w = torch.softmax(torch.cat([scores, null], dim=-1), dim=-1)
    if slot == "misplaced":  # weights over (k_1 .. k_L, k_null), values (v_null, v_1 .. v_L)
        return w @ torch.cat([v_null.expand(*v.shape[:-2], 1, v.shape[-1]), v], dim=-2)
    out = w[..., :-1] @ v
    return out if slot == "key" else out + w[..., -1:] * v_null


def _null_case(batch, L, D, E, Ev, big=1.0):
    def build(gen, device, dtype):
        ts = (randn(gen, *batch, L, D), randn(gen, E, D) / D**0.25, randn(gen, E, D) / D**0.25,
              randn(gen, Ev, D), randn(gen, E) * big, randn(gen, Ev))
        return tuple(t.to(device=device, dtype=dtype) for t in ts), {}
    return build


SELF_ATTENTION_WITH_NULL = Exercise(
    name="self_attention_with_null", reference=via_float32(null_slot), legend="(..., L, Ev)",
    forbid=TORCH_ATTENTION,
    cases=[Case("x (L=4, D=6), W_q and W_k (3, 6), W_v (5, 6), k_null (3,), v_null (5,)",
                _null_case((), 4, 6, 3, 5), F64),
           Case("batched x (B=2, L=5, D=4), W_q and W_k (8, 4), W_v (4, 4)",
                _null_case((2,), 5, 4, 8, 4), F32),
           Case("x (L=3, D=5), square weights (5, 5), k_null and v_null (5,)",
                _null_case((), 3, 5, 5, 5), F64),
           Case("batched x (B=2, H=2, L=4, D=6), E=4, Ev=3 and a large k_null (times 4)",
                _null_case((2, 2), 4, 6, 4, 3, big=4.0), F64),
           half_case("batched x (B=2, L=5, D=6), E=4, Ev=3", _null_case((2,), 5, 6, 4, 3))],
    mistakes=[
        Mistake("no null slot (plain self-attention)", "append the score q_i . k_null / sqrt(E) "
                "to each row's scores before the softmax, and add w_null * v_null to the output",
                partial(null_slot, slot="none")),
        Mistake("the null slot's weight kept but its value v_null left out",
                "the output is sum_j w_ij v_j + w_i,null * v_null", partial(null_slot, slot="key")),
        Mistake("the null slot's score fixed at 0 (k_null unused)",
                "its score is q_i . k_null / sqrt(E), like any key's", partial(null_slot, slot="zero")),
        Mistake("the null key appended after the keys but the null value put before the values",
                "put k_null and v_null at the same place: torch.cat([K, k_null_row], -2) with "
                "torch.cat([V, v_null_row], -2) (or both first), so that the null weight "
                "multiplies v_null", partial(null_slot, slot="misplaced")),
        Mistake("v_null added outside the softmax (softmax(scores) @ V + v_null)",
                "the null slot competes inside the softmax: its score q_i . k_null / sqrt(E) "
                "joins the row's scores, and its weight w_null (< 1) multiplies v_null",
                partial(null_slot, slot="outside")),
        Mistake("the null slot gated apart from the softmax (a sigmoid of q . k_null)",
                "the null score joins the row's scores in ONE softmax, so that the weights of "
                "the keys and of the null slot sum to one", partial(null_slot, slot="gate")),
        Mistake("the null score not divided by sqrt(E)", "scale every score, the null one too, "
                "by 1/sqrt(E)", partial(null_slot, scale_null=False)),
        Mistake("k_null and v_null projected by W_k and W_v",
                "k_null and v_null are already a key (E,) and a value (Ev,): use them as they are",
                partial(null_slot, projected=True)),
        Mistake("scaled by sqrt of x's width instead of the queries'",
                "the scores are divided by sqrt(E), E = W_q.shape[0]",
                partial(null_slot, scale_by_input=True)),
        Mistake("x @ W instead of x @ W.T", "W_q is (E, D): the queries are x @ W_q.T",
                partial(null_slot, untransposed=True)),
    ],
    error_hints=[("cannot be multiplied", "W_q is (E, D): the queries are x @ W_q.T"),
                 ("Tensors must have same number of dimensions", "the null scores q @ k_null are "
                  "(..., L): add a last axis, [..., None], before joining them to the (..., L, L) "
                  "scores")],
)
