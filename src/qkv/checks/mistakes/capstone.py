"""The capstone's wrong versions: the attention sublayer and the pre-norm block with one
switch turned, each computing what a student who made that mistake would get (the defaults
are the right answer)."""

from __future__ import annotations

import math
from typing import Dict

import torch
import torch.nn.functional as F
from torch import Tensor

import qkv

__all__: list = []


def attention_variant(x, params, num_heads, num_kv_heads=None, k_cache=None, v_cache=None, *,
                      mask="bottom_right", cache="after", rope="offset", repeat="interleave",
                      scale=True, return_old=False, cache_repeated=False):
    """The attention sublayer with one switch turned from the right answer (the defaults)."""
    Hkv = num_kv_heads or num_heads
    G = num_heads // Hkv
    q = qkv.split_heads(x @ params["q_proj.weight"].T, num_heads)
    k = qkv.split_heads(x @ params["k_proj.weight"].T, Hkv)
    val = qkv.split_heads(x @ params["v_proj.weight"].T, Hkv)
    P = 0 if k_cache is None else k_cache.shape[-2]
    if rope != "none":
        offset = P if rope == "offset" else 0
        q, k = qkv.apply_rope(q, offset=offset), qkv.apply_rope(k, offset=offset)
    if k_cache is not None and cache == "after":
        k, val = torch.cat([k_cache, k], -2), torch.cat([v_cache, val], -2)
    elif k_cache is not None and cache == "before":
        k, val = torch.cat([k, k_cache], -2), torch.cat([val, v_cache], -2)
    # cache == "ignored": the new positions attend to themselves only
    spread = (lambda t: t.repeat_interleave(G, dim=-3)) if repeat == "interleave" else \
        (lambda t: t.repeat(1, G, 1, 1))
    kr, vr = spread(k), spread(val)
    L, S = q.shape[-2], k.shape[-2]
    scores = q @ kr.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale else 1.0)
    diagonal = {"bottom_right": S - L, "top_left": 0, "none": S}[mask]
    allowed = torch.ones(L, S, dtype=torch.bool, device=x.device).tril(diagonal)
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1)
    out = qkv.merge_heads(weights @ vr) @ params["out_proj.weight"].T
    if return_old and k_cache is not None:
        return out, k_cache, v_cache
    return (out, kr, vr) if cache_repeated else (out, k, val)


def _part(params: Dict[str, Tensor], prefix: str) -> Dict[str, Tensor]:
    return {n[len(prefix):]: t for n, t in params.items() if n.startswith(prefix)}


def block_variant(x, params, num_heads, num_kv_heads=None, *, arrangement="pre",
                  attn_residual=True, mlp_residual=True, swap_norms=False, act="gelu"):
    """The pre-norm block with one switch turned from the right answer (the defaults)."""
    n1, n2 = params["norm1.weight"], params["norm2.weight"]
    if swap_norms:
        n1, n2 = n2, n1
    norm = qkv.rms_norm
    sub = _part(params, "attn.")
    attn = lambda h: qkv.attention_forward(h, sub, num_heads, num_kv_heads)[0]  # noqa: E731
    activation = {"gelu": F.gelu, "relu": F.relu, "none": lambda t: t}[act]
    mlp = lambda h: activation(h @ params["mlp.up.weight"].T) @ params["mlp.down.weight"].T  # noqa: E731
    if arrangement == "post":
        x = norm(x + attn(x), n1)
        return norm(x + mlp(x), n2)
    if arrangement == "parallel":
        return x + attn(norm(x, n1)) + mlp(norm(x, n2))
    a = attn(norm(x, n1))
    x = x + a if attn_residual else a
    m = mlp(norm(x, n2))
    return x + m if mlp_residual else m
