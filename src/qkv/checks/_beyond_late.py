"""Assignment 9: exercises that copying a page cannot answer (see :mod:`._beyond`): linear
attention, a FlexAttention ``mask_mod`` for a pattern the reference does not contain, and an
experiment on how far linear attention is from softmax attention, and a colleague's causal
linear attention with grouped key/value heads to debug."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import torch
from torch import Tensor

import qkv

from ._experiment import Experiment
from .harness import (Case, Exercise, Forbidden, half_case, Mistake, Noted, randn, sizes,
                      via_float32, whole_scores)
from .mistakes.attention import TORCH_ATTENTION, qkv_case

# --------------------------------------------------------------- assignment 9: linear, flex


def _linear_cases():
    def shifted(build, shift):
        def moved(gen, device, dtype):
            (q, k, v), kw = build(gen, device, dtype)
            return (q - shift, k - shift, v), kw
        return moved

    f32, f64 = torch.float32, torch.float64
    return [
        Case("unbatched input with L=3, S=5, E=4, Ev=6", qkv_case((), 3, 5, 4, 6), f64),
        Case("batched input (B=2, H=2) with L=S=6, E=8, Ev=3 and is_causal=True",
             qkv_case((2, 2), 6, 6, 8, 3, is_causal=True), f64),
        Case("batched input (B=2) with L=4, S=7, E=4, Ev=5", qkv_case((2,), 4, 7, 4, 5), f32),
        # phi(x) = exp(x) far below 0: normalisers near 0.05, where the + 1e-6 shows.
        Case("unbatched input with L=S=4, E=4, Ev=2, queries and keys near -4 (small "
             "normalisers) and is_causal=True",
             shifted(qkv_case((), 4, 4, 4, 2, is_causal=True), 4.0), f64),
        half_case("batched input (B=2, H=2) with L=S=5, E=4, Ev=3 and is_causal=True",
                  qkv_case((2, 2), 5, 5, 4, 3, is_causal=True)),
    ]


def _linear_variant(q, k, v, is_causal=False, *, phi=None, normalise=True, causal=True,
                    future=False, eps=1e-6, scaled=False, mask_after=False):
    """Linear attention with one switch turned (the defaults: the right answer); ``scaled``:
    the similarities divided by sqrt(E), a softmax habit; ``mask_after``: the causal ``tril``
    applied after normalising (each row's weights then sum to less than one)."""
    phi = phi or qkv.elu_feature_map
    sim = phi(q) @ phi(k).transpose(-2, -1)
    if scaled:
        sim = sim / math.sqrt(q.shape[-1])
    if is_causal and causal and not mask_after:
        sim = sim.triu() if future else sim.tril()
    if normalise:
        sim = sim / (sim.sum(dim=-1, keepdim=True) + eps)
    if is_causal and mask_after:
        sim = sim.tril()
    return sim @ v


LINEAR_ATTENTION = Exercise(
    name="linear_attention", reference=via_float32(qkv.linear_attention), cases=_linear_cases(),
    forbid=TORCH_ATTENTION, legend="(..., L, Ev)",
    mistakes=[
        Mistake("feature map elu(x) without the + 1", "phi(x) = elu(x) + 1 is positive, so no "
                "weight is negative", partial(_linear_variant, phi=torch.nn.functional.elu)),
        Mistake("no normaliser", "divide by phi(q_i) . sum_j phi(k_j) (+ 1e-6)",
                partial(_linear_variant, normalise=False)),
        # Before the eps: the scale cancels in the normaliser except against the + 1e-6, so a
        # scaled answer is as close to the reference as one without the + 1e-6.
        Mistake("the similarities scaled by 1/sqrt(E): linear attention has no 1/sqrt(E)",
                "drop the / sqrt(E): it cancels in the normaliser except against the + 1e-6, "
                "which it then changes; phi(q_i) . phi(k_j) is used as it is",
                partial(_linear_variant, scaled=True)),
        Mistake("the causal mask applied after normalising (each row sums to less than one)",
                "when causal, zero the future similarities (sim.tril()) BEFORE dividing by "
                "their row sum, so that the normaliser sums over keys 0..i only",
                partial(_linear_variant, mask_after=True)),
        Mistake("feature map relu(x) instead of elu(x) + 1", "phi(x) = elu(x) + 1 "
                "(qkv.elu_feature_map): positive everywhere, where relu is 0 for x < 0",
                partial(_linear_variant, phi=torch.relu)),
        Mistake("the normaliser's + 1e-6 left out", "the formula adds 1e-6 to each normaliser "
                "phi(q_i) . sum_j phi(k_j): keep it (where phi is small, it shows)",
                partial(_linear_variant, eps=0.0)),
        Mistake("is_causal ignored", "when causal, query i sums over keys 0..i only",
                partial(_linear_variant, causal=False)),
        Mistake("the future kept instead of the past (triu)", "when causal, query i sums over "
                "keys 0..i only: sim.tril()", partial(_linear_variant, future=True)),
    ],
)


def linear_gap(E: int, generator: torch.Generator, *, scaled: bool = True,
               dim: int = -1, scaled_linear: bool = False) -> float:
    """The mean absolute difference between softmax attention and linear attention (``elu + 1``)
    on 64 random queries, keys and values of width ``E``; or with a slip (``scaled=False``: no
    1/sqrt(E) in the softmax; ``dim``: the softmax axis; ``scaled_linear``: the queries
    divided by sqrt(E) for linear attention too)."""
    q, k, v = (torch.randn(64, E, generator=generator) for _ in range(3))
    exact = torch.softmax(q @ k.T / (math.sqrt(E) if scaled else 1.0), dim=dim) @ v
    linear = qkv.linear_attention(q / math.sqrt(E) if scaled_linear else q, k, v)
    return (exact - linear).abs().mean().item()


LINEAR_GAP = Experiment(
    name="linear_gap", reference=linear_gap, settings=((4,), (32,)),
    helpers={"linear_attention": qkv.linear_attention},
    quantity="mean gap between softmax and linear attention",
    mistakes=(
        Mistake("softmax attention not scaled by 1/sqrt(E)",
                "the softmax side is softmax(q @ k.T / sqrt(E)) @ v", partial(linear_gap,
                                                                            scaled=False)),
        Mistake("softmax over the queries (dim=0)", "each query's weights over the keys sum to "
                "one: softmax(dim=-1)", partial(linear_gap, dim=0)),
        Mistake("the queries scaled by 1/sqrt(E) for linear attention too",
                "linear attention takes q, k and v as drawn: the 1/sqrt(E) belongs to the "
                "softmax's scores only", partial(linear_gap, scaled_linear=True)),
    ),
    hint="draw q, k and v (64, E) from the generator in that order, compute softmax attention "
         "(scale 1/sqrt(E)) and your linear_attention on them, and return the mean absolute "
         "difference of the two outputs")


def dilated_window(L: int, S: int, window: int, dilation: int) -> Tensor:
    """(L, S) bool: query ``i`` sees key ``j`` when ``0 <= i - j < window * dilation`` and
    ``i - j`` is a multiple of ``dilation``."""
    gap = torch.arange(L)[:, None] - torch.arange(S)[None, :]
    return (gap >= 0) & (gap < window * dilation) & (gap % dilation == 0)


def _run_mask_mod(student: Any, window: int, dilation: int, L: int, S: int, b: int = 0,
                  h: int = 0) -> Tensor:
    """Build the student's ``mask_mod`` and evaluate it on every (query, key) pair of batch
    element ``b`` and head ``h`` at once, as FlexAttention's ``create_mask`` does (broadcast
    index tensors)."""
    mask_mod = student(window, dilation)
    if not callable(mask_mod):
        raise TypeError(f"dilated_window_mask_mod should return a function "
                        f"mask_mod(b, h, q_idx, kv_idx), got {type(mask_mod).__name__}")
    b_idx, h_idx = torch.tensor(b), torch.tensor(h)
    return mask_mod(b_idx, h_idx, torch.arange(L)[:, None], torch.arange(S)[None, :])


def _mask_mod_cases():
    # b and h other than 0 too: the window is the same for every sequence and head.
    return [Case(f"window={w}, dilation={d}, L={L}, S={S}"
                 + (f", batch element b={b} and head h={h}" if b or h else ""),
                 sizes(w, d, L, S, b, h), None)
            for w, d, L, S, b, h in ((3, 2, 8, 8, 0, 0), (2, 3, 10, 10, 1, 2),
                                     (4, 1, 6, 6, 0, 3), (1, 5, 7, 7, 2, 0))]


def _dilated_variant(window, dilation, L, S, b=0, h=0, *, span=None, strict=False,
                     first_only=False):
    gap = torch.arange(L)[:, None] - torch.arange(S)[None, :]
    reach = window * dilation if span is None else span(window, dilation)
    allowed = (gap >= 0) & ((gap <= reach) if strict else (gap < reach)) & (gap % dilation == 0)
    return allowed & (not first_only or b == h == 0)


DILATED_WINDOW_MASK_MOD = Exercise(
    name="dilated_window_mask_mod", run_student=_run_mask_mod,
    reference=lambda window, dilation, L, S, b=0, h=0: dilated_window(L, S, window, dilation),
    cases=_mask_mod_cases(), legend="(L, S) bool",
    mistakes=[
        Mistake("the window counts positions, not kept keys (reach window instead of "
                "window * dilation)", "each query keeps `window` keys, dilation apart",
                partial(_dilated_variant, span=lambda w, d: w)),
        Mistake("one key too many (<= instead of <)", "keys i - j = 0, d, ..., (window-1)*d",
                partial(_dilated_variant, strict=True)),
        Mistake("the mask depends on the batch element or the head (a b == 0 or h == 0 left "
                "in)", "every sequence and head has the same window: use only q_idx and kv_idx",
                partial(_dilated_variant, first_only=True)),
    ],
)

# --------------------------------------------------------------- assignment 9: debugging


def grouped_causal_linear(query: Tensor, key: Tensor, value: Tensor, *, tile: bool = False,
                          z_dim: int = 2, kv_dim: int = 2, exclusive: bool = False) -> Tensor:
    """Causal linear attention (``elu + 1``) in linear time, ``Hq`` query heads sharing ``Hkv``
    key/value heads (query head ``h`` uses ``h // G``); or the printed version's bugs put back:
    ``tile`` (``repeat`` for ``repeat_interleave``), the normaliser's running sum over the
    features (``z_dim=-1``), the running sum of ``phi(k) v^T`` over the features (``kv_dim=-2``);
    ``exclusive``: both running sums over j < i (``cumsum - term``), not j <= i."""
    G = query.shape[1] // key.shape[1]
    if tile:
        key, value = key.repeat(1, G, 1, 1), value.repeat(1, G, 1, 1)
    else:
        key, value = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    phi_q, phi_k = qkv.elu_feature_map(query), qkv.elu_feature_map(key)
    outer = torch.einsum("bhse,bhsv->bhsev", phi_k, value)
    kv, z = outer.cumsum(dim=kv_dim), phi_k.cumsum(dim=z_dim)
    if exclusive:
        kv, z = kv - outer, z - phi_k
    num = torch.einsum("bhle,bhlev->bhlv", phi_q, kv)
    return num / (torch.einsum("bhle,bhle->bhl", phi_q, z)[..., None] + 1e-6)


# The printed function's bugs; the exercise combines them (harness.printed_combinations).
_BUGS = [
    Mistake("key/value heads tiled (repeat) instead of grouped (repeat_interleave) (a bug of the "
            "printed function)", "query head h uses key/value head h // G: "
            "repeat_interleave(G, dim=1) gives [a, a, b, b]; repeat(1, G, 1, 1) gives [a, b, a, b]",
            partial(grouped_causal_linear, tile=True)),
    Mistake("the normaliser's running sum over the features (cumsum(dim=-1)) instead of the "
            "positions (a bug of the printed function)",
            "z_i = sum over j <= i of phi(k_j): a cumsum over the positions, dim 2 of (B, H, L, E)",
            partial(grouped_causal_linear, z_dim=-1)),
    Mistake("the running sum of phi(k_j) v_j^T over the features (cumsum(dim=-2) of a 5-d "
            "tensor) instead of the positions (a bug of the printed function)",
            "the outer products are (B, H, L, E, Ev): the positions are dim 2 there, not -2",
            partial(grouped_causal_linear, kv_dim=-2)),
]


def _grouped_linear_cases():
    def make(B, Hq, Hkv, L, E, Ev):
        def build(gen, device, dtype):
            q = randn(gen, B, Hq, L, E, device=device, dtype=dtype)
            k = randn(gen, B, Hkv, L, E, device=device, dtype=dtype)
            v = randn(gen, B, Hkv, L, Ev, device=device, dtype=dtype)
            return (q, k, v), {}
        return build
    f32, f64 = torch.float32, torch.float64
    return [Case("Hq=4, Hkv=2 (B=2, L=5, E=3, Ev=4)", make(2, 4, 2, 5, 3, 4), f64),
            Case("Hq=6, Hkv=3 (B=1, L=6, E=4, Ev=2)", make(1, 6, 3, 6, 4, 2), f32),
            Case("multi-query: Hq=3, Hkv=1 (B=2, L=4, E=2, Ev=3)", make(2, 3, 1, 4, 2, 3), f64),
            Case("Hq=Hkv=2 (B=1, L=3, E=5, Ev=5)", make(1, 2, 2, 3, 5, 5), f64),
            # Longer than the chunks an answer that visits the keys a chunk at a time takes:
            # only here is an (L, L) tensor the quadratic form (see _running_sums).
            Case(f"a long sequence: Hq=2, Hkv=1 (B=1, L={_WATCHED}, E=4, Ev=3)",
                 make(1, 2, 1, _WATCHED, 4, 3), f64),
            half_case("Hq=4, Hkv=2 (B=2, L=5, E=3, Ev=4)", make(2, 4, 2, 5, 3, 4))]


#: The length from which an (L, L) tensor is the quadratic form, not a chunk: a chunked answer
#: (a running state between chunks, the causal block inside each) of up to 128 positions a
#: chunk builds no (L, L) tensor there (honest12: chunks of 64 on L <= 6 were noted).
_WATCHED = 192


def _not_causal_normaliser(query: Tensor, key: Tensor, value: Tensor) -> Tensor:
    G = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    phi_q, phi_k = qkv.elu_feature_map(query), qkv.elu_feature_map(key)
    num = torch.einsum("bhle,bhlev->bhlv", phi_q,
                       torch.einsum("bhse,bhsv->bhsev", phi_k, value).cumsum(dim=2))
    z = phi_k.sum(dim=2, keepdim=True)
    return num / (torch.einsum("bhle,bhse->bhl", phi_q, z)[..., None] + 1e-6)


def _running_sums(student: Any, query: Tensor, key: Tensor, value: Tensor) -> Any:
    """How the exercise calls the answer: a note when it built the ``(L, L)`` weights from the
    queries and keys (the quadratic form gives the right numbers, and none of the linear time
    the exercise is about), found by chunked_attention's watch for whole scores
    (:func:`whole_scores`); a note, not a failure, as a call of the student's own
    linear_attention is. Only a case of :data:`_WATCHED` positions or more is watched: in a
    shorter one a chunk of an honest chunked answer is the whole sequence."""
    L = query.shape[-2]
    if L < _WATCHED:
        return student(query, key, value)
    out, seen = whole_scores(lambda: student(query, key, value), L, L, (query, key))
    if seen:
        return Noted(out, ("built the (L, L) weights (phi(q_i) . phi(k_j) for every pair): "
                           "keep the running sums of phi(k_j) and phi(k_j) v_j^T over j <= i "
                           "instead",))
    return out


GROUPED_CAUSAL_LINEAR_ATTENTION = Exercise(
    name="grouped_causal_linear_attention", reference=via_float32(grouped_causal_linear),
    cases=_grouped_linear_cases(), legend="(B, Hq, L, Ev)", run_student=_running_sums,
    # The running sums are the exercise: the quadratic linear_attention of Part 1 is not.
    forbid=TORCH_ATTENTION | Forbidden(own=("linear_attention",)),
    helpers={"repeat_kv": qkv.repeat_kv},  # a wrong repeat_kv costs only its own test
    mistakes=[*_BUGS,
              Mistake("the normaliser summed over every position (not causal)",
                      "query i divides by phi(q_i) . sum over j <= i of phi(k_j): a cumsum, "
                      "not a sum", _not_causal_normaliser),
              Mistake("the running sums over j < i (cumsum minus the current term): query i "
                      "does not see its own key", "sum over j <= i: cumsum includes position "
                      "i itself (query 0 then sees key 0)", partial(grouped_causal_linear,
                                                                   exclusive=True))],
)

