"""What every attention check shares: the forbidden lists, the attention mistakes, seeded inputs.

The scaling, qkv and efficient checks all compare a form of scaled dot-product
attention: they refuse the same delegations (:data:`TORCH_ATTENTION`; every function
of :mod:`qkv` is refused anyway), recognise the same mistakes (:func:`attention_mistakes`,
computed by :func:`attend` with one switch turned) and draw the same kind of
queries, keys and values (:func:`qkv_inputs`). The reference is reached through
:mod:`qkv`'s public names only.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor


from ..harness import Forbidden, Mistake, randn

# Torch's own attention, forbidden in every attention exercise: by name, and any torch function,
# aten operator or library function whose name says attention (SDPA's kernels, its choice of
# kernel, nn.MultiheadAttention, nn.Transformer*), and the softmax variants only SDPA uses.
# Private torch functions are caught by these patterns, never named: a name torch drops
# would break the import of the checks.
TORCH_ATTENTION = Forbidden({
    F.scaled_dot_product_attention: "torch.nn.functional.scaled_dot_product_attention",
    F.multi_head_attention_forward: "nn.MultiheadAttention (F.multi_head_attention_forward)",
}, patterns=("attention", "sdp", "transformer", "_safe_softmax", "_masked_softmax"))

#: What a student needs when a finite fill overflows the dtype of the scores.
FILL_HINT = ("a finite fill like -1e9 overflows in float16 (its largest value is 65504): use "
             "float('-inf') or torch.finfo(scores.dtype).min")
SCALE_HINT = "multiply the scores by scale, or by 1/sqrt(E) with E = query.shape[-1] when scale is None"
_CONSTANTS = (2, 3, 4, 5, 6, 8, 16, 32, 64, 128, 256, 512)


# The causal mask's off-by-one mistakes, named once for every check that builds the mask
# (causal_mask itself, and each attention that applies is_causal).
CAUSAL_DIAGONAL_MASKED = ("causal mask off by one (the diagonal is masked)",
                          "query i may attend to keys 0..i, itself included: tril with diagonal=0")
CAUSAL_FUTURE_ALLOWED = ("causal mask off by one (one future key is allowed)",
                         "query i may attend to keys 0..i only: tril with diagonal=0")


#: The mistake of a softmax without each row's maximum subtracted (named in every check that
#: has a case with large logits).
OVERFLOW = ("a softmax that overflows on large logits",
            "subtract each row's maximum before exp (softmax does not change, exp no longer "
            "overflows)")


def row_softmax(scores: Tensor, dim: Optional[int] = -1, stable: bool = True) -> Tensor:
    """The softmax over ``dim`` (``None``: the axis torch picks when F.softmax is given no dim,
    0 of a 1-D or 3-D tensor, 1 otherwise); ``stable=False``: exp over its sum, no maximum
    subtracted."""
    if dim is None:
        dim = 0 if scores.dim() in (0, 1, 3) else 1
    if stable:
        return torch.softmax(scores, dim=dim)
    e = scores.exp()
    return e / e.sum(dim=dim, keepdim=True)


def transposed_key(key: Tensor, key_t: Any = None) -> Tensor:
    """``key`` transposed as a right answer does (``key_t=None``) or as a mistake does.

    Args:
        key_t: ``None`` (the last two axes), ``"T"`` (every axis reversed, as ``key.T``)
            or a pair of axes to swap.
    """
    if key_t is None:
        return key.transpose(-2, -1)
    if key_t == "T":
        return key.permute(*reversed(range(key.dim())))
    return key.transpose(*key_t)


def _masked(scores: Tensor, mask: Optional[Tensor], mask_mode: str,
            fill: float = float("-inf")) -> Tuple[Tensor, Optional[Tensor]]:
    """Apply ``mask`` as ``mask_mode`` says; return the scores and the bool mask still to apply.

    ``fill`` is what masked scores become (a finite one, like -1e9, overflows in float16).
    """
    if mask is not None and mask.dtype != torch.bool:
        if mask_mode == "multiply_float":
            scores = scores * mask
        elif mask_mode != "ignored":
            scores = scores + mask
        mask = None
    if mask is not None:
        if mask_mode == "before":
            scores = scores.masked_fill(~mask, fill)
        elif mask_mode == "inverted":
            scores = scores.masked_fill(mask, float("-inf"))
        elif mask_mode == "multiply":
            scores = scores * mask
    return scores, mask


def attend(query: Tensor, key: Tensor, value: Optional[Tensor] = None, attn_mask=None,
           dropout_p: float = 0.0, is_causal: bool = False, scale=None, *,
           factor: Any = None, key_t: Any = None,
           mask_mode: str = "before", causal_diag: int = 0, causal_align: str = "top",
           dim: int = -1, stable: bool = True, give: str = "output",
           fill: float = float("-inf")) -> Tensor:
    """Attention with switches that reproduce common mistakes (all off: the right answer).

    ``factor(E, Ev, scale)`` gives the factor applied to the scores (``"keys"``: 1/sqrt(S),
    the number of keys, when ``scale`` is None); ``key_t`` a
    wrong transpose of the key (``"T"`` or a pair of axes); ``mask_mode`` one of
    before/inverted/after/ignored/multiply/multiply_float (a float
    mask multiplied), or ``"added"`` (a bool ``attn_mask`` added to
    the scores as 0/1); ``fill`` the value masked scores get; ``causal_diag``/``causal_align`` a
    shifted causal mask; ``dim`` the softmax axis; ``stable=False`` the softmax
    without the maximum subtracted; ``give`` output/weights/scores/raw.
    """
    E = query.shape[-1]
    Ev = value.shape[-1] if value is not None else E
    if factor is None:
        c = 1.0 / math.sqrt(E) if scale is None else scale
    elif factor == "keys":  # 1/sqrt(S), the number of keys, in place of 1/sqrt(E)
        c = 1.0 / math.sqrt(key.shape[-2]) if scale is None else scale
    else:
        c = factor(E, Ev, scale)
    raw = query @ transposed_key(key, key_t)
    scores = raw * c
    L, S = scores.shape[-2], scores.shape[-1]
    if mask_mode == "added" and attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask, mask_mode = attn_mask.to(scores.dtype), "before"  # True/False become 1/0
    mask = attn_mask
    if is_causal:
        diag = causal_diag + (S - L if causal_align == "bottom" else 0)
        mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(diag)
        if causal_align == "ignored":
            mask = None
    scores, mask = _masked(scores, mask, mask_mode, fill)
    if give == "raw":
        return raw
    if give == "scores":
        return scores
    weights = row_softmax(scores, dim, stable)
    if mask is not None and mask_mode == "after":
        weights = weights.masked_fill(~mask, 0.0)
    if give == "weights":
        return weights
    return weights @ value


def _scale_mistakes(a: Callable[..., Any], with_value: bool) -> List[Mistake]:
    out = [
        Mistake("no scaling", SCALE_HINT, partial(a, factor=lambda E, Ev, s: 1.0)),
        Mistake("scaling by E instead of sqrt(E)", SCALE_HINT,
                partial(a, factor=lambda E, Ev, s: 1.0 / E)),
        Mistake("multiplying by sqrt(E) instead of dividing", SCALE_HINT,
                partial(a, factor=lambda E, Ev, s: math.sqrt(E))),
        Mistake("ignoring the scale argument", SCALE_HINT,
                partial(a, factor=lambda E, Ev, s: 1.0 / math.sqrt(E))),
        Mistake("dividing by scale instead of multiplying", SCALE_HINT,
                partial(a, factor=lambda E, Ev, s: 1.0 / math.sqrt(E) if s is None else 1.0 / s)),
        Mistake("scaling by sqrt(S), the number of keys, instead of sqrt(E)",
                SCALE_HINT + ": the scale follows the width of the dot products, not how many "
                "keys there are", partial(a, factor="keys")),
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
    return out


def _mask_mistakes(a: Callable[..., Any], attn_mask: bool = True) -> List[Mistake]:
    """The masks' mistakes; ``attn_mask=False``: of a function with is_causal and no attn_mask,
    where the mistakes only a given mask shows would name is_causal ignored instead."""
    mask_hint = "a bool attn_mask is True where attention is allowed (SDPA's convention)"
    given_only = ("added", "ignored", "multiply_float")
    return [m for m in _every_mask_mistake(a, mask_hint)
            if attn_mask or m.fn.keywords.get("mask_mode") not in given_only]


def _every_mask_mistake(a: Callable[..., Any], mask_hint: str) -> List[Mistake]:
    return [
        Mistake("inverted bool mask",
                mask_hint + ": fill the scores with -inf where the mask is False "
                "(masked_fill(~attn_mask, -inf)); nn.MultiheadAttention uses the opposite",
                partial(a, mask_mode="inverted")),
        Mistake("a bool mask added to the scores as 0/1",
                "adding a bool attn_mask adds 1 where it is True and 0 where it is False: "
                "nothing is hidden; " + mask_hint + ": fill the scores with -inf where it is "
                "False (masked_fill(~attn_mask, float('-inf'))); only a float mask is added",
                partial(a, mask_mode="added")),
        Mistake("a finite fill like -1e9 (it overflows in float16)", FILL_HINT,
                partial(a, fill=-1e9)),
        Mistake("mask ignored", "apply attn_mask (bool: -inf where False; float: add it) and "
                "is_causal before the softmax", partial(a, mask_mode="ignored")),
        Mistake("masking by multiplying the scores by the mask",
                "a masked score must become -inf (masked_fill), not 0: exp(0) is not 0",
                partial(a, mask_mode="multiply")),
        Mistake("a float mask multiplied with the scores instead of added",
                "a float attn_mask is a bias: add it to the scores (scores + attn_mask), so "
                "that -inf hides a key and 0 leaves it as it is",
                partial(a, mask_mode="multiply_float")),
        Mistake(*CAUSAL_DIAGONAL_MASKED, partial(a, causal_diag=-1)),
        Mistake(*CAUSAL_FUTURE_ALLOWED, partial(a, causal_diag=1)),
        Mistake("causal mask aligned to the bottom right instead of the top left",
                "with L != S the causal mask starts at the top-left corner: "
                "torch.ones(L, S).tril(), as SDPA's is_causal does",
                partial(a, causal_align="bottom")),
        Mistake("is_causal ignored", "when is_causal=True, mask the future: query i sees keys 0..i",
                partial(a, causal_align="ignored")),
    ]


def _softmax_mistakes(a: Callable[..., Any]) -> List[Mistake]:
    return [
        Mistake("mask applied after the softmax",
                "mask the scores (-inf) before the softmax, so the allowed weights sum to one",
                partial(a, mask_mode="after")),
        *(Mistake("softmax over the wrong axis",
                  "each query's weights over the keys sum to one: softmax over the last dim (-1)",
                  partial(a, dim=d)) for d in (-2, 0, 1)),
        Mistake(*OVERFLOW, partial(a, stable=False)),
    ]


def attention_mistakes(give: str = "output", with_value: bool = True,
                       attn_mask: bool = True) -> List[Mistake]:
    """The named mistakes of scaled dot-product attention, as :class:`Mistake` objects.

    Args:
        give: what the exercise returns: ``"output"`` or ``"scores"``.
        with_value: whether it takes a value (and so can be scaled by its size).
        attn_mask: whether it takes an attn_mask (else is_causal alone).

    Returns:
        The mistakes, most specific first.
    """
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
    out += _scale_mistakes(a, with_value) + _mask_mistakes(a, attn_mask)
    if give != "scores":
        out += _softmax_mistakes(a)
    key_hint = ("transpose only the last two axes of key: key.transpose(-2, -1) (key.T reverses "
                "every axis of a batched tensor)")
    out += [
        Mistake("wrong axes transposed on the key (key.T)", key_hint, partial(a, key_t="T")),
        Mistake("wrong axes transposed on the key", key_hint, partial(a, key_t=(0, 1))),
        Mistake("wrong axes transposed on the key", key_hint, partial(a, key_t=(1, 2))),
    ]
    return out


def qkv_inputs(gen: torch.Generator, device: torch.device, dtype: torch.dtype, batch: tuple,
               L: int, S: int, E: int, Ev: int, big: float = 0.0) -> Tuple[Tensor, Tensor, Tensor]:
    """Seeded queries ``(*batch, L, E)``, keys ``(*batch, S, E)`` and values ``(*batch, S, Ev)``.

    Args:
        big: when not 0, a component shared by every query and key, so that every
            score is about ``big**2 / sqrt(E)``: exp overflows unless the row maximum
            is subtracted first. Negative: the keys' component has the opposite sign, every
            score is about ``-big**2 / sqrt(E)``, and a finite fill (-25, say) outweighs
            every real key.
    """
    q = randn(gen, *batch, L, E)
    k = randn(gen, *batch, S, E)
    v = randn(gen, *batch, S, Ev)
    if big:
        q[..., 0] = abs(big)
        k[..., 0] = big
    return tuple(t.to(device=device, dtype=dtype) for t in (q, k, v))


def qkv_case(batch: tuple, L: int, S: int, E: int, Ev: int, big: float = 0.0, **kwargs: Any):
    """A case's ``build``: :func:`qkv_inputs` (seeded ``(query, key, value)``) and ``kwargs``."""
    def build(gen, device, dtype):
        return qkv_inputs(gen, device, dtype, batch, L, S, E, Ev, big), kwargs
    return build
