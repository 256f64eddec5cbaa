"""Checks for the scaling assignment: ``attention_scores``, ``scaled_dot_product_attention``.

Each check compares the student's function with the reference in
:mod:`qkv.scaling` and, when they differ, names the mistake: the wrong
variants below compute exactly what a student who made it would get.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import efficient as _efficient
from .. import scaling as _scaling
from .. import multi_head as _multi_head
from ._harness import Case, Exercise, Mistake, run_check
from ._inputs import bool_mask, randn

# Torch's own attention, forbidden in every attention exercise.
TORCH_ATTENTION = {
    F.scaled_dot_product_attention: "torch.nn.functional.scaled_dot_product_attention",
    F.multi_head_attention_forward: "nn.MultiheadAttention (F.multi_head_attention_forward)",
    torch._native_multi_head_attention: "nn.MultiheadAttention (its fast path)",
}
# The reference functions that compute attention (with their own names).
QKV_ATTENTION = {
    _scaling.scaled_dot_product_attention: "qkv.scaled_dot_product_attention",
    _scaling.scaled_dot_product_attention_with_weights:
        "qkv.scaled_dot_product_attention_with_weights",
    _scaling.attention_scores: "qkv.attention_scores",
    _scaling.attention_weights: "qkv's reference weights",
    _efficient.chunked_attention: "qkv.chunked_attention",
    _multi_head.MultiHeadAttention.forward: "qkv.MultiHeadAttention",
}

SCALE_HINT = "multiply the scores by scale, or by 1/sqrt(E) with E = query.shape[-1] when scale is None"
_CONSTANTS = (2, 3, 4, 5, 6, 8, 16, 32, 64, 128, 256, 512)


# --------------------------------------------------------------------------- wrong variants


def attend(query: Tensor, key: Tensor, value: Optional[Tensor] = None, attn_mask=None,
           dropout_p: float = 0.0, is_causal: bool = False, scale=None, *,
           factor: Optional[Callable[[int, int, Any], float]] = None, key_t: Any = None,
           mask_mode: str = "before", causal_diag: int = 0, causal_align: str = "top",
           dim: int = -1, stable: bool = True, give: str = "output") -> Tensor:
    """Attention with switches that reproduce common mistakes (all off: the right answer).

    ``factor(E, Ev, scale)`` gives the factor applied to the scores; ``key_t`` a
    wrong transpose of the key (``"T"`` or a pair of axes); ``mask_mode`` one of
    before/inverted/after/ignored/multiply; ``causal_diag``/``causal_align`` a
    shifted causal mask; ``dim`` the softmax axis; ``stable=False`` the softmax
    without the maximum subtracted; ``give`` output/weights/scores/raw.
    """
    E = query.shape[-1]
    Ev = value.shape[-1] if value is not None else E
    if factor is None:
        c = 1.0 / math.sqrt(E) if scale is None else scale
    else:
        c = factor(E, Ev, scale)
    if key_t is None:
        kt = key.transpose(-2, -1)
    elif key_t == "T":
        kt = key.permute(*reversed(range(key.dim())))
    else:
        kt = key.transpose(*key_t)
    raw = query @ kt
    scores = raw * c
    L, S = scores.shape[-2], scores.shape[-1]
    mask = attn_mask
    if is_causal:
        diag = causal_diag + (S - L if causal_align == "bottom" else 0)
        mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(diag)
        if causal_align == "ignored":
            mask = None
    if mask is not None and mask.dtype != torch.bool:
        if mask_mode != "ignored":
            scores = scores + mask
        mask = None
    if mask is not None:
        if mask_mode == "before":
            scores = scores.masked_fill(~mask, float("-inf"))
        elif mask_mode == "inverted":
            scores = scores.masked_fill(mask, float("-inf"))
        elif mask_mode == "multiply":
            scores = scores * mask
    if give == "raw":
        return raw
    if give == "scores":
        return scores
    if stable:
        weights = torch.softmax(scores, dim=dim)
    else:
        e = scores.exp()
        weights = e / e.sum(dim=dim, keepdim=True)
    if mask is not None and mask_mode == "after":
        weights = weights.masked_fill(~mask, 0.0)
    if give == "weights":
        return weights
    return weights @ value


def attention_mistakes(give: str = "output", with_value: bool = True) -> List[Mistake]:
    """The named mistakes of scaled dot-product attention, as :class:`Mistake` objects."""
    a = partial(attend, give=give)
    out: List[Mistake] = []
    if give == "output":
        out += [
            Mistake("returning the weights instead of the output",
                    "return weights @ value, the weighted sum of the values",
                    partial(attend, give="weights")),
            Mistake("returning the scores instead of the output",
                    "apply the softmax to the scores, then take the weighted sum weights @ value",
                    partial(attend, give="scores")),
        ]
    out += [
        Mistake("no scaling", SCALE_HINT, partial(a, factor=lambda E, Ev, s: 1.0)),
        Mistake("scaling by E instead of sqrt(E)", SCALE_HINT,
                partial(a, factor=lambda E, Ev, s: 1.0 / E)),
        Mistake("multiplying by sqrt(E) instead of dividing", SCALE_HINT,
                partial(a, factor=lambda E, Ev, s: math.sqrt(E))),
        Mistake("ignoring the scale argument", SCALE_HINT,
                partial(a, factor=lambda E, Ev, s: 1.0 / math.sqrt(E))),
        Mistake("dividing by scale instead of multiplying", SCALE_HINT,
                partial(a, factor=lambda E, Ev, s: 1.0 / math.sqrt(E) if s is None else 1.0 / s)),
    ]
    if with_value:
        out.append(Mistake("scaling by sqrt(Ev), the value's size, instead of sqrt(E)",
                           "E is the size shared by queries and keys: query.shape[-1]",
                           partial(a, factor=lambda E, Ev, s: 1.0 / math.sqrt(Ev))))
    for k in _CONSTANTS:
        out.append(Mistake(f"scaling by a constant (1/sqrt({k})) instead of 1/sqrt(E)",
                           "compute E from the input (query.shape[-1]); do not hard-code it",
                           partial(a, factor=lambda E, Ev, s, k=k: 1.0 / math.sqrt(k))))
        out.append(Mistake(f"scaling by a constant (1/{k}) instead of 1/sqrt(E)",
                           "compute E from the input (query.shape[-1]); do not hard-code it",
                           partial(a, factor=lambda E, Ev, s, k=k: 1.0 / k)))
    mask_hint = "a bool attn_mask is True where attention is allowed (SDPA's convention)"
    out += [
        Mistake("inverted bool mask",
                mask_hint + ": fill the scores with -inf where the mask is False "
                "(masked_fill(~attn_mask, -inf)); nn.MultiheadAttention uses the opposite",
                partial(a, mask_mode="inverted")),
        Mistake("mask ignored", "apply attn_mask (bool: -inf where False; float: add it) and "
                "is_causal before the softmax", partial(a, mask_mode="ignored")),
        Mistake("masking by multiplying the scores by the mask",
                "a masked score must become -inf (masked_fill), not 0: exp(0) is not 0",
                partial(a, mask_mode="multiply")),
        Mistake("causal mask off by one (the diagonal is masked)",
                "query i may attend to keys 0..i, itself included: torch.tril(..., diagonal=0)",
                partial(a, causal_diag=-1)),
        Mistake("causal mask off by one (one future key is allowed)",
                "query i may attend to keys 0..i only: torch.tril(..., diagonal=0)",
                partial(a, causal_diag=1)),
        Mistake("causal mask aligned to the bottom right instead of the top left",
                "with L != S the causal mask starts at the top-left corner: "
                "torch.ones(L, S).tril(), as SDPA's is_causal does",
                partial(a, causal_align="bottom")),
        Mistake("is_causal ignored", "when is_causal=True, mask the future: query i sees keys 0..i",
                partial(a, causal_align="ignored")),
    ]
    if give != "scores":
        out += [
            Mistake("mask applied after the softmax",
                    "mask the scores (-inf) before the softmax, so the allowed weights sum to one",
                    partial(a, mask_mode="after")),
            *(Mistake("softmax over the wrong axis",
                      "each query's weights over the keys sum to one: softmax over the last dim (-1)",
                      partial(a, dim=d)) for d in (-2, 0, 1)),
            Mistake("a softmax that overflows on large logits",
                    "subtract each row's maximum before exp (softmax does not change, exp no "
                    "longer overflows)", partial(a, stable=False)),
        ]
    key_hint = ("transpose only the last two axes of key: key.transpose(-2, -1) (key.T reverses "
                "every axis of a batched tensor)")
    out += [
        Mistake("wrong axes transposed on the key (key.T)", key_hint, partial(a, key_t="T")),
        Mistake("wrong axes transposed on the key", key_hint, partial(a, key_t=(0, 1))),
        Mistake("wrong axes transposed on the key", key_hint, partial(a, key_t=(1, 2))),
    ]
    return out


# --------------------------------------------------------------------------- cases


def _qkv(gen, device, dtype, batch, L, S, E, Ev, big: float = 0.0):
    q = randn(gen, *batch, L, E)
    k = randn(gen, *batch, S, E)
    v = randn(gen, *batch, S, Ev)
    if big:
        # A shared component makes every score about big**2 / sqrt(E): exp overflows unless
        # the row maximum is subtracted first.
        q[..., 0] = big
        k[..., 0] = big
    return tuple(t.to(device=device, dtype=dtype) for t in (q, k, v))


def _attention_cases(with_value: bool = True) -> List[Case]:
    def make(batch, L, S, E, Ev, mask=None, big=0.0, **kw):
        def build(gen, device, dtype):
            q, k, v = _qkv(gen, device, dtype, batch, L, S, E, Ev, big)
            kwargs = dict(kw)
            if mask == "bool":
                kwargs["attn_mask"] = bool_mask(gen, L, S, device=device)
            elif mask == "padding":
                lengths = torch.randint(1, S, (batch[0],), generator=gen)
                pad = torch.arange(S)[None, :] < lengths[:, None]
                kwargs["attn_mask"] = pad[:, None, None, :].to(device)
            elif mask == "float":
                kwargs["attn_mask"] = randn(gen, L, S, device=device, dtype=dtype)
            args = (q, k, v) if with_value else (q, k)
            return args, kwargs
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("unbatched input with L=3, S=5, E=4, Ev=6", make((), 3, 5, 4, 6), f32),
        Case("batched input (B=2, H=3) with L=5, S=7, E=8, Ev=3 and a bool mask (L, S)",
             make((2, 3), 5, 7, 8, 3, "bool"), f64),
        Case("batched input (B=2) with L=S=4, E=6, Ev=5 and is_causal=True",
             make((2,), 4, 4, 6, 5, is_causal=True), f32),
        Case("batched input (B=2, H=2) with L=3 < S=6, E=5, Ev=4 and is_causal=True",
             make((2, 2), 3, 6, 5, 4, is_causal=True), f64),
        Case("batched input (B=3, H=2) with L=4, S=6, E=4, Ev=3 and a padding mask (B, 1, 1, S)",
             make((3, 2), 4, 6, 4, 3, "padding"), f32),
        Case("batched input (B=2) with L=5, S=3, E=4, Ev=2 and a float mask added to the scores",
             make((2,), 5, 3, 4, 2, "float"), f64),
        Case("batched input (B=2, H=2) with L=4, S=5, E=6, Ev=7 and scale=0.3",
             make((2, 2), 4, 5, 6, 7, scale=0.3), f64),
        Case("input with large logits (scores near 450) and L=4, S=5, E=4, Ev=3",
             make((2,), 4, 5, 4, 3, big=30.0), f32, rtol=2e-3, atol=1e-4),
        Case("input with large logits (scores near 800) and L=4, S=5, E=4, Ev=3",
             make((2,), 4, 5, 4, 3, big=40.0), f64),
    ]


# --------------------------------------------------------------------------- checks


def _scores_close(got, expected, rtol, atol) -> bool:
    """Scores match when finite entries agree and masked ones are -inf or very negative."""
    from ._compare import close
    if not isinstance(got, Tensor) or tuple(got.shape) != tuple(expected.shape):
        return False
    g = got.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    masked = e == float("-inf")
    if bool((g[masked] > -1e4).any()):
        return False
    return close(g.masked_fill(masked, 0.0), e.masked_fill(masked, 0.0), rtol, atol)


ATTENTION_SCORES = Exercise(
    name="attention_scores", reference=_scaling.attention_scores,
    cases=_attention_cases(with_value=False),
    mistakes=attention_mistakes(give="scores", with_value=False),
    forbid_torch=TORCH_ATTENTION, forbid_ref=QKV_ATTENTION, compare=_scores_close,
    legend="(..., L, S)",
)

SCALED_DOT_PRODUCT_ATTENTION = Exercise(
    name="scaled_dot_product_attention", reference=_scaling.scaled_dot_product_attention,
    cases=_attention_cases(), mistakes=attention_mistakes(),
    forbid_torch=TORCH_ATTENTION, forbid_ref=QKV_ATTENTION,
    legend="(..., L, Ev)",
    error_hints=[("x.T", "transpose only the last two axes: key.transpose(-2, -1)")],
)


def check_attention_scores(attention_scores: Callable[..., Tensor], seed: int = 0) -> None:
    """Check ``attention_scores(query, key, attn_mask=None, is_causal=False, scale=None)``.

    Masked scores may be ``-inf`` or any large negative number (below -1e4).

    Raises:
        AssertionError: naming the input it fails on and what to look at.
    """
    __tracebackhide__ = True
    run_check(ATTENTION_SCORES, attention_scores, seed)


def check_scaled_dot_product_attention(scaled_dot_product_attention: Callable[..., Tensor],
                                       seed: int = 0) -> None:
    """Check a student's ``scaled_dot_product_attention`` against the reference.

    Same signature as :func:`qkv.scaled_dot_product_attention`; the check passes
    ``dropout_p=0.0`` (the default), so dropout may be left out.

    Raises:
        AssertionError: naming the input it fails on and what to look at.
    """
    __tracebackhide__ = True
    run_check(SCALED_DOT_PRODUCT_ATTENTION, scaled_dot_product_attention, seed)
