"""Bad input to the attention functions is reported in terms of the user's arguments."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import qkv

Q, K, V = torch.zeros(2, 3, 4), torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)
FUNCS = {
    "scaled_dot_product_attention": qkv.scaled_dot_product_attention,
    "chunked_attention": qkv.chunked_attention,
}

CASES = [
    ("mismatched E", (Q, torch.zeros(2, 5, 3), V), {}, ValueError, ["same last dim E", "(2, 3, 4)", "(2, 5, 3)"]),
    ("mismatched S", (Q, K, torch.zeros(2, 4, 6)), {}, ValueError, ["sequence length S", "(2, 5, 4)", "(2, 4, 6)"]),
    ("1-D query", (torch.zeros(4), K, V), {}, ValueError, ["query", "(..., L, E)", "(4)"]),
    ("int dtype", (Q.long(), K, V), {}, TypeError, ["query", "floating-point", "torch.int64"]),
    ("mixed dtypes", (Q, K.double(), V), {}, TypeError, ["dtype", "key: torch.float64"]),
    ("batch mismatch", (Q, torch.zeros(3, 5, 4), torch.zeros(3, 5, 6)), {}, ValueError, ["batch dimensions", "(2, 3, 4)", "(3, 5, 4)"]),
    ("mask shape", (Q, K, V), {"attn_mask": torch.ones(3, 4, dtype=torch.bool)}, ValueError, ["attn_mask", "(..., 3, 5)", "(3, 4)"]),
    ("mask batch", (Q, K, V), {"attn_mask": torch.ones(4, 3, 5, dtype=torch.bool)}, ValueError, ["attn_mask", "(4, 3, 5)", "batch"]),
    ("mask dtype", (Q, K, V), {"attn_mask": torch.ones(3, 5, dtype=torch.int64)}, TypeError, ["attn_mask", "bool", "torch.int64"]),
    ("mask float64 on float32", (Q, K, V), {"attn_mask": torch.zeros(3, 5, dtype=torch.float64)}, TypeError, ["attn_mask", "torch.float32", "torch.float64"]),
    ("mask and causal", (Q, K, V), {"attn_mask": torch.ones(3, 5, dtype=torch.bool), "is_causal": True}, ValueError, ["attn_mask", "is_causal", "not both"]),
    ("bad scale", (Q, K, V), {"scale": -1.0}, ValueError, ["scale", "-1.0"]),
    ("not a tensor", ([[1.0]], K, V), {}, TypeError, ["query", "torch.Tensor", "list"]),
]


@pytest.mark.parametrize("fname", list(FUNCS))
@pytest.mark.parametrize("name, args, kwargs, exc, words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_messages(fname, name, args, kwargs, exc, words):
    with pytest.raises(exc) as e:
        FUNCS[fname](*args, **kwargs)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_sdpa_only_errors_and_softmax():
    with pytest.raises(ValueError, match="dropout_p"):
        qkv.scaled_dot_product_attention(Q, K, V, dropout_p=1.5)
    with pytest.raises(ValueError, match="dim=3 is out of range"):
        qkv.softmax(torch.zeros(2, 2), dim=3)
    with pytest.raises(TypeError, match="floating-point"):
        qkv.softmax(torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="chunk_size"):
        qkv.chunked_attention(Q, K, V, chunk_size=0)


# --- kinds of bad input beyond shapes: flags, masks in disguise, layouts, devices, caches ---
import math  # noqa: E402

import numpy as np  # noqa: E402
import torch.nn.functional as F  # noqa: E402

Q4, K4, V4 = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 6)
WITH_FLAG = {
    "scaled_dot_product_attention": lambda f: qkv.scaled_dot_product_attention(Q4, K4, V4, is_causal=f),
    "chunked_attention": lambda f: qkv.chunked_attention(Q4, K4, V4, is_causal=f),
    "grouped_query_attention": lambda f: qkv.grouped_query_attention(Q4, K4, V4, is_causal=f),
    "attention_scores": lambda f: qkv.attention_scores(Q4, K4, is_causal=f),
    "linear_attention": lambda f: qkv.linear_attention(Q4, K4[..., :3, :], V4[..., :3, :], is_causal=f),
    "local_global_mask": lambda f: qkv.local_global_mask(5, 2, is_causal=f),
    "attention_weights": lambda f: qkv.attention_weights(torch.zeros(2, 3), inplace=f),
}


@pytest.mark.parametrize("flag", ["yes", "False", 1, 0, None, 0.5, torch.tensor(True)], ids=repr)
@pytest.mark.parametrize("fname", list(WITH_FLAG))
def test_a_flag_must_be_true_or_false(fname, flag):
    # "False" and 1 are true to `if`: accepting them would silently apply a causal mask.
    with pytest.raises(TypeError, match=r"(is_causal|inplace) must be True or False"):
        WITH_FLAG[fname](flag)


WITH_MASK = {
    "scaled_dot_product_attention": lambda m: qkv.scaled_dot_product_attention(Q4, K4, V4, attn_mask=m),
    "chunked_attention": lambda m: qkv.chunked_attention(Q4, K4, V4, attn_mask=m, chunk_size=2),
    "grouped_query_attention": lambda m: qkv.grouped_query_attention(Q4, K4, V4, attn_mask=m),
    "attention_scores": lambda m: qkv.attention_scores(Q4, K4, attn_mask=m),
    "attend": lambda m: qkv.attend(SCORES4, V4, attn_mask=m),
}
SCORES4 = torch.randn(1, 2, 3, 5)
ALLOWED = torch.rand(3, 5) > 0.3
ALLOWED[:, 0] = True  # both values present, no row fully masked


@pytest.mark.parametrize("mask, exc", [
    (ALLOWED.long(), TypeError), (ALLOWED.int(), TypeError), (ALLOWED.float(), ValueError),
], ids=["int64 0/1", "int32 0/1", "float 0/1"])
@pytest.mark.parametrize("fname", list(WITH_MASK))
def test_a_bool_mask_in_disguise_is_refused_with_the_fix(fname, mask, exc):
    with pytest.raises(exc) as e:
        WITH_MASK[fname](mask)
    assert "attn_mask" in str(e.value) and "attn_mask.bool()" in str(e.value), str(e.value)


@pytest.mark.parametrize("fname", list(WITH_MASK))
def test_an_additive_mask_of_zeros_and_minus_inf_means_the_bool_mask(fname):
    additive = qkv.to_additive_mask(ALLOWED)
    torch.testing.assert_close(WITH_MASK[fname](additive), WITH_MASK[fname](ALLOWED), equal_nan=True)


def _layouts(t: torch.Tensor) -> dict:
    """The same values in layouts torch treats differently: transposed storage, broadcast, a view."""
    return {"transposed": t.mT.contiguous().mT, "expanded": t[:1].expand_as(t) if len(t) else t,
            "sliced": torch.cat([t, t], dim=-1)[..., : t.shape[-1]]}


@pytest.mark.parametrize("layout", ["transposed", "expanded", "sliced"])
@pytest.mark.parametrize("fname", ["scaled_dot_product_attention", "chunked_attention"])
def test_any_layout_gives_torchs_answer_and_gradients(fname, layout):
    q, k, v = (_layouts(t)[layout] for t in (torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)))
    ours = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    theirs = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = getattr(qkv, fname)(*ours, is_causal=True)
    ref = F.scaled_dot_product_attention(*theirs, is_causal=True)
    torch.testing.assert_close(out, ref)
    (out * torch.arange(6.0)).sum().backward()
    (ref * torch.arange(6.0)).sum().backward()
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a.grad, b.grad)


def test_nan_propagates_as_in_torch():
    q = Q.clone()
    q[0, 1, 0] = math.nan
    ref = F.scaled_dot_product_attention(q, K + 1, V + 1)
    for f in (qkv.scaled_dot_product_attention, qkv.chunked_attention):
        torch.testing.assert_close(f(q, K + 1, V + 1), ref, equal_nan=True)


def test_values_with_more_batch_dims_than_the_queries():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(3, 1, 2, 5, 6)
    ref = F.scaled_dot_product_attention(q.expand(3, 1, 2, 3, 4), k.expand(3, 1, 2, 5, 4), v)
    torch.testing.assert_close(qkv.chunked_attention(q, k, v, chunk_size=2), ref)
    torch.testing.assert_close(qkv.scaled_dot_product_attention(q, k, v), ref)


@pytest.mark.parametrize("call, exc, words", [
    (lambda: qkv.kv_cache_step(Q4[..., :1, :], K4[..., :1, :], V4[..., :1, :], K4.double(), V4),
     TypeError, ["k_cache: torch.float64"]),
    (lambda: qkv.kv_cache_step(Q4[..., :1, :], K4[..., :1, :], V4[..., :1, :], K4.long(), V4),
     TypeError, ["k_cache", "floating-point"]),
    (lambda: qkv.kv_cache_step(Q4[..., :1, :], K4[..., :1, :], V4[..., :1, :], K4, V4.to("meta")),
     TypeError, ["v_cache: meta"]),
    (lambda: qkv.attend(torch.randn(2, 3, 5), torch.randn(3, 5, 6)), ValueError, ["batch dimensions"]),
    (lambda: qkv.attend(torch.randn(3, 5), torch.randn(5, 6, device="meta")), TypeError, ["device"]),
    (lambda: qkv.linear_attention(Q4, K4, None), TypeError, ["value", "NoneType"]),
    (lambda: qkv.bahdanau_attention(torch.randn(2, 4), torch.randn(2, 5, 4).long(), torch.randn(7, 4),
                                    torch.randn(7, 4), torch.randn(7)), TypeError, ["keys"]),
    (lambda: qkv.from_torch_mask(ALLOWED.long()), TypeError, ["mask", "mask.bool()"]),
    (lambda: qkv.padding_mask_mod(torch.tensor([2.0, 3.0])), ValueError, ["lengths", "integer"]),
    (lambda: qkv.padding_mask_mod(torch.tensor([2, -1])), ValueError, ["lengths", "non-negative"]),
    (lambda: qkv.padding_mask(torch.tensor([2, 3], device="meta")), ValueError, ["lengths", "meta"]),
    (lambda: qkv.local_global_mask(5, 2, torch.tensor([0], device="meta")), ValueError,
     ["global_tokens", "meta"]),
    (lambda: qkv.alibi_score_mod(torch.tensor([1, 2])), TypeError, ["slopes", "floating-point"]),
    (lambda: qkv.chunked_attention(Q, K, V, chunk_size=2.5), ValueError, ["chunk_size", "2.5"]),
    (lambda: qkv.linear_attention(Q, K, V, eps=math.inf), ValueError, ["eps", "finite"]),
    (lambda: qkv.scaled_dot_product_attention(Q, K, V, scale="1"), ValueError, ["scale", "'1'"]),
    (lambda: qkv.scaled_dot_product_attention(Q, K, V, dropout_p=2), ValueError, ["dropout_p", "[0, 1]"]),
    (lambda: qkv.soft_lookup(Q, K, V, temperature=0), ValueError, ["temperature"]),
    (lambda: qkv.split_heads(torch.zeros(2, 3, 8), 0), ValueError, ["num_heads"]),
    (lambda: qkv.sinusoidal_encoding(4, 8, dtype="float32"), TypeError, ["dtype", "torch.float32"]),
], ids=lambda x: "" if callable(x) else None)
def test_each_kind_of_bad_argument_is_named(call, exc, words):
    with pytest.raises(exc) as e:
        call()
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_numpy_integers_count_as_sizes():
    n = np.int64(3)
    assert torch.equal(qkv.causal_mask(n, np.int32(5)), qkv.causal_mask(3, 5))
    assert qkv.chunked_attention(Q, K, V, chunk_size=n).shape == (2, 3, 6)


@pytest.mark.parametrize("fname", ["scaled_dot_product_attention", "chunked_attention", "linear_attention"])
def test_meta_tensors_give_the_shape(fname):
    out = getattr(qkv, fname)(*(t.to("meta") for t in (Q, K, V)))
    assert out.device.type == "meta" and out.shape == (2, 3, 6)


@pytest.mark.parametrize("call", [
    lambda: qkv.sliding_window_mask(0, 10**12, 1), lambda: qkv.padding_mask([], 10**12),
    lambda: qkv.sinusoidal_encoding(10**12, 2), lambda: qkv.alibi_bias(2, 0, 10**12),
], ids=["sliding_window_mask", "padding_mask", "sinusoidal_encoding", "alibi_bias"])
def test_huge_positions_are_refused_even_when_the_result_is_empty(call):
    with pytest.raises(ValueError, match="would need"):
        call()


def test_no_features_give_uniform_weights_as_in_torch():
    q, k, v = torch.randn(2, 3, 0), torch.randn(2, 5, 0), torch.randn(2, 5, 4)
    ref = F.scaled_dot_product_attention(q, k, v)
    for f in (qkv.scaled_dot_product_attention, qkv.chunked_attention):
        torch.testing.assert_close(f(q, k, v), ref)


# --- Each message blames the argument that is wrong and says how to fix it -------------------

@pytest.mark.parametrize("name", ["query", "key", "value"])
def test_a_multi_head_module_names_an_input_of_another_dtype(name):
    m = qkv.MultiHeadAttention(8, 2)  # float32 weights
    x = torch.randn(2, 3, 8)
    args = {"query": x, "key": x, "value": x, name: x.double()}
    with pytest.raises(TypeError) as e:
        m(**args)
    msg = str(e.value)
    assert msg.startswith(f"{name} is torch.float64 but the module's weights are torch.float32"), msg
    assert f"{name}.to(torch.float32)" in msg and ".to(torch.float64)" in msg, msg


def test_self_attention_names_W_q_and_never_a_context_it_was_not_given():
    x, W = torch.randn(5, 10), torch.randn(8, 10)
    with pytest.raises(ValueError) as e:
        qkv.self_attention(x, torch.randn(3, 10), W, W)  # W_q with the wrong number of rows
    assert str(e.value).startswith("W_q has 3 rows but W_k has 8"), str(e.value)
    assert "W_k (E, D)" in str(e.value) and "context" not in str(e.value)
    with pytest.raises(ValueError) as e:
        qkv.self_attention(x, W, torch.randn(8, 7), W)
    assert str(e.value).startswith("W_k must have 10 columns (the last dim of x)"), str(e.value)


def test_cross_attention_reports_a_batch_mismatch_before_the_weights():
    x, context = torch.randn(2, 5, 4), torch.randn(3, 7, 6)
    W_q, W_k, W_v = torch.randn(3, 6), torch.randn(3, 6), torch.randn(2, 6)  # W_q fits context, not x
    with pytest.raises(ValueError) as e:
        qkv.cross_attention(x, context, W_q, W_k, W_v)
    assert str(e.value).startswith("the batch dimensions"), str(e.value)
    assert "x (2, 5, 4), context (3, 7, 6)" in str(e.value)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_additive_score_refuses_features_beyond_the_memory_limit_before_allocating():
    # Under an address-space limit of about 1.5 GB more than the interpreter uses, (2000, 8000,
    # 64) float32 features (4 GB, twice: the sum and its tanh) must be refused by qkv, not tried
    # (torch's allocator would fail with "can't allocate memory" after a long wait, or the
    # kernel be killed).
    code = textwrap.dedent("""
        import resource, torch, qkv
        with open("/proc/self/status") as f:
            used = next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (used + 1500 * 2**20, resource.RLIM_INFINITY))
        A = 64
        try:
            qkv.additive_score(torch.randn(2000, 8), torch.randn(8000, 8), torch.randn(A, 8),
                               torch.randn(A, 8), torch.randn(A))
        except ValueError as e:
            print(e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("the (L, S, A) tanh features of shape (2000, 8000, 64) would need 8.2 GB"), out
    assert "smaller A" in out.stdout
