"""qkv: reference implementations of attention for the course of the same name.

Everything here mirrors :func:`torch.nn.functional.scaled_dot_product_attention`:
its argument names, its shape legend (queries ``(B, H, L, E)``, keys
``(B, H, S, E)``, values ``(B, H, S, Ev)``, weights ``(B, H, L, S)``) and its mask
convention (a bool mask is ``True`` where attention is allowed).
"""

from .bottleneck import ReverseTask, Seq2Seq, bahdanau_attention
from .efficient import chunked_attention, kv_cache_step, triton_attention
from .lookup import (
    AdditiveAttention,
    LuongAttention,
    additive_score,
    attend,
    attention_weights,
    hard_lookup,
    luong_score,
    soft_lookup,
    softmax,
)
from .masking import (
    causal_mask,
    from_torch_mask,
    padding_mask,
    sliding_window_mask,
    to_additive_mask,
    to_torch_mask,
)
from .multi_head import MultiHeadAttention, combine_masks, merge_heads, split_heads
from .qkv import cross_attention, self_attention
from .scaling import (
    attention_scores,
    dot_product_variance,
    scaled_dot_product_attention,
    scaled_dot_product_attention_with_weights,
)

__version__ = "0.1.0"

__all__ = [
    "AdditiveAttention",
    "LuongAttention",
    "MultiHeadAttention",
    "ReverseTask",
    "Seq2Seq",
    "additive_score",
    "attend",
    "attention_scores",
    "attention_weights",
    "bahdanau_attention",
    "causal_mask",
    "chunked_attention",
    "combine_masks",
    "cross_attention",
    "dot_product_variance",
    "from_torch_mask",
    "hard_lookup",
    "kv_cache_step",
    "luong_score",
    "merge_heads",
    "padding_mask",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_with_weights",
    "self_attention",
    "sliding_window_mask",
    "soft_lookup",
    "softmax",
    "split_heads",
    "to_additive_mask",
    "to_torch_mask",
    "triton_attention",
]
