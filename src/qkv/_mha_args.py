"""The arguments of :meth:`qkv.MultiHeadAttention.forward`: shapes checked, PyTorch's names refused.

Kept apart from the module so that ``multi_head.py`` stays what the chapter reads: the
attention itself. Every message names the argument, what it got and what was expected.
"""

from __future__ import annotations

from torch import Tensor

from . import _validate as v


def _check_width(name: str, t: Tensor, width: int, batched: bool) -> None:
    """Raise unless ``t`` is ``(B, S, width)`` (batched) or ``(S, width)``."""
    v.require_tensor(name, t)
    want = 3 if batched else 2
    legend = "(B, S, {w})" if batched else "(S, {w})"
    if t.dim() != want or t.shape[-1] != width:
        raise ValueError(
            f"{name} must have shape {legend.format(w=width)} like the query, "
            f"got {v.shape_str(t)}"
        )


def _check_like_weights(query: Tensor, key: Tensor, value: Tensor, weight: Tensor) -> None:
    """Raise unless the inputs are floating point with the dtype and device of ``weight``.

    ``nn.Linear`` would refuse a float64 input to float32 weights with torch's own words
    ("mat1 and mat2 must have the same dtype"), naming neither the argument nor the fix.
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        _like(name, t, weight)


def _like(name: str, t: Tensor, weight: Tensor) -> None:
    v.require_float(name, t)
    if t.dtype != weight.dtype:
        raise TypeError(
            f"{name} is {t.dtype} but the module's weights are {weight.dtype}; convert the input "
            f"with {name}.to({weight.dtype}) or the module with .to({t.dtype})"
        )
    if t.device != weight.device:
        raise TypeError(
            f"{name} is on {t.device} but the module's weights are on {weight.device}; move the "
            f"input with {name}.to('{weight.device}') or the module with .to('{t.device}')"
        )


def check_inputs(
    query: Tensor, key: Tensor, value: Tensor, embed_dim: int, kdim: int, vdim: int
) -> bool:
    """Check the three inputs against the module's widths.

    Args:
        query, key, value: the inputs of ``forward`` (key and value already defaulted).
        embed_dim, kdim, vdim: the module's widths.

    Returns:
        Whether the inputs are batched (a 3-D query).

    Shape:
        - query: ``(B, L, embed_dim)`` or ``(L, embed_dim)``
        - key: ``(B, S, kdim)``, value: ``(B, S, vdim)`` (or without ``B``)
    """
    v.require_tensor("query", query)
    batched = query.dim() == 3
    _check_width("query", query, embed_dim, batched)
    _check_width("key", key, kdim, batched)
    _check_width("value", value, vdim, batched)
    if key.shape[:-1] != value.shape[:-1] or (batched and key.shape[0] != query.shape[0]):
        raise ValueError(
            f"query (B, L, D), key (B, S, kdim) and value (B, S, vdim) must agree on B "
            f"and S, got {v.shape_str(query)}, {v.shape_str(key)}, {v.shape_str(value)}"
        )
    return batched


def refuse_torch_names(extra: dict) -> None:
    """Refuse keyword arguments ``forward`` does not take, PyTorch's two masks by name.

    ``nn.MultiheadAttention``'s bool ``attn_mask`` and ``key_padding_mask`` are ``True``
    where attention is forbidden; the course's are ``True`` where it is allowed. Read
    under the same names they would silently attend to exactly what should be hidden.

    Args:
        extra: the keyword arguments ``forward`` collected beyond its own.
    """
    if "attn_mask" in extra:
        raise ValueError(
            "qkv.MultiHeadAttention takes mask (bool: True = may attend, as in "
            "F.scaled_dot_product_attention), not attn_mask, whose bool form "
            "nn.MultiheadAttention reads the opposite way (True = forbidden); pass "
            "mask=~attn_mask for a bool mask (or qkv.from_torch_mask(attn_mask)), or "
            "mask=attn_mask for a float mask, which both add to the scores"
        )
    if "key_padding_mask" in extra:
        raise ValueError(
            "qkv.MultiHeadAttention takes key_mask (True = a real token that may be attended "
            "to), not key_padding_mask, which nn.MultiheadAttention reads the opposite way "
            "(True = padding); pass key_mask=~key_padding_mask "
            "(or qkv.from_torch_mask(key_padding_mask))"
        )
    if extra:
        raise TypeError(f"forward() got unexpected keyword arguments: {', '.join(sorted(extra))}")
