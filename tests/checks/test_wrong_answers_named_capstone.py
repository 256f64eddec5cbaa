"""The capstone's slips that got only "largest difference" or the misleading "rows" hint
(wrong14 B1, B4): each written as a student would; the words are what the message must say."""

import math

import pytest
import torch
import torch.nn.functional as F

from qkv import apply_rope, causal_mask_bottom_right, merge_heads, repeat_kv, rms_norm, split_heads
from qkv.capstone import attention_forward as course_attention
from qkv import checks

from named import assert_named


def attention(kind=""):
    def attention_forward(x, params, num_heads, num_kv_heads, k_cache=None, v_cache=None):
        q = split_heads(x @ params["q_proj.weight"].T, num_heads)
        k = split_heads(x @ params["k_proj.weight"].T, num_kv_heads)
        v = split_heads(x @ params["v_proj.weight"].T, num_kv_heads)
        P = 0 if k_cache is None else k_cache.shape[-2]
        q = apply_rope(q, offset=P)
        if kind != "rope_q_only":
            k = apply_rope(k, offset=P)
        if kind == "rope_v_too":
            v = apply_rope(v, offset=P)
        if k_cache is not None:
            k, v = torch.cat([k_cache, k], -2), torch.cat([v_cache, v], -2)
        n = num_heads // num_kv_heads
        L, S = q.shape[-2], k.shape[-2]
        s = q @ repeat_kv(k, n).transpose(-2, -1) / math.sqrt(q.shape[-1])
        w = torch.softmax(s.masked_fill(~causal_mask_bottom_right(L, S, device=x.device),
                                        float("-inf")), -1)
        o = w @ repeat_kv(v, n)  # (B, H, L, E)
        o = o.reshape(x.shape[0], L, -1) if kind == "merge_no_transpose" else merge_heads(o)
        if kind == "no_out_proj":
            return o, k, v
        return o @ params["out_proj.weight"].T, k, v
    return attention_forward


def block(kind=""):
    def block_forward(x, params, num_heads, num_kv_heads):
        n1 = rms_norm(x, params["norm1.weight"])
        sub = {k[5:]: v for k, v in params.items() if k.startswith("attn.")}
        a, _, _ = course_attention(n1, sub, num_heads, num_kv_heads)
        x = x + a
        h = {"no_norm2": x, "mlp_reads_n1": n1,
             "layernorm2": F.layer_norm(x, x.shape[-1:], params["norm2.weight"]),
             "": rms_norm(x, params["norm2.weight"])}[kind]
        return x + F.gelu(h @ params["mlp.up.weight"].T) @ params["mlp.down.weight"].T
    return block_forward


# name: (check, answer, words the message must hold)
NAMED = {
    "attention_forward: merged without the transpose": (
        "check_attention_forward", attention("merge_no_transpose"), "without the transpose"),
    "attention_forward: RoPE on the queries only": (
        "check_attention_forward", attention("rope_q_only"), "RoPE applied to the queries only"),
    "attention_forward: RoPE on the values too": (
        "check_attention_forward", attention("rope_v_too"), "RoPE applied to the values too"),
    "attention_forward: out_proj left out": (
        "check_attention_forward", attention("no_out_proj"), "no output projection"),
    "block_forward: norm2 left out": (
        "check_block_forward", block("no_norm2"), "the MLP fed the stream without norm2"),
    "block_forward: the MLP fed norm1 of the old stream": (
        "check_block_forward", block("mlp_reads_n1"), "the MLP fed norm1 of the block's input"),
    "block_forward: F.layer_norm for norm2": (
        "check_block_forward", block("layernorm2"), "LayerNorm instead of RMSNorm before the MLP"),
}


@pytest.mark.parametrize("name", NAMED)
def test_the_slip_is_named(name):
    assert_named(*NAMED[name])


@pytest.mark.parametrize("check,answer", [
    ("check_attention_forward", attention()),
    ("check_block_forward", block()),
])
def test_the_right_answers_written_so_pass(check, answer):
    getattr(checks, check)(answer)
