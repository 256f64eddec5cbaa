"""Multi-head attention, batch-first, built on :func:`qkv.scaled_dot_product_attention`.

Masks follow SDPA: a bool mask is ``True`` where attention is allowed. This is
the **opposite** of ``nn.MultiheadAttention``, whose bool ``attn_mask`` and
``key_padding_mask`` are ``True`` where attention is forbidden. Reusing PyTorch's
names for the opposite meaning would make a module built with
:meth:`MultiHeadAttention.from_torch` and called the same way attend to exactly what
it should hide, so ``forward`` names its masks ``mask`` (``True`` = may attend) and
``key_mask`` (``True`` = a real token), and refuses ``attn_mask=`` and
``key_padding_mask=`` with how to convert them (:func:`qkv.from_torch_mask`).
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from . import _validate as v
from ._mha_args import _check_like_weights, check_inputs, refuse_torch_names
from ._weights import from_bert_layer, from_torch_module
from .masking import causal_mask
from .scaling import scaled_dot_product_attention_with_weights

__all__ = [
    "MultiHeadAttention",
    "combine_masks",
    "merge_heads",
    "split_heads",
]


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """Split the last dim into heads and move heads before the sequence.

    The reshape alone would give ``(B, L, H, Dh)``; the transpose is what makes
    each head a separate ``(L, Dh)`` matrix. Reshaping straight to
    ``(B, H, L, Dh)`` mixes positions across heads.

    Args:
        x: projected queries, keys or values.
        num_heads: number of heads ``H``; must divide ``D``.

    Returns:
        A view with heads as a batch dim.

    Shape:
        - x: ``(B, L, D)``, or any leading dims ``(..., L, D)`` (one sequence: ``(L, D)``)
        - output: ``(B, H, L, D // H)``, or ``(..., H, L, D // H)``
    """
    v.require_tensor("x", x)
    if x.dim() < 2:
        raise ValueError(f"x must have shape (B, L, D) (or (L, D)), got {v.shape_str(x)}")
    D = x.shape[-1]
    v.require_int("num_heads", num_heads)
    if D % num_heads:
        raise ValueError(f"the last dim of x ({D}) is not divisible by num_heads={num_heads}")
    return x.unflatten(-1, (num_heads, D // num_heads)).transpose(-3, -2)


def merge_heads(x: Tensor) -> Tensor:
    """Inverse of :func:`split_heads`: concatenate the heads along the last dim.

    Args:
        x: per-head outputs.

    Returns:
        The heads side by side, head 0 first.

    Shape:
        - x: ``(B, H, L, Dh)``, or any leading dims ``(..., H, L, Dh)`` (one sequence: ``(H, L, Dh)``)
        - output: ``(B, L, H * Dh)``, or ``(..., L, H * Dh)``
    """
    v.require_tensor("x", x)
    if x.dim() < 3:
        raise ValueError(f"x must have shape (B, H, L, Dh) (or (H, L, Dh)), got {v.shape_str(x)}")
    return x.transpose(-3, -2).flatten(-2)


class MultiHeadAttention(nn.Module):
    """Multi-head attention as in "Attention Is All You Need", batch-first.

    ``out_proj(concat_h softmax(Q_h K_h^T / sqrt(head_dim)) V_h)`` with
    ``Q_h, K_h, V_h`` the ``h``-th slices of linear projections of the inputs.

    Args:
        embed_dim: model width ``D`` (of the query and of the output).
        num_heads: number of heads ``H``; must divide ``embed_dim``.
        bias: add biases to the four projections.
        kdim: width of the key input (default ``embed_dim``).
        vdim: width of the value input (default ``embed_dim``).
        dropout: dropout on the attention weights while training.
        device: where to create the parameters.
        dtype: dtype of the parameters.

    Shape:
        - query: ``(B, L, D)`` or unbatched ``(L, D)``
        - key: ``(B, S, kdim)``, value: ``(B, S, vdim)``
        - output: like query; weights ``(B, L, S)`` averaged over heads, or
          ``(B, H, L, S)`` with ``average_attn_weights=False``.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        bias: bool = True,
        kdim: Optional[int] = None,
        vdim: Optional[int] = None,
        dropout: float = 0.0,
        device: Optional[torch.device] = None,
        dtype: Optional[torch.dtype] = None,
    ) -> None:
        super().__init__()
        v.require_int("embed_dim", embed_dim)
        v.require_int("num_heads", num_heads)
        for name, n in (("kdim", kdim), ("vdim", vdim)):
            if n is not None:  # None means embed_dim
                v.require_int(name, n)
        v.require_probability("dropout", dropout)
        v.require_flag("bias", bias)
        if embed_dim % num_heads:
            raise ValueError(
                f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads}); "
                f"each head gets embed_dim // num_heads features"
            )
        v.require_device("device", device)
        if dtype is not None:
            v.require_float_dtype("dtype", dtype)
        widths = {"embed_dim": embed_dim, "kdim": kdim or embed_dim, "vdim": vdim or embed_dim}
        count = embed_dim * (2 * embed_dim + widths["kdim"] + widths["vdim"] + 4)
        v.require_weights_fit("MultiHeadAttention", widths, count, dtype, device)
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self.dropout = dropout
        f = {"device": device, "dtype": dtype}
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **f)
        self.k_proj = nn.Linear(self.kdim, embed_dim, bias=bias, **f)
        self.v_proj = nn.Linear(self.vdim, embed_dim, bias=bias, **f)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **f)

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor] = None,
        value: Optional[Tensor] = None,
        key_mask: Optional[Tensor] = None,
        need_weights: bool = False,
        mask: Optional[Tensor] = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
        **torch_only: Tensor,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """Attend from ``query`` to ``key``/``value`` (self-attention when they are omitted).

        Args:
            query: the sequence that asks.
            key: the sequence that is matched (default ``query``).
            value: the sequence that is returned (default ``key``).
            key_mask: bool ``(B, S)``, ``True`` for real tokens that may be
                attended to. Not called ``key_padding_mask``: ``nn.MultiheadAttention``'s
                argument of that name is ``True`` for padding, the opposite.
            need_weights: also return the attention weights.
            mask: bool (True = may attend) or float (added) mask, broadcastable
                to ``(B, H, L, S)``; ``(L, S)`` is the usual form. Not called
                ``attn_mask``: ``nn.MultiheadAttention``'s bool ``attn_mask`` is
                ``True`` where attention is forbidden, the opposite.
            average_attn_weights: average the returned weights over heads.
            is_causal: apply an upper-left causal mask (combined with
                ``key_mask`` if both are given).
            **torch_only: only to refuse PyTorch's ``key_padding_mask`` and
                ``attn_mask`` with a message that says how to convert them.

        Returns:
            ``(output, weights)``; ``weights`` is ``None`` unless ``need_weights``.
        """
        refuse_torch_names(torch_only)
        for name, flag in (("need_weights", need_weights), ("is_causal", is_causal),
                           ("average_attn_weights", average_attn_weights)):
            v.require_flag(name, flag)
        key = query if key is None else key
        value = key if value is None else value
        batched = check_inputs(query, key, value, self.embed_dim, self.kdim, self.vdim)
        _check_like_weights(query, key, value, self.q_proj.weight)
        if not batched:
            query, key, value = query[None], key[None], value[None]
            if key_mask is not None:
                key_mask = key_mask[None]
        B, L, _ = query.shape
        S = key.shape[1]

        mask = combine_masks(mask, key_mask, is_causal, B, L, S, query)
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        vv = split_heads(self.v_proj(value), self.num_heads)
        p = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product_attention_with_weights(q, k, vv, mask, dropout_p=p)
        out = self.out_proj(merge_heads(out))

        if not batched:
            out, weights = out[0], weights[0]
        if not need_weights:
            return out, None
        return out, weights.mean(dim=-3) if average_attn_weights else weights

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Copy the weights of an ``nn.MultiheadAttention``.

        Our module is always batch-first; compare with a source built with
        ``batch_first=True`` (or transpose its inputs). Remember to convert its
        masks with :func:`qkv.from_torch_mask`.

        Args:
            module: the PyTorch module to copy.

        Returns:
            A ``MultiHeadAttention`` on the same device and dtype, computing the same function.
        """
        return from_torch_module(cls, module)

    @classmethod
    def from_bert(cls, layer: nn.Module) -> "MultiHeadAttention":
        """Copy a Hugging Face BERT attention layer.

        Args:
            layer: a ``BertLayer``, a ``BertAttention`` (self-attention plus its
                output dense layer) or a bare ``BertSelfAttention`` (then the output
                projection is the identity, since BERT keeps it elsewhere).

        Returns:
            A ``MultiHeadAttention`` whose weights, before ``out_proj``, equal the
            layer's attention probabilities on the same hidden states.
        """
        return from_bert_layer(cls, layer)


def combine_masks(
    mask: Optional[Tensor],
    key_mask: Optional[Tensor],
    is_causal: bool,
    B: int,
    L: int,
    S: int,
    query: Tensor,
) -> Optional[Tensor]:
    """Merge the three ways of masking into one mask broadcastable to ``(B, H, L, S)``.

    Args:
        mask: bool (True = may attend) or float (added) mask, or ``None``.
        key_mask: bool ``(B, S)``, True for real tokens, or ``None``.
        is_causal: add an upper-left causal mask (not together with ``mask``).
        B, L, S: batch size, queries and keys.
        query: the (batched) queries, for their dtype and device.

    Returns:
        One mask, or ``None`` when nothing is masked.
    """
    if mask is not None:
        v.require_tensor("mask", mask)
    v.require_tensor("query", query)
    for name, n in (("B", B), ("L", L), ("S", S)):
        v.require_int(name, n, minimum=0)
    if v.require_flag("is_causal", is_causal):
        if mask is not None:
            raise ValueError("pass either mask or is_causal=True, not both")
        mask = causal_mask(L, S, device=query.device)
    if mask is not None:
        v.check_mask(mask, L, S, query.dtype, query.device, name="mask")
    if key_mask is None:
        return mask
    v.require_tensor("key_mask", key_mask)
    if key_mask.shape != (B, S):
        raise ValueError(
            f"key_mask must have shape (B, S) = ({B}, {S}), "
            f"got {v.shape_str(key_mask)}"
        )
    if key_mask.dtype != torch.bool:
        raise TypeError(
            f"key_mask must be bool, True for real tokens, got {key_mask.dtype}"
        )
    pad = key_mask[:, None, None, :]
    if mask is None:
        return pad
    if mask.dtype == torch.bool:
        return mask & pad
    return mask.masked_fill(~pad, float("-inf"))
