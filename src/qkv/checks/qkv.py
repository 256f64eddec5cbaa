"""Checks for ``self_attention``, ``cross_attention`` and ``dot_product_variance``.

The attention checks compare with :mod:`qkv.qkv` on seeded inputs and name
the usual mistakes (projections swapped or applied transposed, keys and values
taken from the wrong sequence, the scale, the softmax axis). The variance check
is statistical: it compares a measured estimate with ``d_k`` within a tolerance
it states, and checks that the estimate really comes from the generator passed in.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, List, Optional

import torch
from torch import Tensor

from .. import qkv as _qkv_ref
from ._harness import Case, Exercise, Guard, Mistake, _first_line, _quiet, run_check
from ._inputs import devices, randn
from .scaling import QKV_ATTENTION, TORCH_ATTENTION, attend

_LAYOUT = ("the weights are (in_features, out_features): Q = x @ W_q, K = context @ W_k, "
           "V = context @ W_v")
_FORBID_REF = {**QKV_ATTENTION,
               _qkv_ref.self_attention: "qkv.self_attention",
               _qkv_ref.cross_attention: "qkv.cross_attention"}


# --------------------------------------------------------------------------- wrong variants


def _cross(x, context, W_q, W_k, W_v, *, q_from="x", kv_from="context", swap_kv=False,
           swap_qk=False, transposed=False, **attend_kw):
    """Cross-attention with switches that reproduce common mistakes (all off: right)."""
    src = {"x": x, "context": context}
    if transposed:
        W_q, W_k, W_v = W_q.transpose(-2, -1), W_k.transpose(-2, -1), W_v.transpose(-2, -1)
    if swap_kv:
        W_k, W_v = W_v, W_k
    q = src[q_from] @ W_q
    k = src[kv_from] @ W_k
    v = src[kv_from] @ W_v
    if swap_qk:
        q, k = k, q
    return attend(q, k, v, **attend_kw)


def _self(x, W_q, W_k, W_v, **kw):
    return _cross(x, x, W_q, W_k, W_v, **kw)


def _mistakes(fn: Callable[..., Any], cross: bool) -> List[Mistake]:
    scale_hint = "divide the scores by sqrt(E), E = W_q.shape[1] (the width of queries and keys)"
    out = []
    if cross:
        out += [
            Mistake("keys and values taken from x instead of the context",
                    "in cross-attention the queries come from x, the keys and values from "
                    "context", partial(fn, kv_from="x")),
            Mistake("queries taken from the context and keys and values from x",
                    "queries come from x (the sequence that asks), keys and values from context",
                    partial(fn, q_from="context", kv_from="x")),
        ]
    out += [
        Mistake("the weight matrices applied transposed (x @ W.T)", _LAYOUT,
                partial(fn, transposed=True)),
        Mistake("W_k and W_v swapped", "keys come from W_k, values from W_v",
                partial(fn, swap_kv=True)),
        Mistake("queries and keys swapped (the weight matrix is transposed)",
                "row i of the scores compares query i with every key: (x W_q) @ (context W_k)^T",
                partial(fn, swap_qk=True)),
        Mistake("no scaling", scale_hint, partial(fn, factor=lambda E, Ev, s: 1.0)),
        Mistake("scaling by E instead of sqrt(E)", scale_hint,
                partial(fn, factor=lambda E, Ev, s: 1.0 / E)),
        Mistake("scaling by sqrt(Ev), the width of the values", scale_hint,
                partial(fn, factor=lambda E, Ev, s: 1.0 / math.sqrt(Ev))),
        Mistake("softmax over the wrong axis",
                "each query's weights over the keys sum to one: softmax over the last dim (-1)",
                partial(fn, dim=-2)),
        Mistake("returning the weights instead of the output",
                "return weights @ V, the weighted sum of the values", partial(fn, give="weights")),
        Mistake("returning the scores instead of the output",
                "apply the softmax to the scores, then take the weighted sum weights @ V",
                partial(fn, give="scores")),
        Mistake("wrong axes transposed on the keys",
                "transpose only the last two axes of K: K.transpose(-2, -1) "
                "(transpose(K, 0, 1) swaps batch and sequence on a batch)",
                partial(fn, key_t=(0, 1))),
        Mistake("wrong axes transposed on the keys (K.T)",
                "transpose only the last two axes of K: K.transpose(-2, -1) (K.T reverses every "
                "axis of a batched tensor)", partial(fn, key_t="T")),
    ]
    return out


# --------------------------------------------------------------------------- cases


def _cases(cross: bool) -> List[Case]:
    def make(batch, L, D, E, Ev, S=None, Dc=None, ctx_batch=None):
        def build(gen, device, dtype):
            x = randn(gen, *batch, L, D)
            ws = [randn(gen, D, E) / math.sqrt(D)]
            args = [x]
            if cross:
                c_in = D if Dc is None else Dc
                cb = batch if ctx_batch is None else ctx_batch
                args.append(randn(gen, *cb, L if S is None else S, c_in))
            else:
                c_in = D
            ws += [randn(gen, c_in, E) / math.sqrt(c_in), randn(gen, c_in, Ev) / math.sqrt(c_in)]
            return tuple(t.to(device=device, dtype=dtype) for t in args + ws), {}
        return build

    f32, f64 = torch.float32, torch.float64
    if not cross:
        return [
            Case("unbatched x (L=4, D=6) with E=3, Ev=5", make((), 4, 6, 3, 5), f32),
            Case("batched x (B=2, L=5, D=8) with E=4, Ev=3", make((2,), 5, 8, 4, 3), f64),
            Case("x with two batch dims (2, 3, L=4, D=5), E=6, Ev=2", make((2, 3), 4, 5, 6, 2), f32),
            Case("batched x (B=3, L=3, D=4) with square weights E=Ev=D=4", make((3,), 3, 4, 4, 4),
                 f64),
            Case("batched x (B=4, L=4, D=4) with E=Ev=4 (B = L = E)", make((4,), 4, 4, 4, 4), f64),
            Case("a single token (L=1, D=3) with E=2, Ev=3", make((), 1, 3, 2, 3), f32),
        ]
    return [
        Case("unbatched x (L=3, D=6) and context (S=5, Dc=4), E=3, Ev=2",
             make((), 3, 6, 3, 2, S=5, Dc=4), f32),
        Case("batched x (B=2, L=4, D=5) and context (B=2, S=6, Dc=7), E=4, Ev=3",
             make((2,), 4, 5, 4, 3, S=6, Dc=7), f64),
        Case("batched x (B=2, L=3, D=4) and context (B=2, S=3, Dc=4): same sizes, E=Ev=4",
             make((2,), 3, 4, 4, 4, S=3, Dc=4), f64),
        Case("batched x (B=3, L=2, D=5) and one unbatched context (S=4, Dc=6), E=3, Ev=5",
             make((3,), 2, 5, 3, 5, S=4, Dc=6, ctx_batch=()), f32),
        Case("x with two batch dims (2, 2, L=3, D=4) and context (2, 2, S=5, Dc=3), E=2, Ev=4",
             make((2, 2), 3, 4, 2, 4, S=5, Dc=3), f64),
    ]


SELF_ATTENTION = Exercise(
    name="self_attention", reference=_qkv_ref.self_attention, cases=_cases(cross=False),
    mistakes=_mistakes(_self, cross=False), forbid_torch=TORCH_ATTENTION, forbid_ref=_FORBID_REF,
    legend="(..., L, Ev)",
    error_hints=[("cannot be multiplied", _LAYOUT), ("x.T", "transpose only the last two axes: "
                                                              "K.transpose(-2, -1)")],
)

CROSS_ATTENTION = Exercise(
    name="cross_attention", reference=_qkv_ref.cross_attention, cases=_cases(cross=True),
    mistakes=_mistakes(_cross, cross=True), forbid_torch=TORCH_ATTENTION,
    forbid_ref=_FORBID_REF, legend="(..., L, Ev)",
    error_hints=[("cannot be multiplied", _LAYOUT + "; keys and values come from context"),
                 ("x.T", "transpose only the last two axes: K.transpose(-2, -1)")],
)


def check_self_attention(self_attention: Callable[..., Tensor], seed: int = 0) -> None:
    """Check a student's ``self_attention(x, W_q, W_k, W_v)`` against :func:`qkv.self_attention`.

    Weights are ``(in_features, out_features)``; x is ``(L, D)`` or batched ``(..., L, D)``.

    Raises:
        AssertionError: naming the input it fails on and what to look at.
    """
    __tracebackhide__ = True
    run_check(SELF_ATTENTION, self_attention, seed)


def check_cross_attention(cross_attention: Callable[..., Tensor], seed: int = 0) -> None:
    """Check ``cross_attention(x, context, W_q, W_k, W_v)`` against :func:`qkv.cross_attention`.

    Raises:
        AssertionError: naming the input it fails on and what to look at.
    """
    __tracebackhide__ = True
    run_check(CROSS_ATTENTION, cross_attention, seed)


# --------------------------------------------------------------------------- variance

#: Widths and sample count the variance check uses.
VARIANCE_DIMS = (4, 64, 256)
VARIANCE_SAMPLES = 20_000
#: The estimate must lie within this many standard errors of d_k.
VARIANCE_SIGMAS = 5.0


def variance_tolerance(d_k: int, n_samples: int) -> float:
    """Allowed distance of an estimate from ``d_k``: 5 standard errors.

    ``Var((q·k)^2) = 2 d_k^2 + 6 d_k``, so the sample variance of ``n`` dot products
    has a standard error of about ``d_k * sqrt((2 + 6 / d_k) / n)``.
    """
    return VARIANCE_SIGMAS * d_k * math.sqrt((2 + 6 / d_k) / n_samples)


# (what the estimate is near, name, hint): each a known wrong answer's expected value.
def _variance_mistakes(d: int):
    return [
        (0.0, "the mean of the dot products instead of their variance",
         "return the variance (e.g. dots.var()), not the mean"),
        (math.sqrt(d), "the standard deviation instead of the variance",
         "return the variance (std squared)"),
        (1.0, "the variance of the single products q_i * k_i (or of q·k / sqrt(d_k))",
         "sum the d_k products of each pair first ((q * k).sum(-1)), then take the variance"),
        (2.0 * d, "the variance of q·q (k is not drawn independently of q)",
         "draw q and k as two separate torch.randn calls"),
    ]


def _as_number(value: Any) -> Optional[float]:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, Tensor) and value.numel() == 1 and value.is_floating_point():
        return float(value.detach().reshape(()).item())
    return None


def check_dot_product_variance(dot_product_variance: Callable[..., Any], seed: int = 0) -> None:
    """Check a measured ``dot_product_variance(d_k, n_samples, generator)``.

    For d_k in 4, 64 and 256 with 20,000 samples, the answer must lie within
    ``5 * d_k * sqrt((2 + 6 / d_k) / n_samples)`` of ``d_k`` (5 standard errors of the
    sample variance: a right answer fails by chance far less than once in a million).
    The answer must also be reproducible from the generator (the same seed gives the
    same number) and change with it (another seed, another number: a measurement,
    not the formula); on a CUDA machine it must draw on a CUDA generator's device.

    Raises:
        AssertionError: naming the input it fails on and what to look at.
    """
    __tracebackhide__ = True
    name = "dot_product_variance"
    if not callable(dot_product_variance):
        raise AssertionError(f"check_{name} expects your {name} itself, "
                      f"got {type(dot_product_variance).__name__}")
    forbid = {_qkv_ref.dot_product_variance: "qkv.dot_product_variance"}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: extra threads only add overhead

    def run(d: int, gen_seed: int, device: torch.device) -> float:
        __tracebackhide__ = True
        where = f"d_k={d}, n_samples={VARIANCE_SAMPLES}, generator on {device.type}"
        generator = torch.Generator(device).manual_seed(gen_seed)
        guard = Guard(name, {}, forbid)
        with guard:
            got, error, _ = _quiet(dot_product_variance, d, VARIANCE_SAMPLES, generator)
        if guard.tripped:
            raise AssertionError(f"{name}: wrong on {where}: {guard.tripped}")
        if isinstance(error, NotImplementedError):
            raise AssertionError(f"{name} is not written yet (it raises NotImplementedError): "
                          f"replace the `raise` line")
        if error is not None:
            hint = ""
            if "generator" in str(error).lower() or "device" in str(error).lower():
                hint = ("\nLook at: draw on the generator's device: torch.randn(..., "
                        "generator=generator, device=generator.device)")
            raise AssertionError(f"{name}: wrong on {where}: it raised {_first_line(error)}{hint}")
        value = _as_number(got)
        if value is None or not math.isfinite(value):
            raise AssertionError(f"{name}: wrong on {where}: it returned {got!r}, expected one finite "
                          f"number\nLook at: return the variance as a float (e.g. "
                          f"dots.var().item()) or a one-element tensor")
        return value

    try:
        for device in devices():
            if device.type == "mps":
                continue  # CPU (and CUDA where present) cover the generator's device
            for i, d in enumerate(VARIANCE_DIMS):
                s = 1000 * seed + i
                where = f"d_k={d}, n_samples={VARIANCE_SAMPLES}, generator on {device.type}"
                value = run(d, s, device)
                tol = variance_tolerance(d, VARIANCE_SAMPLES)
                if abs(value - d) > tol:
                    for near, mistake, hint in _variance_mistakes(d):
                        if abs(value - near) <= max(tol, 0.1 * abs(near), 0.05):
                            raise AssertionError(f"{name}: wrong on {where}: got {value:.4g}, which "
                                          f"looks like {mistake}\nLook at: {hint}")
                    raise AssertionError(f"{name}: wrong on {where}: got {value:.4g}, expected d_k = {d} "
                                  f"within {tol:.3g} (5 standard errors)")
                if i > 0:
                    continue  # the two reproducibility runs below: once per device is enough
                if run(d, s, device) != value:
                    raise AssertionError(f"{name}: wrong on {where}: two calls with identically seeded "
                                  f"generators gave different answers\nLook at: draw every "
                                  f"random number from the generator passed in: "
                                  f"torch.randn(..., generator=generator)")
                if run(d, s + 1, device) == value:
                    raise AssertionError(f"{name}: wrong on {where}: generators with different seeds "
                                  f"gave exactly the same answer\nLook at: measure: draw "
                                  f"n_samples pairs (q, k) from the generator and return the "
                                  f"variance of their dot products, not the formula")
    finally:
        torch.set_num_threads(threads)
