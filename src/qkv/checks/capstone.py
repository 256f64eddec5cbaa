"""Checks for the capstone: a block's attention with its cache, the pre-norm block, an ablation.

``attention_forward`` and ``block_forward`` are functions of data: the stream ``x``, the
weights as a ``state_dict`` (a dict of tensors) and the head counts. The check draws those
from a seed, calls the student's function, and compares with
:func:`qkv.capstone.attention_forward` / :func:`qkv.capstone.block_forward`; when they
differ it names the mistake among wrong versions written here (post-norm, a residual
missing, no causal mask, the cache not appended, RoPE positions not offset...). The
ablation is a measurement: :func:`check_ablation` trains the same short run again. The
exercises beyond the page (a block to debug, SwiGLU, the order experiment) are specified in
:mod:`._beyond_capstone`.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Dict

import torch
from torch import Tensor

import qkv

from .harness import (Case, checks_of, close_each, Exercise, half_case, Mistake, randn, make_check,
                      via_float32)
from .mistakes.attention import TORCH_ATTENTION
from .mistakes.capstone import attention_variant, block_variant
from . import _beyond_capstone as c
from ._capstone_ablation import ABLATION_CHECK, CHECK_STEPS, TOLERANCE  # noqa: F401 (the check's constants)
from ._experiment import ExperimentCheck

__all__ = ["check_ablation", "check_attention_forward", "check_block_forward",
           "check_dropout_block_forward", "check_order_sensitivity", "check_swiglu_mlp"]


# ----------------------------------------------------------------------------- inputs
def _weights(gen, device, dtype, D: int, H: int, Hkv: int, prefix: str = "") -> Dict[str, Tensor]:
    E = D // H
    shapes = {"q_proj.weight": (H * E, D), "k_proj.weight": (Hkv * E, D),
              "v_proj.weight": (Hkv * E, D), "out_proj.weight": (D, H * E)}
    return {prefix + n: randn(gen, *s, device=device, dtype=dtype) / math.sqrt(s[1])
            for n, s in shapes.items()}


def _attention_case(B: int, L: int, P: int, D: int, H: int, Hkv: int):
    def build(gen, device, dtype):
        params = _weights(gen, device, dtype, D, H, Hkv)
        x = randn(gen, B, L, D, device=device, dtype=dtype)
        kwargs = {}
        if P:
            E = D // H
            kwargs = {"k_cache": randn(gen, B, Hkv, P, E, device=device, dtype=dtype),
                      "v_cache": randn(gen, B, Hkv, P, E, device=device, dtype=dtype)}
        return (x, params, H, Hkv), kwargs
    return build


def _block_case(B: int, L: int, D: int, H: int, Hkv: int):
    def build(gen, device, dtype):
        params = _weights(gen, device, dtype, D, H, Hkv, "attn.")
        # gains away from 1, so that a norm swapped for the other shows
        params["norm1.weight"] = 1 + 0.5 * randn(gen, D, device=device, dtype=dtype)
        params["norm2.weight"] = 1 + 0.5 * randn(gen, D, device=device, dtype=dtype)
        params["mlp.up.weight"] = randn(gen, 4 * D, D, device=device, dtype=dtype) / math.sqrt(D)
        params["mlp.down.weight"] = randn(gen, D, 4 * D, device=device, dtype=dtype) / math.sqrt(4 * D)
        return (3 * randn(gen, B, L, D, device=device, dtype=dtype), params, H, Hkv), {}
    return build


# ----------------------------------------------------------------------------- exercises
_MASK_HINT = ("the L new positions are the LAST L of the S = P + L keys: new position i may see "
              "keys 0 .. P + i, torch.ones(L, S, dtype=torch.bool).tril(S - L) (chapter 9's "
              "causal_mask_bottom_right)")
_ATT = partial(partial, attention_variant)
#: The pieces of earlier assignments the capstone's answers may use, from the course.
_PIECES = {"apply_rope": qkv.apply_rope, "repeat_kv": qkv.repeat_kv,
           "split_heads": qkv.split_heads, "merge_heads": qkv.merge_heads,
           "causal_mask_bottom_right": qkv.causal_mask_bottom_right}

ATTENTION_FORWARD = Exercise(
    name="attention_forward",
    reference=via_float32(qkv.attention_forward),
    cases=[
        Case("a prompt, no cache: B=2, L=5, D=16, 4 query heads sharing 2 key/value heads",
             _attention_case(2, 5, 0, 16, 4, 2), torch.float64),
        Case("L=3 new positions after P=4 cached ones, 4 query heads, 2 key/value heads",
             _attention_case(2, 3, 4, 16, 4, 2), torch.float64),
        Case("one new position after P=6 cached ones, multi-head (4 key/value heads)",
             _attention_case(1, 1, 6, 16, 4, 4), torch.float32),
        Case("L=2 new positions after P=3 cached ones, multi-query (1 key/value head)",
             _attention_case(2, 2, 3, 24, 4, 1), torch.float32),
        half_case("L=3 new positions after P=2 cached ones, 4 query heads, 2 key/value heads",
                  _attention_case(2, 3, 2, 16, 4, 2)),
    ],
    mistakes=[
        Mistake("no causal mask (each position sees the positions after it)", _MASK_HINT,
                _ATT(mask="none")),
        Mistake("the causal mask aligned to the top left (is_causal=True) with a cache",
                _MASK_HINT, _ATT(mask="top_left")),
        Mistake("the cache not appended: the new positions attend to themselves only",
                "torch.cat([k_cache, k], dim=-2) (and the same for the values) before attending",
                _ATT(cache="ignored")),
        Mistake("the new keys and values put before the cache instead of after it",
                "the newest positions go last: torch.cat([k_cache, k], dim=-2)",
                _ATT(cache="before")),
        Mistake("the old caches returned instead of the appended ones",
                "return (output, k, v) with k and v the caches with the new positions appended",
                _ATT(return_old=True)),
        Mistake("RoPE positions not offset by the cache's length",
                "new position i sits at position P + i: apply_rope(q, offset=P), apply_rope(k, "
                "offset=P) with P = k_cache.shape[-2] (0 without a cache)", _ATT(rope="no_offset")),
        Mistake("RoPE applied after the cache is appended (the cached keys rotated twice)",
                "the cache holds keys already rotated: rotate only the new keys, "
                "apply_rope(k, offset=P), then torch.cat([k_cache, k], dim=-2)",
                _ATT(rope="after_cat")),
        Mistake("no RoPE", "rotate the queries and the keys (not the values) with apply_rope",
                _ATT(rope="none")),
        Mistake("RoPE applied to the queries only (the keys left unrotated)",
                "rotate the queries AND the keys, each with offset=P: the score q_i . k_j "
                "depends on i - j only when both are rotated", _ATT(rope="q_only")),
        Mistake("RoPE applied to the values too", "rotate the queries and the keys only: "
                "positions enter through the scores, the values are mixed as they are",
                _ATT(rope="qkv")),
        Mistake("the heads merged by (weights @ v).reshape(B, L, -1), without the transpose",
                "(weights @ v) is (B, H, L, E): bring the heads next to the width first, "
                "(weights @ v).transpose(1, 2).reshape(B, L, H * E) (merge_heads)",
                _ATT(merge="reshape")),
        Mistake("no output projection (out_proj left out)", "after merging the heads, multiply "
                "by params['out_proj.weight'].T", _ATT(out_proj=False)),
        Mistake("key/value heads tiled ([a, b, a, b]) instead of repeated in place ([a, a, b, b])",
                "query head h uses key/value head h // (num_heads // num_kv_heads): "
                "repeat_kv(k, n_rep) (repeat_interleave on the heads' dim), not .repeat",
                _ATT(repeat="tile")),
        Mistake("no scaling", "multiply the scores by 1/sqrt(E), E = D // num_heads",
                _ATT(scale=False)),
        Mistake("scaled by 1/sqrt(D), the model's width, instead of 1/sqrt(E), a head's",
                "each head's scores are dot products of width E = D // num_heads: multiply them "
                "by 1/sqrt(E)", _ATT(scale="D")),
        Mistake("the caches returned with the key/value heads repeated",
                "cache k and v with their num_kv_heads heads (that is what makes GQA's cache "
                "small); repeat them only to attend", _ATT(cache_repeated=True)),
    ],
    forbid=TORCH_ATTENTION,
    compare=close_each,
    legend="(output (B, L, D), k_cache (B, Hkv, P + L, E), v_cache (B, Hkv, P + L, E))",
    helpers=_PIECES,
)

_BLK = partial(partial, block_variant)
_RESIDUAL_HINT = ("add each sublayer's output to the stream: x = x + attention(norm1(x)), then "
                  "x = x + mlp(norm2(x))")

BLOCK_FORWARD = Exercise(
    name="block_forward",
    reference=via_float32(qkv.block_forward),
    cases=[
        Case("B=2, L=5, D=16, 4 query heads sharing 2 key/value heads",
             _block_case(2, 5, 16, 4, 2), torch.float64),
        Case("B=1, L=7, D=8, 2 heads (multi-head)", _block_case(1, 7, 8, 2, 2), torch.float32),
        half_case("B=2, L=4, D=16, 4 query heads sharing 2 key/value heads",
                  _block_case(2, 4, 16, 4, 2)),
    ],
    mistakes=[
        Mistake("post-norm (the norm after the residual addition) instead of pre-norm",
                "normalise the sublayer's INPUT and leave the stream alone: "
                "x = x + attention(norm1(x)), not x = norm1(x + attention(x))",
                _BLK(arrangement="post")),
        Mistake("no residual connection around the attention", _RESIDUAL_HINT,
                _BLK(attn_residual=False)),
        Mistake("no residual connection around the MLP", _RESIDUAL_HINT,
                _BLK(mlp_residual=False)),
        Mistake("no residual connections", _RESIDUAL_HINT,
                _BLK(attn_residual=False, mlp_residual=False)),
        Mistake("the MLP reads the block's input, not the stream after attention (a parallel block)",
                "the MLP comes after the attention: its input is norm2 of x + attention(...)",
                _BLK(arrangement="parallel")),
        Mistake("LayerNorm instead of RMSNorm (the mean subtracted)", "the block normalises "
                "with rms_norm(x, weight) = x / sqrt(mean(x^2) + eps) * weight: no mean "
                "subtracted, no bias", _BLK(norm_kind="layer")),
        *(Mistake(f"LayerNorm instead of RMSNorm before the {where} (the mean subtracted)",
                  "both norms are rms_norm(x, weight) = x / sqrt(mean(x^2) + eps) * weight: "
                  "no mean subtracted, no bias", _BLK(norm_kind=kind))
          for where, kind in (("attention", "layer_attn"), ("MLP", "layer_mlp"))),
        Mistake("the MLP fed the stream without norm2 (norm2 left out)", "normalise the MLP's "
                "input too: x = x + mlp(rms_norm(x, norm2.weight)), x the stream after the "
                "attention's residual", _BLK(mlp_input="stream")),
        Mistake("the MLP fed norm1 of the block's input (the attention's input) again",
                "the MLP reads the stream after the attention: h = rms_norm(x, norm2.weight) "
                "computed after x = x + attention(...)", _BLK(mlp_input="norm1")),
        Mistake("norm1 and norm2 swapped", "norm1.weight before the attention, norm2.weight "
                "before the MLP", _BLK(norms="swapped")),
        *(Mistake(f"{gain} used for both norms", "norm1.weight before the attention, "
                  "norm2.weight before the MLP", _BLK(norms=gain.split(".")[0]))
          for gain in ("norm1.weight", "norm2.weight")),
        *(Mistake(f"the stream replaced by its normalised copy ({where})", "keep the stream "
                  "as it is and normalise only the sublayer's input: h = rms_norm(x, ...); "
                  "x = x + sublayer(h), not x = rms_norm(x, ...); x = x + sublayer(x)",
                  _BLK(normed=normed))
          for where, normed in (("before both sublayers", ("attn", "mlp")),
                                ("before the attention", ("attn",)),
                                ("before the MLP", ("mlp",)))),
        Mistake("ReLU in the MLP instead of GELU", "the MLP is down(gelu(up(h))): F.gelu",
                _BLK(act="relu")),
        Mistake("SiLU in the MLP instead of GELU", "the MLP is down(gelu(up(h))): F.gelu (SiLU "
                "is SwiGLU's gate, not this block's)", _BLK(act="silu")),
        Mistake("no activation in the MLP", "the MLP is down(gelu(up(h))): F.gelu between them",
                _BLK(act="none")),
        Mistake("GELU's tanh approximation (GPT-2's) in the MLP instead of exact GELU",
                "the block uses exact GELU: F.gelu(x), without approximate=\"tanh\"",
                _BLK(act="gelu_tanh")),
    ],
    legend="(B, L, D)",
    helpers={"attention_forward": qkv.attention_forward, "rms_norm": qkv.rms_norm, **_PIECES},
)




#: This module's checks, by the name test cells call them (for :mod:`.grading`).
CHECKS = checks_of(ATTENTION_FORWARD, BLOCK_FORWARD, ABLATION_CHECK, c.DROPOUT_BLOCK_FORWARD,
                   c.SWIGLU_MLP, ExperimentCheck(c.ORDER_SENSITIVITY),
                   given=("apply_rope", "causal_mask_bottom_right", "merge_heads",
                          "random_block_params", "repeat_kv", "rms_norm", "split_heads"))


# --------------------------------------------------------------------------- the checks

check_attention_forward = make_check(
    CHECKS, "check_attention_forward", __name__,
    "Check ``attention_forward(x, params, num_heads, num_kv_heads, k_cache=None, v_cache=None)`` "
    "against :func:`qkv.capstone.attention_forward`: it must return ``(output, k_cache, "
    "v_cache)``.\n\n"
    "While it runs, the notebook's ``apply_rope``, ``repeat_kv``, ``split_heads``, "
    "``merge_heads`` and ``causal_mask_bottom_right`` are the course's.")

check_block_forward = make_check(
    CHECKS, "check_block_forward", __name__,
    "Check ``block_forward(x, params, num_heads, num_kv_heads)`` against "
    ":func:`qkv.capstone.block_forward`: a pre-norm block, with residual connections.\n\n"
    "While it runs, the notebook's ``attention_forward`` and ``rms_norm`` are the course's, so a "
    "mistake in the attention costs only its own test.")

check_ablation = make_check(
    CHECKS, "check_ablation", __name__,
    "Check ``ablation(seed, steps)``: train the baseline with one's own change, return "
    "``(options, validation loss)``.\n\n"
    "The check calls it on a short run (:data:`CHECK_STEPS` steps, a seed drawn from ``seed``): "
    "the options must change the baseline (:func:`qkv.ablation_baseline`) and the loss must be "
    "what :func:`qkv.ablation_loss` measures for those options, that seed and that number of "
    "steps, within :data:`TOLERANCE`: a measurement of the run described, not a number typed in "
    "or taken from another run.")

check_dropout_block_forward = make_check(
    CHECKS, "check_dropout_block_forward", __name__,
    "Check the debugged ``dropout_block_forward(x, params, num_heads, dropout=0.1, "
    "training=False)``: a pre-norm block without positions, dropout on each sublayer's output in "
    "training only. A bug of the printed version still present is named (all of them).")

check_swiglu_mlp = make_check(
    CHECKS, "check_swiglu_mlp", __name__,
    "Check ``swiglu_mlp(h, params)``, SwiGLU's gated MLP (not in the course's reference).")

check_order_sensitivity = make_check(
    CHECKS, "check_order_sensitivity", __name__,
    "Check the experiment ``order_sensitivity(num_layers, rope, generator)`` as a measurement "
    "(see :mod:`._experiment`).")
