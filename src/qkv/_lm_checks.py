"""Input checks of the capstone's decoder-only model, its text and its training helpers.

Kept apart from :mod:`qkv.transformer` and :mod:`qkv.capstone` so that the code the chapter
shows stays short; the rules are :mod:`qkv._validate`'s, each message names the argument,
what it got and what to pass instead.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from . import _validate as v


def check_norm(x: object, weight: object, eps: object) -> None:
    """The arguments of :func:`qkv.transformer.rms_norm`: float tensors whose last dims agree."""
    v.require_float_tensor("x", x, "(..., D)", min_dim=1)
    v.require_dim("weight", weight, 1, "(D,) (one gain per feature)")
    v.require_float("weight", weight)
    v.require_same(("x", "weight"), (x, weight), "device")
    v.require_same_size(("x", x, -1), ("weight", weight, 0), "the same number of features D", "x (..., D), weight (D,)")
    v.require_finite_number("eps", eps)


def attention_sizes(d_model: object, num_heads: object, num_kv_heads: object, position: object,
                    scale: object, window: object) -> int:
    """Check :class:`qkv.transformer.CausalSelfAttention`'s settings; return its weight count."""
    num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    for name, n in (("d_model", d_model), ("num_heads", num_heads), ("num_kv_heads", num_kv_heads)):
        v.require_int(name, n)
    if d_model % num_heads or num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} must divide d_model={d_model} and "
                         f"num_kv_heads={num_kv_heads} must divide num_heads; e.g. d_model=64, "
                         f"num_heads=4, num_kv_heads=2")
    v.require_choice("position", position, ("rope", "none"))
    if position == "rope" and (d_model // num_heads) % 2:
        raise ValueError(f"with position='rope' the head width d_model / num_heads must be even (RoPE "
                         f"rotates pairs of features), got d_model={d_model}, num_heads={num_heads}")
    v.require_flag("scale", scale)
    if window is not None:
        v.require_int("window", window)
    E = d_model // num_heads
    return d_model * 2 * (num_heads + num_kv_heads) * E  # q, out: H * E wide; k, v: Hkv * E


def block_sizes(d_model: object, num_heads: object, num_kv_heads: object, d_ff: object, dropout: object,
                position: object, scale: object, window: object) -> Tuple[int, int]:
    """Check :class:`qkv.transformer.Block`'s settings; return ``(d_ff, weight count)``."""
    v.require_int("d_model", d_model)
    d_ff = 4 * d_model if d_ff is None else v.require_int("d_ff", d_ff)
    v.require_probability("dropout", dropout)
    count = attention_sizes(d_model, num_heads, num_kv_heads, position, scale, window)
    return d_ff, count + 2 * d_model * d_ff + 2 * d_model  # + the MLP and two gains


def require_stream(name: str, x: object, like: Tensor) -> Tensor:
    """Raise unless ``x`` is a ``(B, L, D)`` float tensor of the dtype and device of the weights ``like``."""
    v.require_dim(name, x, 3, "(B, L, D)")
    v.require_float(name, x)
    D = like.shape[-1]
    if x.shape[-1] != D:
        raise ValueError(f"{name} must have shape (B, L, D) with D = d_model = {D}, got {v.shape_str(x)}")
    if x.dtype != like.dtype or x.device != like.device:
        raise TypeError(f"{name} is {x.dtype} on {x.device}, the weights are {like.dtype} on {like.device}; "
                        f"pass {name}.to(model's dtype and device) or move the model with .to()")
    return x


def require_cache(names: Tuple[str, str], keys: object, values: object, x: Tensor, num_kv_heads: int,
                  head_dim: int) -> None:
    """Raise unless ``keys`` and ``values`` are a ``(B, Hkv, P, E)`` cache that fits the new positions ``x``."""
    legend = f"(B, Hkv, P, E) = ({x.shape[0]}, {num_kv_heads}, P, {head_dim})"
    for name, t in zip(names, (keys, values)):
        v.require_dim(name, t, 4, legend)
        if tuple(t.shape[:2]) != (x.shape[0], num_kv_heads) or t.shape[-1] != head_dim:
            raise ValueError(f"{name} must have shape {legend}, got {v.shape_str(t)}; pass the cache "
                             f"this model returned for the same batch")
        if t.dtype != x.dtype or t.device != x.device:
            raise TypeError(f"{name} must have x's dtype and device ({x.dtype}, {x.device}), "
                            f"got {t.dtype} on {t.device}")
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(f"{names[0]} and {names[1]} must hold the same number of positions P, got "
                         f"{v.shape_str(keys)} and {v.shape_str(values)}")


def unpack_cache(name: str, cache: object) -> Tuple[object, object]:
    """``(keys, values)`` of a cache, which must be a pair."""
    if not (isinstance(cache, (tuple, list)) and len(cache) == 2):
        raise TypeError(f"{name} must be None or the (keys, values) pair the module returned, "
                        f"got {type(cache).__name__}")
    return cache[0], cache[1]


def require_ids(name: str, data: object, vocab_size: Optional[int] = None) -> Tensor:
    """Raise unless ``data`` is a 1-D tensor of integer ids (below ``vocab_size`` when given)."""
    v.require_dim(name, data, 1, "(N,)")
    v.require_values(name, data, "windows are cut from its ids")
    if data.is_floating_point() or data.is_complex() or data.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids (torch.long), got {data.dtype}; "
                        f"encode the text with a CharTokenizer")
    if vocab_size is not None:
        v.require_tokens(name, data.reshape(1, -1), vocab_size, "(N,)")
    return data


def require_long_enough(name: str, data: Tensor, context: int) -> None:
    """Raise unless ``data`` holds a window of ``context + 1`` ids and one more place to start."""
    if data.numel() <= context + 1:
        raise ValueError(f"{name} must be a 1-D tensor of more than context + 1 = {context + 1} ids, "
                         f"got shape {v.shape_str(data)}; pass more text or a smaller context")


def check_options(options: object, baseline: Dict[str, Any]) -> None:
    """Raise unless ``options`` is a dict of settings that ``baseline`` has."""
    if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
        raise TypeError(f"options must be a dict of DecoderLM settings such as {{'window': 8}}, "
                        f"got {options!r}")
    unknown = sorted(set(options) - set(baseline))
    if unknown:
        raise ValueError(f"options has settings DecoderLM's baseline does not have: {unknown}; "
                         f"choose among {sorted(baseline)}")


def require_params(params: object, names: Sequence[str]) -> Dict[str, Tensor]:
    """Raise unless ``params`` is a state dict holding 2-D weights under ``names``."""
    if not isinstance(params, dict) or not all(isinstance(t, Tensor) for t in params.values()):
        raise TypeError(f"params must be a dict of tensors (a module's state_dict()), got {type(params).__name__}")
    for name in names:
        if name not in params or params[name].dim() != 2:
            raise ValueError(f"params has no 2-D {name!r}: pass the state_dict() of the module, got keys "
                             f"{sorted(params)[:4]}...")
    return params


def load(module: nn.Module, params: Dict[str, Tensor]) -> None:
    """``module.load_state_dict(params)``, with a mismatch reported as a ``ValueError`` about ``params``.

    The module is a throwaway that holds copies of ``params``, so its weights take no gradient:
    what it returns requires grad only when its input does (a student's ``.numpy()`` on the
    result of a function built on it works as on their own code's).
    """
    expected = set(module.state_dict())
    unexpected, missing = sorted(set(params) - expected), sorted(expected - set(params))
    if unexpected or missing:  # said on one line: a message's first line is what gets shown
        raise ValueError(f"params does not hold this module's weights: unexpected keys {unexpected[:4]}"
                         f", missing keys {missing[:4]} (it takes {sorted(expected)})")
    try:
        module.load_state_dict(params)
    except RuntimeError as error:
        raise ValueError(f"params does not fit a module of these sizes (num_heads, num_kv_heads): "
                         f"{' '.join(str(error).split())}") from None
    module.requires_grad_(False)
