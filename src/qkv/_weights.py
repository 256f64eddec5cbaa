"""Copy weights from PyTorch's and Hugging Face's attention layers into ``qkv.MultiHeadAttention``.

Private: :meth:`qkv.MultiHeadAttention.from_torch` and :meth:`~qkv.MultiHeadAttention.from_bert`
are the public entry points. The class is passed in (``cls``), so this module does not
import :mod:`qkv.multi_head` and the import graph stays one-way.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from . import _validate as v


def copy_linear(target: nn.Linear, weight: Tensor, bias: Optional[Tensor]) -> None:
    """Copy ``weight`` and ``bias`` into ``target`` (shapes must match)."""
    if target.weight.shape != weight.shape:
        raise ValueError(
            f"cannot copy a weight of shape {tuple(weight.shape)} into a Linear of shape "
            f"{tuple(target.weight.shape)}"
        )
    with torch.no_grad():
        target.weight.copy_(weight)
        if target.bias is not None:
            if bias is None:
                target.bias.zero_()
            else:
                target.bias.copy_(bias)


def from_bert_layer(cls: type, layer: nn.Module) -> nn.Module:
    """Build ``cls`` (``qkv.MultiHeadAttention``) from a Hugging Face BERT layer.

    Accepts a ``BertLayer``, a ``BertAttention`` or a ``BertSelfAttention``.
    """
    attention = getattr(layer, "attention", layer)  # BertLayer -> BertAttention
    self_attn = getattr(attention, "self", attention)  # BertAttention -> BertSelfAttention
    output = getattr(attention, "output", None)
    if not all(isinstance(getattr(self_attn, n, None), nn.Linear) for n in ("query", "key", "value")):
        raise TypeError(
            f"layer must be a Hugging Face BertLayer, BertAttention or BertSelfAttention "
            f"(with .query/.key/.value Linear layers), got {type(layer).__name__}"
        )
    q = self_attn.query
    D, H = q.out_features, self_attn.num_attention_heads
    mha = cls(q.in_features, H, bias=q.bias is not None, device=q.weight.device, dtype=q.weight.dtype)
    for name in ("query", "key", "value"):
        src = getattr(self_attn, name)
        copy_linear(getattr(mha, name[0] + "_proj"), src.weight, src.bias)
    if output is not None and isinstance(getattr(output, "dense", None), nn.Linear):
        copy_linear(mha.out_proj, output.dense.weight, output.dense.bias)
    else:
        # A bare BertSelfAttention has no output projection: make ours the identity.
        eye = torch.eye(D, dtype=q.weight.dtype, device=q.weight.device)
        copy_linear(mha.out_proj, eye, None)
    return mha.eval()


def from_torch_module(cls: type, module: nn.MultiheadAttention) -> nn.Module:
    """Build ``cls`` (``qkv.MultiHeadAttention``) with the weights of an ``nn.MultiheadAttention``."""
    v.require_instance("module", module, nn.MultiheadAttention, "nn.MultiheadAttention")
    if module.bias_k is not None or module.add_zero_attn:
        raise ValueError("add_bias_kv and add_zero_attn are not supported by qkv")
    w = module.out_proj.weight
    mha = cls(
        module.embed_dim, module.num_heads, bias=module.in_proj_bias is not None,
        kdim=module.kdim, vdim=module.vdim, dropout=module.dropout,
        device=w.device, dtype=w.dtype,
    )
    D = module.embed_dim
    if module._qkv_same_embed_dim:
        weights = module.in_proj_weight.split(D)
    else:
        weights = (module.q_proj_weight, module.k_proj_weight, module.v_proj_weight)
    biases = (None,) * 3 if module.in_proj_bias is None else module.in_proj_bias.split(D)
    for target, weight, b in zip((mha.q_proj, mha.k_proj, mha.v_proj), weights, biases):
        copy_linear(target, weight, b)
    copy_linear(mha.out_proj, module.out_proj.weight, module.out_proj.bias)
    return mha.train(module.training)
