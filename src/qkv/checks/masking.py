"""Checks for the masks: ``causal_mask``, ``padding_mask``, the masking step ``masked_scores`` and
the variation ``global_window_mask`` (True = attention allowed; the last two are specified in
:mod:`._masked`)."""

from __future__ import annotations

from functools import partial
from typing import List

import torch

import qkv

from ._masked import GLOBAL_WINDOW_MASK, MASKED_SCORES
from .mistakes.attention import CAUSAL_DIAGONAL_MASKED, CAUSAL_FUTURE_ALLOWED
from .harness import Case, checks_of, Exercise, Forbidden, Mistake, make_check, sizes
from . import _beyond_masking as b
from ._experiment import ExperimentCheck

__all__ = [
    "check_causal_mask",
    "check_global_window_mask",
    "check_masked_scores",
    "check_padded_causal_attention",
    "check_padding_leak",
    "check_padding_mask",
]

_CONVENTION = ("a bool mask is True where attention is allowed (SDPA's convention; "
               "nn.MultiheadAttention uses the opposite)")


def _causal_variant(L, S=None, device=None, *, diag=0, align="top", invert=False, square=False):
    S = L if S is None or square else S
    allowed = torch.ones(L, S, dtype=torch.bool, device=device).tril(
        diag + (S - L if align == "bottom" else 0))
    return ~allowed if invert else allowed


_CAUSAL_MISTAKES = [
    Mistake("inverted mask (True marks the future)", _CONVENTION + ": use torch.tril, not triu",
            partial(_causal_variant, invert=True)),
    Mistake(*CAUSAL_DIAGONAL_MASKED, partial(_causal_variant, diag=-1)),
    Mistake(*CAUSAL_FUTURE_ALLOWED, partial(_causal_variant, diag=1)),
    Mistake("causal mask aligned to the bottom right instead of the top left",
            "with L != S the diagonal starts at the top-left corner, as SDPA's is_causal",
            partial(_causal_variant, align="bottom")),
    Mistake("S ignored (a square L x L mask)", "the mask has shape (L, S); S defaults to L",
            partial(_causal_variant, square=True)),
]


def _causal_cases() -> List[Case]:
    return [
        Case("L=4 (S omitted)", sizes(4), None),
        Case("L=3, S=5", sizes(3, 5, here=True), None),
        Case("L=5, S=3", sizes(5, 3, here=True), None),
        Case("L=1, S=1", sizes(1, 1), None),
        Case("L=6, S=6 and device given", sizes(6, 6, here=True), None),
    ]


def _padding_variant(lengths, S=None, *, invert=False, inclusive=False, transpose=False,
                     ignore_S=False, longest="max"):
    lengths = torch.as_tensor(lengths)
    longest = {"max": lambda: int(lengths.max()), "count": lambda: len(lengths),
               "last": lambda: int(lengths[-1])}[longest]()
    S = longest if S is None or ignore_S else S
    pos = torch.arange(S, device=lengths.device)
    real = pos[None, :] <= lengths[:, None] if inclusive else pos[None, :] < lengths[:, None]
    if invert:
        real = ~real
    return real.T if transpose else real


_PADDING_MISTAKES = [
    Mistake("inverted mask (True marks padding)",
            _CONVENTION + ": True for real tokens, False for padding",
            partial(_padding_variant, invert=True)),
    Mistake("off by one (one padding position allowed)",
            "positions 0..length-1 are real: arange(S) < length, not <=",
            partial(_padding_variant, inclusive=True)),
    Mistake("transposed (S, B) instead of (B, S)", "one row per sequence: shape (B, S)",
            partial(_padding_variant, transpose=True)),
    Mistake("S ignored (padded to the longest length)",
            "when S is given the mask has S columns; only S=None means max(lengths)",
            partial(_padding_variant, ignore_S=True)),
    Mistake("S=None taken as the last length, not the longest", "with S=None the mask is "
            "padded to the longest sequence, wherever it is: S = int(lengths.max())",
            partial(_padding_variant, longest="last")),
    Mistake("S=None taken as len(lengths), the number of sequences, not the longest length",
            "len(lengths) is B, the number of sequences; with S=None the mask is padded to the "
            "longest sequence: S = int(lengths.max())", partial(_padding_variant,
                                                                longest="count")),
]


def _padding_cases() -> List[Case]:
    def make(lengths, S=None, tensor=True):
        def build(gen, device, dtype):
            ls = torch.tensor(lengths, device=device) if tensor else list(lengths)
            return ((ls,) if S is None else (ls, S)), {}
        return build

    return [
        Case("lengths tensor [3, 1, 4] (S omitted)", make([3, 1, 4]), None),
        Case("lengths tensor [2, 5] with S=7", make([2, 5], 7), None),
        Case("lengths as a list [1, 3, 3, 2] with S=4", make([1, 3, 3, 2], 4, tensor=False), None),
        Case("lengths tensor [6] with S=6 (no padding)", make([6], 6), None),
        Case("lengths tensor [6, 2, 3] (S omitted; the longest is not the last)", make([6, 2, 3]),
             None),
    ]


# Torch's own causal masks (nn.Transformer.generate_square_subsequent_mask, the causal
# biases of torch.nn.attention.bias), whatever they are called.
_TORCH_CAUSAL = Forbidden(patterns=("subsequent_mask", "causal"))

CAUSAL_MASK = Exercise(
    name="causal_mask", reference=qkv.causal_mask, cases=_causal_cases(),
    mistakes=_CAUSAL_MISTAKES, forbid=_TORCH_CAUSAL,
    legend="(L, S)",
)

PADDING_MASK = Exercise(
    name="padding_mask", reference=qkv.padding_mask, cases=_padding_cases(),
    mistakes=_PADDING_MISTAKES,
    legend="(B, S)",
    error_hints=[("has no attribute", "lengths may be a list of ints: convert it first with "
                  "torch.as_tensor(lengths)")],
)


#: This module's checks, by the name test cells call them (for :mod:`.grading`).
CHECKS = checks_of(CAUSAL_MASK, PADDING_MASK, MASKED_SCORES, GLOBAL_WINDOW_MASK,
                   b.PADDED_CAUSAL_ATTENTION, ExperimentCheck(b.PADDING_LEAK))


# --------------------------------------------------------------------------- the checks

check_causal_mask = make_check(
    CHECKS, "check_causal_mask", __name__,
    "Check ``causal_mask(L, S=None, device=None)`` against :func:`qkv.causal_mask`.")

check_padding_mask = make_check(
    CHECKS, "check_padding_mask", __name__,
    "Check ``padding_mask(lengths, S=None)`` against :func:`qkv.padding_mask`.")

check_masked_scores = make_check(
    CHECKS, "check_masked_scores", __name__,
    "Check ``masked_scores(scores, attn_mask=None, is_causal=False)``: the reference attention's "
    "masking step (bool mask: -inf where False; float mask: added; ``is_causal``: the upper-left "
    "causal mask; both at once: ``ValueError``). While it runs, the student's ``causal_mask`` is "
    "the course's: a mistake there costs only its own test.")

check_global_window_mask = make_check(
    CHECKS, "check_global_window_mask", __name__,
    "Check the variation ``global_window_mask(L, window, n_global, device=None)``: a causal "
    "window of ``window`` keys, and tokens ``0..n_global-1`` that see and are seen by all.")

check_padded_causal_attention = make_check(
    CHECKS, "check_padded_causal_attention", __name__,
    "Check the fixed ``padded_causal_attention(query, key, value, lengths)``: query ``i`` of "
    "sequence ``b`` sees keys ``j <= i`` with ``j < lengths[b]``; a bug of the printed version "
    "left in is named.")

check_padding_leak = make_check(
    CHECKS, "check_padding_leak", __name__,
    "Check the experiment ``padding_leak(length, S, generator)`` as a measurement (see "
    ":mod:`._experiment`).")
