"""qkv.memory_efficient_attention: gradients against autograd of the reference, and linear training memory."""

import pytest
import torch

import qkv
from qkv.bench import peak_cpu_memory


def _qkv(batch_q, batch_k, L, S, E=8, Ev=5, dtype=torch.float64, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)

    def make(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(device, dtype).requires_grad_()

    return make(*batch_q, L, E), make(*batch_k, S, E), make(*batch_k, S, Ev)


def _grads(fn, q, k, v, seed=1):
    out = fn(q, k, v)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return (out, *torch.autograd.grad(out, (q, k, v), g.to(out.device, out.dtype)))


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("L,S", [(7, 7), (5, 11), (11, 5), (1, 4)])
def test_gradcheck_float64(is_causal, L, S):
    q, k, v = _qkv((2, 1), (2, 1), L, S, E=4, Ev=3)
    fn = lambda q, k, v: qkv.memory_efficient_attention(  # noqa: E731
        q, k, v, is_causal=is_causal, chunk_size=3, query_chunk_size=2
    )
    assert torch.autograd.gradcheck(fn, (q, k, v))


def _mask(kind, L, S):
    g = torch.Generator().manual_seed(3)
    allowed = torch.rand(2, 1, L, S, generator=g) < 0.6
    allowed[0, 0, 1] = False  # a fully masked row: zero output and zero gradients
    if kind == "bool":
        return allowed
    return torch.zeros(2, 1, L, S, dtype=torch.float64).masked_fill(~allowed, float("-inf")) + 0.5 * torch.rand(
        2, 1, L, S, generator=g, dtype=torch.float64
    )


@pytest.mark.parametrize("mask", [None, "bool", "float", "causal"])
@pytest.mark.parametrize("chunks", [(4, 4), (3, 5), (64, 64)])
def test_output_and_gradients_match_autograd_of_the_reference(mask, chunks):
    L, S = 13, 10
    q, k, v = _qkv((2, 3), (2, 3), L, S)
    kwargs = {"is_causal": True} if mask == "causal" else {"attn_mask": None if mask is None else _mask(mask, L, S)}
    got = _grads(lambda q, k, v: qkv.memory_efficient_attention(
        q, k, v, chunk_size=chunks[0], query_chunk_size=chunks[1], **kwargs), q, k, v)
    want = _grads(lambda q, k, v: qkv.scaled_dot_product_attention(q, k, v, **kwargs), q, k, v)
    for name, a, b in zip(("output", "dq", "dk", "dv"), got, want):
        assert torch.isfinite(a).all(), name
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10, msg=name)
    if mask in ("bool", "float"):  # the fully masked row: what the reference gives, zeros
        assert got[0][0, :, 1].abs().max() == 0 and got[1][0, :, 1].abs().max() == 0


def test_broadcast_batch_dims_and_scale_reduce_the_gradients_to_the_input_shapes():
    # One key/value head shared by three query heads (keys broadcast over H).
    q, k, v = _qkv((2, 3), (2, 1), 9, 6)
    got = _grads(lambda q, k, v: qkv.memory_efficient_attention(q, k, v, scale=0.7, chunk_size=4), q, k, v)
    want = _grads(lambda q, k, v: qkv.scaled_dot_product_attention(q, k, v, scale=0.7), q, k, v)
    assert got[2].shape == k.shape and got[3].shape == v.shape
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_low_precision_inputs_keep_their_dtype(dtype):
    q, k, v = _qkv((1, 2), (1, 2), 20, 20, E=16, Ev=16, dtype=dtype)
    got = _grads(lambda q, k, v: qkv.memory_efficient_attention(q, k, v, is_causal=True, chunk_size=8), q, k, v)
    want = _grads(lambda q, k, v: qkv.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v)
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    for a, b in zip(got, want):
        assert a.dtype == dtype
        torch.testing.assert_close(a.float(), b.float(), atol=tol, rtol=tol)


def test_a_float_mask_that_requires_grad_is_refused():
    q, k, v = _qkv((1,), (1,), 4, 4)
    mask = torch.zeros(4, 4, dtype=torch.float64, requires_grad=True)
    with pytest.raises(ValueError, match="no gradient to attn_mask"):
        qkv.memory_efficient_attention(q, k, v, attn_mask=mask)


def test_bad_chunk_size_is_refused():
    q, k, v = _qkv((1,), (1,), 4, 4)
    with pytest.raises((TypeError, ValueError), match="query_chunk_size"):
        qkv.memory_efficient_attention(q, k, v, query_chunk_size=0)


def _training_peak(fn, n, E=16):
    q, k, v = (t.detach().float().requires_grad_() for t in _qkv((1, 1), (1, 1), n, n, E=E, Ev=E))

    def step():
        fn(q, k, v).sum().backward()

    return peak_cpu_memory(step)


def test_training_memory_grows_linearly_not_quadratically():
    def eff(q, k, v):
        return qkv.memory_efficient_attention(q, k, v, is_causal=True, chunk_size=64)

    def ref(q, k, v):
        return qkv.scaled_dot_product_attention(q, k, v, is_causal=True)

    eff_peaks = [_training_peak(eff, n) for n in (512, 2048)]
    ref_peaks = [_training_peak(ref, n) for n in (512, 2048)]
    # Four times the length: about four times the memory (plus a constant for one tile of
    # weights), where the reference's saved weights make it about sixteen times.
    assert eff_peaks[1] / eff_peaks[0] < 5, eff_peaks
    assert ref_peaks[1] / ref_peaks[0] > 10, ref_peaks
    assert eff_peaks[1] < ref_peaks[1] / 8, (eff_peaks, ref_peaks)


def test_peak_memory_is_measured_without_a_warning(capfd):
    # Chapter 8 measures on the page: torch 2.11 warned "Profiler clears events at the end of
    # each cycle" there (on stderr) until the profile accumulated its one cycle's events, and
    # torch 2.13's profiler writes "profiler_start" to file descriptor 2, which a notebook shows
    # as an error. What the measured function says still reaches stderr.
    import sys
    import warnings

    def measured():
        print("the function's own", file=sys.stderr, flush=True)
        return torch.ones(1000, dtype=torch.float64) * 2

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        peak = peak_cpu_memory(measured)
    assert peak >= 8000
    assert capfd.readouterr().err == "the function's own\n"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_on_cuda_matches_the_reference(dtype):
    q, k, v = _qkv((2, 4), (2, 4), 300, 300, E=64, Ev=64, dtype=dtype, device="cuda")
    got = _grads(lambda q, k, v: qkv.memory_efficient_attention(q, k, v, is_causal=True, chunk_size=128), q, k, v)
    want = _grads(lambda q, k, v: qkv.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v)
    tol = 2e-2 if dtype == torch.bfloat16 else 2e-3
    for a, b in zip(got, want):
        assert a.dtype == dtype and a.device.type == "cuda"
        torch.testing.assert_close(a.float(), b.float(), atol=tol, rtol=tol)
