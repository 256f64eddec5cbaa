"""Checks for multi-head attention: ``split_heads``, ``merge_heads``, ``MultiHeadAttention``."""

from __future__ import annotations

from functools import partial
from typing import List

import torch

import qkv

from .mistakes.attention import TORCH_ATTENTION
from .harness import Case, checks_of, Exercise, half_case, Mistake, randn, make_check, via_float32
from .mistakes.multi_head import (MHA_ERROR_HINTS, MHA_MISTAKES, TRANSPOSE_HINT,
                                   merge_variant, split_variant)
from .mistakes.multi_head_module import (close_pair, mha_cases, reference, run_student,
                                         with_spec_dict)
from . import _beyond_heads as e, _beyond_mid as m
from ._experiment import ExperimentCheck

__all__ = [
    "check_MultiHeadAttention",
    "check_merge_heads",
    "check_head_difference",
    "check_multi_head_self_attention",
    "check_split_heads",
    "check_talking_heads_attention",
]

_TRANSPOSE_FIRST = "transposing before the reshape (the features and positions are mixed)"
_TRANSPOSE_FIRST_HINT = ("split the features first, then move the heads: x.reshape(B, L, H, D // H)"
                         ".transpose(1, 2); transposing x first cuts each head out of the "
                         "(D, L) layout, across positions")


# --------------------------------------------------------------------------- split / merge


def _split_cases() -> List[Case]:
    def make(B, L, D, H):
        def build(gen, device, dtype):
            return (randn(gen, B, L, D, device=device, dtype=dtype), H), {}
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("input (B=2, L=3, D=8) with num_heads=2", make(2, 3, 8, 2), f32),
        Case("input (B=1, L=5, D=12) with num_heads=3", make(1, 5, 12, 3), f64),
        Case("input (B=3, L=4, D=6) with num_heads=6", make(3, 4, 6, 6), f32),
        Case("input (B=2, L=4, D=8) with num_heads=4 (L equals num_heads)", make(2, 4, 8, 4), f64),
        half_case("input (B=2, L=3, D=6) with num_heads=2", make(2, 3, 6, 2), torch.bfloat16),
    ]


def _merge_cases() -> List[Case]:
    def make(B, H, L, Dh, strided):
        def build(gen, device, dtype):
            if strided:  # as split_heads leaves it: a transposed, non-contiguous view
                x = randn(gen, B, L, H, Dh, device=device, dtype=dtype).transpose(1, 2)
            else:
                x = randn(gen, B, H, L, Dh, device=device, dtype=dtype)
            return (x,), {}
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("input (B=2, H=2, L=3, Dh=4)", make(2, 2, 3, 4, False), f32),
        Case("non-contiguous input (B=1, H=3, L=5, Dh=2), as split_heads returns it",
             make(1, 3, 5, 2, True), f64),
        Case("input (B=3, H=4, L=4, Dh=3) (L equals H)", make(3, 4, 4, 3, False), f32),
        half_case("input (B=2, H=3, L=2, Dh=4)", make(2, 3, 2, 4, False), torch.bfloat16),
    ]


SPLIT_HEADS = Exercise(
    name="split_heads", reference=qkv.split_heads, cases=_split_cases(),
    mistakes=[
        Mistake("reshape without transpose", TRANSPOSE_HINT, partial(split_variant, how="reshape")),
        Mistake("heads interleaved (the head index varies fastest)",
                "each head takes a contiguous block of D // H features: reshape to "
                "(B, L, H, D // H), not (B, L, D // H, H)", partial(split_variant, how="interleaved")),
        Mistake("transpose missing (heads after the positions)",
                "the result is (B, H, L, D // H): transpose(1, 2) after the reshape",
                partial(split_variant, how="no transpose")),
        Mistake(_TRANSPOSE_FIRST, _TRANSPOSE_FIRST_HINT, partial(split_variant, how="transpose first")),
        Mistake("the number of heads and the head width swapped in the reshape",
                "reshape to (B, L, H, D // H): H heads, each D // H features wide; "
                "(B, L, D // H, H) makes D // H heads of width H",
                partial(split_variant, how="sizes swapped")),
        Mistake("the head width computed as num_heads // D (it is 0)",
                "each head is D // num_heads features wide, D = x.shape[-1]",
                partial(split_variant, how="H // D")),
    ],
    legend="(B, H, L, D // H)",
    # x.transpose(1, 2).view(...) raises rather than returning a wrong tensor.
    error_hints=[("view size is not compatible",
                  f"{_TRANSPOSE_FIRST}? {_TRANSPOSE_FIRST_HINT} (view needs a contiguous tensor, "
                  f"and a transposed one is not)"),
                 ("tuple of ints", "a size is a float: D / H is a float in Python 3 even when "
                  "H divides D; use D // H")],
)

MERGE_HEADS = Exercise(
    name="merge_heads", reference=qkv.merge_heads, cases=_merge_cases(),
    mistakes=[
        Mistake("reshape without transpose",
                "transpose(1, 2) back to (B, L, H, Dh) first, then reshape to (B, L, H * Dh)",
                partial(merge_variant, how="reshape")),
        Mistake("heads interleaved", "concatenate whole heads: head 0's Dh features, then head 1's",
                partial(merge_variant, how="interleaved")),
        Mistake("heads averaged instead of concatenated",
                "keep every head: the result is (B, L, H * Dh)", partial(merge_variant, how="mean")),
        Mistake("the last two axes swapped (transpose(2, 3) instead of transpose(1, 2))",
                "bring the heads next to the features: x.transpose(1, 2) gives (B, L, H, Dh), "
                "then reshape to (B, L, H * Dh); transposing L and Dh mixes positions",
                partial(merge_variant, how="last two")),
        Mistake("heads summed instead of concatenated",
                "keep every head side by side: the result is (B, L, H * Dh)",
                partial(merge_variant, how="sum")),
        Mistake("the heads laid one after another along the positions (cat on dim 1)",
                "the heads go side by side in the features: each position gets H * Dh "
                "features, head 0's first (cat on the last dim, or transpose(1, 2) + reshape)",
                partial(merge_variant, how="along positions")),
        Mistake("the heads kept in front (B, H, L * Dh)",
                "move the positions before the heads first: x.transpose(1, 2) is "
                "(B, L, H, Dh), then reshape to (B, L, H * Dh)",
                partial(merge_variant, how="heads first")),
        Mistake("the shape unpacked in the wrong order (B, L, H, Dh = x.shape)",
                "merge_heads gets (B, H, L, Dh): B, H, L, Dh = x.shape",
                partial(merge_variant, how="unpacked")),
    ],
    legend="(B, L, H * Dh)",
    error_hints=[("view size is not compatible",
                  "the transposed tensor is not contiguous: use .reshape, or .contiguous().view")],
)


# --------------------------------------------------------------------------- the module

MULTI_HEAD_ATTENTION = Exercise(
    name="MultiHeadAttention", reference=via_float32(reference), cases=mha_cases(),
    mistakes=[with_spec_dict(m) for m in MHA_MISTAKES],
    run_student=run_student,
    forbid=TORCH_ATTENTION,
    # The student's split_heads and merge_heads are the reference's while the check runs (a
    # mistake there costs their own tests only); combine_masks is given by the assignment.
    helpers={"split_heads": qkv.split_heads, "merge_heads": qkv.merge_heads,
             "combine_masks": qkv.combine_masks},
    compare=close_pair,
    legend="the output like the query, (B, L, embed_dim); with need_weights=True, "
           "(output, weights) with weights (B, L, S), or (B, H, L, S) per head",
    error_hints=MHA_ERROR_HINTS,
)


#: This module's checks, by the name test cells call them (for :mod:`.grading`).
CHECKS = checks_of(SPLIT_HEADS, MERGE_HEADS, MULTI_HEAD_ATTENTION, e.MULTI_HEAD_SELF_ATTENTION,
                   m.TALKING_HEADS_ATTENTION, ExperimentCheck(m.HEAD_DIFFERENCE),
                   given=("combine_masks",))


# --------------------------------------------------------------------------- the checks

check_split_heads = make_check(
    CHECKS, "check_split_heads", __name__,
    "Check ``split_heads(x, num_heads)`` against :func:`qkv.split_heads`.")

check_merge_heads = make_check(
    CHECKS, "check_merge_heads", __name__,
    "Check ``merge_heads(x)`` against :func:`qkv.merge_heads`.")

check_MultiHeadAttention = make_check(
    CHECKS, "check_MultiHeadAttention", __name__,
    "Check a student's ``MultiHeadAttention`` class against :class:`qkv.MultiHeadAttention`.\n\n"
    "The check builds the class with the same arguments as the reference (``embed_dim, num_heads,"
    " kdim=, vdim=, device=, dtype=``), copies the same weights into its ``q_proj``, ``k_proj``, "
    "``v_proj`` and ``out_proj`` (``nn.Linear``), and compares ``forward``'s output.", wants_class=True)

check_multi_head_self_attention = make_check(
    CHECKS, "check_multi_head_self_attention", __name__,
    "Check the fixed ``multi_head_self_attention(x, W_q, W_k, W_v, W_o, num_heads)``; a bug of "
    "the printed version left in is named.")

check_talking_heads_attention = make_check(
    CHECKS, "check_talking_heads_attention", __name__,
    "Check ``talking_heads_attention(query, key, value, pre_mix, post_mix)``: the scores mixed "
    "across heads by ``pre_mix`` before the softmax, the weights by ``post_mix`` after it (new "
    "head ``j`` = ``sum_h mix[j, h] * head h``), a variation the reference does not contain.")

check_head_difference = make_check(
    CHECKS, "check_head_difference", __name__,
    "Check the experiment ``head_difference(share, generator)`` as a measurement (see "
    ":mod:`._experiment`).")
