"""Autograder checks: ``check_<name>(student_<name>)`` for every exercise.

Each check runs the student's function (or class) and the reference from
:mod:`qkv` on seeded inputs, on every device present, and raises
``AssertionError`` with a message that names the input and the mistake.
Test cells import the check afresh (``from qkv.checks import check_softmax``),
so a notebook that rebinds the name ``check_softmax`` does not change a verdict.

This package depends on :mod:`qkv`; :mod:`qkv` never imports it.
"""

from ._harness import warnings_to_stdout
from .efficient import check_chunked_attention, check_kv_cache_step
from .scaling import check_attention_scores, check_scaled_dot_product_attention
from .lookup import check_additive_score, check_luong_score, check_soft_lookup
from .masking import check_causal_mask, check_padding_mask
from .multi_head import check_merge_heads, check_MultiHeadAttention, check_split_heads
from .qkv import check_cross_attention, check_dot_product_variance, check_self_attention
from .bottleneck import check_bahdanau_attention
from .softmax import check_softmax

__all__ = [
    "check_MultiHeadAttention",
    "check_additive_score",
    "check_attention_scores",
    "check_bahdanau_attention",
    "check_causal_mask",
    "check_chunked_attention",
    "check_kv_cache_step",
    "check_luong_score",
    "check_merge_heads",
    "check_padding_mask",
    "check_scaled_dot_product_attention",
    "check_soft_lookup",
    "check_softmax",
    "check_split_heads",
    "warnings_to_stdout",
    "check_cross_attention",
    "check_dot_product_variance",
    "check_self_attention",
]
