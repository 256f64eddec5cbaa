"""Wrong answers of the wrong15 walk (assignment 8) that failed with only "largest difference",
a generic NaN list or another cause's name: each is now named for what it is.

Each is written as the student wrote it; the words are what the message must say (and
``not_words`` what it must no longer say).
"""

import math

import pytest
import torch

from named import assert_named
from qkv.checks import check_question
from qkv.checks.questions import record


# ----------------------------------------------------------------------------- chunked_attention
def make_chunked(zero_start=False, upside_down=False, carry=True, causal_cols="keys"):
    def chunked_attention(query, key, value, attn_mask=None, is_causal=False, scale=None,
                          chunk_size=256):
        L, S = query.shape[-2], key.shape[-2]
        scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
        rows = torch.arange(L, device=query.device)[:, None]
        q = query * scale
        m = l = acc = None
        for j0 in range(0, S, chunk_size):
            j1 = min(j0 + chunk_size, S)
            s = q @ key[..., j0:j1, :].transpose(-2, -1)
            if attn_mask is not None:
                b = attn_mask[..., j0:j1]
                s = s.masked_fill(~b, float("-inf")) if b.dtype == torch.bool else s + b
            if is_causal:
                cols = (torch.arange(j0, j1, device=query.device) if causal_cols == "keys"
                        else torch.arange(j1 - j0, device=query.device))
                s = s.masked_fill(cols > rows, float("-inf"))
            if m is None:
                m = torch.full_like(s[..., :1], 0.0 if zero_start else float("-inf"))
                l = torch.zeros_like(m)
                acc = torch.zeros_like(s[..., :1] * value[..., :1, :])
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            shift = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
            e = torch.exp(s - shift)
            fix = torch.exp(shift - m) if upside_down else torch.exp(m - shift)
            l = fix * l + e.sum(-1, keepdim=True)
            acc = fix * acc + e @ value[..., j0:j1, :]
            m = m_new if carry else s.amax(-1, keepdim=True)
        return acc / torch.where(l == 0, torch.ones_like(l), l)
    return chunked_attention


def test_chunked_running_max_starting_at_0_is_named():
    assert_named("check_chunked_attention", make_chunked(zero_start=True),
                 "running maximum starts at 0")


def test_chunked_rescale_upside_down_is_named():
    assert_named("check_chunked_attention", make_chunked(upside_down=True), "upside down")


def test_chunked_max_not_carried_is_named():
    assert_named("check_chunked_attention", make_chunked(carry=False), "not carried")


def test_chunked_causal_columns_from_the_chunk_start_are_not_blamed_on_attn_mask():
    assert_named("check_chunked_attention", make_chunked(causal_cols="local"),
                 "arange(j0, j1)", not_words="attn_mask[..., :chunk_size]")


# ----------------------------------------------------------------------------- kv_cache_step
def make_kv(dim=-1, invert=False, key_first=False):
    def kv_cache_step(query, key, value, k_cache=None, v_cache=None, scale=None):
        if k_cache is not None:
            key = torch.cat([key, k_cache] if key_first else [k_cache, key], -2)
            value = torch.cat([v_cache, value], -2)
        L, S = query.shape[-2], key.shape[-2]
        scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
        s = query @ key.transpose(-2, -1) * scale
        allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(S - L)
        if invert:
            allowed = ~allowed
        s = s.masked_fill(~allowed, float("-inf"))
        return torch.softmax(s, dim=dim) @ value, key, value
    return kv_cache_step


def test_kv_softmax_over_the_queries_is_named():
    assert_named("check_kv_cache_step", make_kv(dim=-2), "dim=-2")


def test_kv_inverted_mask_is_named():
    assert_named("check_kv_cache_step", make_kv(invert=True), "inverted")


def test_kv_key_cache_prepended_value_appended_is_named():
    assert_named("check_kv_cache_step", make_kv(key_first=True), "key cache")


# ----------------------------------------------------------------------------- sliding_kv_cache_step
def make_ring(previous_slot=False, invert=False):
    def sliding_kv_cache_step(query, key, value, k_ring, v_ring, pos, scale=None):
        W = k_ring.shape[-2]
        k_ring, v_ring = k_ring.clone(), v_ring.clone()
        slot = (pos - 1) % W if previous_slot else pos % W
        k_ring[..., slot, :], v_ring[..., slot, :] = key[..., 0, :], value[..., 0, :]
        scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
        s = query @ k_ring.transpose(-2, -1) * scale
        written = torch.arange(W, device=query.device) <= pos
        if invert:
            written = ~written
        return torch.softmax(s.masked_fill(~written, float("-inf")), -1) @ v_ring, k_ring, v_ring
    return sliding_kv_cache_step


def test_ring_slot_pos_minus_1_is_named():
    assert_named("check_sliding_kv_cache_step", make_ring(previous_slot=True), "(pos - 1) % W")


def test_ring_inverted_mask_is_named():
    assert_named("check_sliding_kv_cache_step", make_ring(invert=True), "inverted")


# ----------------------------------------------------------------------------- attention_backward
def backward_default_scale_1(query, key, value, out, lse, grad_out, is_causal=False, scale=None):
    scale = 1.0 if scale is None else scale  # the default 1/sqrt(E) forgotten
    s = scale * (query @ key.transpose(-2, -1))
    if is_causal:
        L, S = s.shape[-2:]
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=s.device).tril(),
                          float("-inf"))
    p = torch.exp(s - lse[..., None])
    dp = grad_out @ value.transpose(-2, -1)
    ds = p * (dp - (grad_out * out).sum(-1, keepdim=True))
    return scale * (ds @ key), scale * (ds.transpose(-2, -1) @ query), p.transpose(-2, -1) @ grad_out


def test_backward_default_scale_forgotten_is_named():
    assert_named("check_attention_backward", backward_default_scale_1, "1/sqrt(E)")


# ----------------------------------------------------------------------------- efficient_q1
def test_efficient_q1_answered_for_half_the_length_also_says_so(tmp_path, monkeypatch):
    """16 MiB is 4096's scores at 1 byte each, and 2048's at 4: a stale length is said too."""
    monkeypatch.setenv(record.ENV, str(tmp_path / "answers.json"))
    with pytest.raises(AssertionError) as info:
        check_question("efficient_q1", 16, length=4096)
    assert "1 byte per score" in str(info.value) and "length 2048" in str(info.value), \
        str(info.value)
