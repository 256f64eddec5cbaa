"""Student answers for the capstone checks (attention_forward, block_forward), written as a
student would: plain torch and the pieces of earlier assignments imported from qkv. Each
``make_*`` switch turns one known mistake on; with none the answer is right."""

import math

import torch
import torch.nn.functional as F

from qkv import apply_rope, merge_heads, repeat_kv, rms_norm, split_heads


def make_attention(mask="bottom_right", cache="after", rope="offset", repeat="interleave",
                   scale=True, return_old=False, cache_repeated=False):
    def attention_forward(x, params, num_heads, num_kv_heads, k_cache=None, v_cache=None):
        q = split_heads(x @ params["q_proj.weight"].T, num_heads)
        k = split_heads(x @ params["k_proj.weight"].T, num_kv_heads)
        v = split_heads(x @ params["v_proj.weight"].T, num_kv_heads)
        P = 0 if k_cache is None else k_cache.shape[-2]
        if rope != "none":
            off = P if rope == "offset" else 0
            q, k = apply_rope(q, offset=off), apply_rope(k, offset=off)
        if k_cache is not None and cache == "after":
            k, v = torch.cat([k_cache, k], dim=-2), torch.cat([v_cache, v], dim=-2)
        elif k_cache is not None and cache == "before":
            k, v = torch.cat([k, k_cache], dim=-2), torch.cat([v, v_cache], dim=-2)
        G = num_heads // num_kv_heads
        kr, vr = (repeat_kv(k, G), repeat_kv(v, G)) if repeat == "interleave" else \
            (k.repeat(1, G, 1, 1), v.repeat(1, G, 1, 1))
        L, S = q.shape[-2], k.shape[-2]
        scores = q @ kr.transpose(-2, -1)
        if scale:
            scores = scores / math.sqrt(q.shape[-1])
        if mask != "none":
            allowed = torch.ones(L, S, dtype=torch.bool, device=x.device).tril(S - L if mask == "bottom_right" else 0)
            scores = scores.masked_fill(~allowed, float("-inf"))
        out = merge_heads(torch.softmax(scores, dim=-1) @ vr) @ params["out_proj.weight"].T
        if return_old and k_cache is not None:
            return out, k_cache, v_cache
        return (out, kr, vr) if cache_repeated else (out, k, v)
    return attention_forward


attention_forward = make_attention()  # what the block's answers call (the check swaps in the course's)


def make_block(arrangement="pre", attn_residual=True, mlp_residual=True, swap_norms=False, act="gelu"):
    def block_forward(x, params, num_heads, num_kv_heads):
        n1, n2 = params["norm1.weight"], params["norm2.weight"]
        if swap_norms:
            n1, n2 = n2, n1
        attn_params = {n[5:]: t for n, t in params.items() if n.startswith("attn.")}
        f = {"gelu": F.gelu, "relu": F.relu, "none": lambda t: t}[act]

        def attn(h):
            return attention_forward(h, attn_params, num_heads, num_kv_heads)[0]

        def mlp(h):
            return f(h @ params["mlp.up.weight"].T) @ params["mlp.down.weight"].T

        if arrangement == "post":
            x = rms_norm(x + attn(x), n1)
            return rms_norm(x + mlp(x), n2)
        if arrangement == "parallel":
            return x + attn(rms_norm(x, n1)) + mlp(rms_norm(x, n2))
        a = attn(rms_norm(x, n1))
        x = x + a if attn_residual else a
        m = mlp(rms_norm(x, n2))
        return x + m if mlp_residual else m
    return block_forward
