"""Assignment 8's exercises beyond the forward pass (checked by :mod:`.efficient`):

- ``attention_backward``: the gradients of attention from the saved output and log-sum-exp,
  as FlashAttention's backward pass computes them (a function of the chapter's formulas),
  judged against autograd through :func:`qkv.scaled_dot_product_attention`;
- ``sliding_kv_cache_step``: one decoding step with a ring buffer that keeps only the last
  ``W`` keys and values (a variation: the reference's cache grows without end), judged against
  one built here from :func:`qkv.scaled_dot_product_attention`.
"""

from __future__ import annotations

import math
from functools import partial
from typing import List, Optional

import torch
from torch import Tensor

import qkv

from .harness import Case, close_each, Exercise, Forbidden, half_case, Mistake, randn, via_float32
from .mistakes.attention import FILL_HINT, OVERFLOW, TORCH_ATTENTION, qkv_inputs
from .mistakes.efficient import backward_variant, ring_variant

__all__: list = []


# ----------------------------------------------------------------------------- attention_backward
def autograd_backward(query: Tensor, key: Tensor, value: Tensor, out: Tensor, lse: Tensor,
                      grad_out: Tensor, is_causal: bool = False, scale: Optional[float] = None):
    """``(dQ, dK, dV)`` by autograd through the reference (``out`` and ``lse`` are not needed)."""
    q, k, v = (t.detach().clone().requires_grad_() for t in (query, key, value))
    with torch.enable_grad():
        o = qkv.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
    return torch.autograd.grad(o, (q, k, v), grad_out)


def _backward_cases() -> List[Case]:
    def make(batch, L, S, E, Ev, big=0.0, **kw):
        def build(gen, device, dtype):
            q, k, v = qkv_inputs(gen, device, dtype, batch, L, S, E, Ev, big)
            grad_out = randn(gen, *batch, L, Ev).to(device=device, dtype=dtype)
            scale = kw.get("scale") or 1.0 / math.sqrt(E)
            causal = kw.get("is_causal", False)
            out = qkv.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
            s = scale * (q @ k.transpose(-2, -1))
            if causal:  # top left, as SDPA's is_causal: query i sees keys 0..i
                s = s.masked_fill(~qkv.causal_mask(L, S, device=device), float("-inf"))
            return (q, k, v, out, torch.logsumexp(s, dim=-1), grad_out), kw
        return build

    f32, f64 = torch.float32, torch.float64
    # L = S first: a transpose left out then gives wrong numbers (named) instead of an error.
    # B = H = 1 there: a (B, H, L) row term or lse without its last axis then broadcasts along
    # the keys, and the numbers tell which one it was (elsewhere both raise the same error).
    # The causal cases pass is_causal=True; the others leave it out (its default is False).
    return [
        Case("B=1, H=1 with L=S=6, E=4, Ev=4", make((1, 1), 6, 6, 4, 4), f64),
        Case("B=2, H=3 with L=5, S=8, E=4, Ev=3", make((2, 3), 5, 8, 4, 3), f64),
        Case("B=1, H=2 with L=7, S=4, E=6, Ev=5 and scale=0.3",
             make((1, 2), 7, 4, 6, 5, scale=0.3), f32),
        Case("B=2, H=1 with large logits (scores near 800), L=4, S=6, E=4, Ev=3",
             make((2, 1), 4, 6, 4, 3, big=40.0), f64),
        Case("B=2, H=2 with L=9, S=9, E=8, Ev=2", make((2, 2), 9, 9, 8, 2), f32),
        Case("is_causal=True, B=2, H=2 with L=S=6, E=4, Ev=3",
             make((2, 2), 6, 6, 4, 3, is_causal=True), f64),
        Case("is_causal=True, B=2, H=1 with L=5, S=8 (top left: query i sees keys 0..i)",
             make((2, 1), 5, 8, 4, 3, is_causal=True), f64),
        Case("is_causal=True, B=1, H=2 with L=7, S=4 (queries 3..6 see all 4 keys) and scale=0.3",
             make((1, 2), 7, 4, 6, 5, is_causal=True, scale=0.3), f32),
        Case("is_causal=True with large logits (scores near 800), B=2, H=1, L=S=5",
             make((2, 1), 5, 5, 4, 3, big=40.0, is_causal=True), f64),
        half_case("is_causal=True, B=2, H=2 with L=S=5, E=4, Ev=3",
                  make((2, 2), 5, 5, 4, 3, is_causal=True)),
    ]


_LSE_HINT = ("recompute the weights as P = exp(scale * query @ key^T - lse[..., None]): lse "
             "holds one number per query (B, H, L), so it needs a last axis of 1 to subtract "
             "along each row")
_SCALE_DQ_DK = ("the scores are scale * Q K^T, so the chain rule brings the scale back: "
                "dQ = scale * dS @ K and dK = scale * dS^T @ Q")
_DELTA_HINT = ("the softmax's backward is dS = P * (dP - D) with D_i = sum_j P_ij dP_ij = "
               "rowsum(dO * O) (one number per query, computed from the output and its gradient)")
_MASK_HINT = ("with is_causal=True, query i saw only keys j <= i (top left, as SDPA: "
              "torch.ones(L, S, dtype=torch.bool).tril(), True = allowed), so lse sums over "
              "those keys only and exp(s - lse) is not a weight where j > i: set P to 0 there "
              "(mask the scores with -inf before exp, or zero P); then dV and dS are 0 there too")

ATTENTION_BACKWARD = Exercise(
    name="attention_backward", reference=via_float32(autograd_backward), cases=_backward_cases(),
    compare=close_each,
    # torch.func.vjp and its kind reach torch.autograd.grad: the notice says so.
    forbid=TORCH_ATTENTION | Forbidden({torch.autograd.grad: "autograd (torch.autograd.grad, "
                                                             "directly or through torch.func)",
                                        torch.Tensor.backward: "Tensor.backward"}),
    legend="(grad_query (B, H, L, E), grad_key (B, H, S, E), grad_value (B, H, S, Ev))",
    error_hints=[("keyword argument 'is_causal'",
                  "the signature is attention_backward(query, key, value, out, lse, grad_out, "
                  "is_causal=False, scale=None): the check passes is_causal=True on its causal "
                  "inputs")],
    mistakes=[
        Mistake("the scale forgotten in dQ and dK", _SCALE_DQ_DK,
                partial(backward_variant, scale_dq=False, scale_dk=False)),
        Mistake("no scaling when scale is None (the default 1/sqrt(E) forgotten)",
                "scale=None means 1/sqrt(E), E = query.shape[-1]: the forward's scores were "
                "scaled by it, so P, dQ and dK all need it", partial(backward_variant, default=1.0)),
        Mistake("the scale forgotten in dQ", _SCALE_DQ_DK, partial(backward_variant, scale_dq=False)),
        Mistake("the scale forgotten in dK", _SCALE_DQ_DK, partial(backward_variant, scale_dk=False)),
        Mistake("the scale argument ignored (1/sqrt(E) even when scale is given)",
                "when scale is given, the scores are scale * Q K^T and dQ, dK are multiplied by "
                "it; 1/sqrt(E) is only its default", partial(backward_variant, scale_given=False)),
        Mistake("the row term D computed as rowsum(dP) instead of rowsum(dO * O)", _DELTA_HINT,
                partial(backward_variant, delta="dp")),
        Mistake("the row term D summed without keepdim=True (subtracted along the keys, not "
                "each row)", _DELTA_HINT + ": (grad_out * out).sum(-1, keepdim=True), shape "
                "(B, H, L, 1)", partial(backward_variant, delta="flat")),
        Mistake("the row term D left out (dS = P * dP)", _DELTA_HINT,
                partial(backward_variant, delta="none")),
        Mistake("dK computed from dS instead of its transpose dS^T",
                "dK sums over the queries: dK = scale * dS^T @ Q, shape (B, H, S, E)",
                partial(backward_variant, dk_t=False)),
        Mistake("dV computed from P instead of its transpose P^T",
                "dV sums over the queries: dV = P^T @ dO, shape (B, H, S, Ev)",
                partial(backward_variant, dv_t=False)),
        Mistake("the weights recomputed as exp(scores) without subtracting lse", _LSE_HINT,
                partial(backward_variant, weights="exp")),
        Mistake("the weights recomputed from unscaled scores (exp(Q K^T - lse))", _LSE_HINT,
                partial(backward_variant, weights="unscaled")),
        Mistake("lse subtracted along the wrong axis (lse[..., None] forgotten)", _LSE_HINT,
                partial(backward_variant, weights="lse_row")),
        Mistake("the weights recomputed with a softmax over the queries (dim=-2)",
                "each query's weights over the keys sum to one: P = exp(s - lse[..., None]), "
                "or a softmax over dim=-1", partial(backward_variant, weights="dim-2")),
        Mistake("is_causal ignored: the weights recomputed without the mask (P nonzero where "
                "j > i)", _MASK_HINT, partial(backward_variant, mask="none")),
        Mistake("the causal mask inverted (the allowed keys j <= i zeroed, the future ones kept)",
                _MASK_HINT + "; masked_fill fills where its mask is True, so pass ~mask",
                partial(backward_variant, mask="inverted")),
        Mistake("the causal mask applied to dP but not to P (dV and dS still get the masked "
                "entries)", _MASK_HINT, partial(backward_variant, mask="dp")),
        Mistake("the causal mask aligned to the bottom right (j <= i + S - L)",
                _MASK_HINT + "; is_causal is aligned to the top left even when L != S",
                partial(backward_variant, mask="bottom_right")),
        Mistake("the diagonal masked too (j < i instead of j <= i)",
                _MASK_HINT + "; each query sees its own key: .tril(), not .tril(-1)",
                partial(backward_variant, mask="strict")),
        Mistake("the hidden scores filled with 0 instead of -inf (P = exp(0 - lse) there, "
                "not 0)", _MASK_HINT, partial(backward_variant, mask="zero")),
    ],
)


# ----------------------------------------------------------------------------- sliding_kv_cache_step
def ring_step(query: Tensor, key: Tensor, value: Tensor, k_ring: Tensor, v_ring: Tensor,
              pos: int, scale: Optional[float] = None):
    """The right answer: write slot ``pos % W``, attend to the slots written so far."""
    W = k_ring.shape[-2]
    k_ring, v_ring = k_ring.clone(), v_ring.clone()
    k_ring[..., pos % W, :], v_ring[..., pos % W, :] = key[..., 0, :], value[..., 0, :]
    filled = (torch.arange(W, device=query.device) <= pos)[None, :]  # (1, W): slots 0..pos
    out = qkv.scaled_dot_product_attention(query, k_ring, v_ring, attn_mask=filled, scale=scale)
    return out, k_ring, v_ring


def _ring_cases() -> List[Case]:
    def make(batch, W, pos, E, Ev, big=0.0, **kw):
        def build(gen, device, dtype):
            q, k, v = qkv_inputs(gen, device, dtype, batch, 1, 1, E, Ev, big=big)
            # Slots not written yet hold noise, as a ring made with torch.empty would.
            _, kr, vr = qkv_inputs(gen, device, dtype, batch, 1, W, E, Ev, big=big)
            return (q, k, v, kr, vr, pos), kw
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("W=4, pos=5 (the ring has wrapped), B=2, H=2, E=4, Ev=3", make((2, 2), 4, 5, 4, 3), f64),
        Case("W=5, pos=2 (the ring not full yet), B=2, H=1, E=4, Ev=3", make((2, 1), 5, 2, 4, 3), f64),
        Case("W=3, pos=0 (the first token: nothing written yet), B=1, H=2",
             make((1, 2), 3, 0, 4, 2), f32),
        Case("W=4, pos=3 (the ring just full), B=2, H=2", make((2, 2), 4, 3, 6, 3), f64),
        Case("W=4, pos=4 (the first wrap: slot 0 overwritten), B=2, H=2",
             make((2, 2), 4, 4, 4, 4), f32),
        Case("W=5, pos=13 and scale=0.3, B=1, H=3", make((1, 3), 5, 13, 4, 3, scale=0.3), f64),
        Case("W=1, pos=5 (a window of one key: the token itself)", make((2, 1), 1, 5, 4, 3), f64),
        Case("W=4, pos=6 with large logits (scores near 800), B=2, H=1",
             make((2, 1), 4, 6, 4, 3, big=40.0), f64),
        Case("W=5, pos=1 (two slots written) with every score very negative (near -800): a "
             "finite fill outweighs the real keys", make((2, 1), 5, 1, 4, 3, big=-40.0), f64),
        half_case("W=4, pos=2, B=2, H=2", make((2, 2), 4, 2, 4, 3)),
    ]


_SLOT_HINT = ("token pos goes into slot pos % W (W = k_ring.shape[-2]): it overwrites the token "
              "pos - W, the one that just left the window")
_SEEN_HINT = ("before the ring is full (pos < W - 1) only slots 0 .. pos hold keys: mask the "
              "others with torch.arange(W, device=query.device) <= pos (True = may attend)")

SLIDING_KV_CACHE_STEP = Exercise(
    name="sliding_kv_cache_step", reference=via_float32(ring_step), cases=_ring_cases(),
    compare=close_each, forbid=TORCH_ATTENTION,
    legend="(output (B, H, 1, Ev), k_ring (B, H, W, E), v_ring (B, H, W, Ev))",
    error_hints=[("without overflow", FILL_HINT)],
    mistakes=[
        Mistake("the new key written to slot (pos + 1) % W instead of pos % W", _SLOT_HINT,
                partial(ring_variant, slot="next")),
        Mistake("the new key written to slot (pos - 1) % W instead of pos % W", _SLOT_HINT,
                partial(ring_variant, slot="prev")),
        Mistake("a ring that never wraps (once full, the last slot is overwritten every step)",
                _SLOT_HINT, partial(ring_variant, slot="clamp")),
        Mistake("the window shifted with torch.cat instead of writing slot pos % W",
                "the output is right, but a ring buffer moves nothing: write the new key into "
                "slot pos % W and leave the other slots where they are (shifting copies all W "
                "rows at every step)", partial(ring_variant, shift=True)),
        Mistake("slots not written yet attended to (no mask before the ring is full)", _SEEN_HINT,
                partial(ring_variant, seen="all")),
        Mistake("the new token's own slot masked (slots < pos instead of <= pos)", _SEEN_HINT,
                partial(ring_variant, seen="before")),
        Mistake("the mask inverted (the written slots hidden, the unwritten ones attended to)",
                _SEEN_HINT + "; masked_fill fills where its mask is True, so pass ~written",
                partial(ring_variant, seen="inverted")),
        Mistake("the window off by one (W + 1 keys: the old ring and the new key side by side)",
                "write the new key first, then attend to the ring: the key it overwrites (token "
                "pos - W) is out of the window", partial(ring_variant, before=True)),
        Mistake("no scaling", "multiply the scores by scale, or by 1/sqrt(E) when scale is None",
                partial(ring_variant, scale_by="none")),
        Mistake("a finite fill like -1e9 (it overflows in float16)", FILL_HINT,
                partial(ring_variant, fill=-1e9)),
        Mistake(*OVERFLOW, partial(ring_variant, stable=False)),
        Mistake("slots <= pos % W attended to: once the ring has wrapped, every slot holds a "
                "key of the window", _SEEN_HINT, partial(ring_variant, seen="modulo")),
        Mistake("the scale argument ignored (1/sqrt(E) even when scale is given)",
                "when scale is given, multiply the scores by it; 1/sqrt(E) is only its default",
                partial(ring_variant, scale_given=False)),
    ],
)
