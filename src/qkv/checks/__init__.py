"""Autograder checks: ``check_<name>(student_<name>)`` for every exercise.

Each check runs the student's function (or class) and the reference from
:mod:`qkv` on seeded inputs, on every device present, and raises
``AssertionError`` with a message that names the input and the mistake.
``check_x(f)`` uses fixed inputs (the visible tests); ``check_x(f, seed=None)``
draws fresh ones (the hidden tests).

Test cells import the check afresh (``from qkv.checks import check_softmax``), and
the checks cannot be rebound from a notebook: once this package is imported its
modules are read-only and a snapshot of it (and of what it relies on in torch) is
restored before every test cell and every check (:mod:`._integrity`, :mod:`._audit`).

One public module per reference module it checks (:mod:`.bottleneck`, :mod:`.lookup`,
:mod:`.qkv`, :mod:`.scaling`, :mod:`.multi_head`, :mod:`.masking`, :mod:`.efficient`),
each a leaf: what they share lives in private modules (the harness, the guard, the
attention mistakes). The checks use only :mod:`qkv`'s public names (``qkv.__all__``);
:mod:`qkv` never imports them.
"""

import sys

from ._harness import warnings_to_stdout
from .bottleneck import check_bahdanau_attention
from .lookup import check_additive_score, check_luong_score, check_soft_lookup, check_softmax
from .qkv import check_cross_attention, check_self_attention
from .scaling import (check_attention_scores, check_dot_product_variance,
                      check_scaled_dot_product_attention)
from .multi_head import check_merge_heads, check_MultiHeadAttention, check_split_heads
from .masking import check_causal_mask, check_padding_mask
from .efficient import check_chunked_attention, check_kv_cache_step

from . import _audit as _protection

__all__ = [
    "check_MultiHeadAttention",
    "check_additive_score",
    "check_attention_scores",
    "check_bahdanau_attention",
    "check_causal_mask",
    "check_chunked_attention",
    "check_cross_attention",
    "check_dot_product_variance",
    "check_kv_cache_step",
    "check_luong_score",
    "check_merge_heads",
    "check_padding_mask",
    "check_scaled_dot_product_attention",
    "check_self_attention",
    "check_soft_lookup",
    "check_softmax",
    "check_split_heads",
    "warnings_to_stdout",
]

_protection.protect(sys.modules[__name__])
