"""Checks for the scaling assignment: ``attention_scores``, ``scaled_dot_product_attention``
and ``dot_product_variance``.

The attention checks compare the student's function with the reference in
:mod:`qkv` and, when they differ, name the mistake: the wrong variants (in
:mod:`._attention`) compute exactly what a student who made it would get. The
variance check is statistical: it compares a measured estimate with ``d_k``
within a tolerance it states, and checks that the estimate really comes from the
generator passed in.
"""

from __future__ import annotations

import math
from typing import Any, Callable, List, Optional

import torch
from torch import Tensor

import qkv

from ._attention import FILL_HINT, QKV_ATTENTION, TORCH_ATTENTION, attention_mistakes, qkv_inputs
from ._compare import close
from ._exercise import Case, Exercise
from ._guard import Guard
from ._half import half_case, via_float32
from ._harness import _first_line, _quiet, run_check
from ._inputs import bool_mask, devices, randn

__all__ = [
    "check_attention_scores",
    "check_dot_product_variance",
    "check_scaled_dot_product_attention",
]

# --------------------------------------------------------------------------- cases


def _attention_cases(with_value: bool = True) -> List[Case]:
    def make(batch, L, S, E, Ev, mask=None, big=0.0, **kw):
        def build(gen, device, dtype):
            q, k, v = qkv_inputs(gen, device, dtype, batch, L, S, E, Ev, big)
            kwargs = dict(kw)
            if mask == "bool":
                kwargs["attn_mask"] = bool_mask(gen, L, S, device=device)
            elif mask == "padding":
                lengths = torch.randint(1, S, (batch[0],), generator=gen)
                pad = torch.arange(S)[None, :] < lengths[:, None]
                kwargs["attn_mask"] = pad[:, None, None, :].to(device)
            elif mask == "float":
                kwargs["attn_mask"] = randn(gen, L, S, device=device, dtype=dtype)
            args = (q, k, v) if with_value else (q, k)
            return args, kwargs
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("unbatched input with L=3, S=5, E=4, Ev=6", make((), 3, 5, 4, 6), f32),
        Case("batched input (B=2, H=3) with L=5, S=7, E=8, Ev=3 and a bool mask (L, S)",
             make((2, 3), 5, 7, 8, 3, "bool"), f64),
        Case("batched input (B=2) with L=S=4, E=6, Ev=5 and is_causal=True",
             make((2,), 4, 4, 6, 5, is_causal=True), f32),
        Case("batched input (B=2, H=2) with L=3 < S=6, E=5, Ev=4 and is_causal=True",
             make((2, 2), 3, 6, 5, 4, is_causal=True), f64),
        Case("batched input (B=3, H=2) with L=4, S=6, E=4, Ev=3 and a padding mask (B, 1, 1, S)",
             make((3, 2), 4, 6, 4, 3, "padding"), f32),
        Case("batched input (B=2) with L=5, S=3, E=4, Ev=2 and a float mask added to the scores",
             make((2,), 5, 3, 4, 2, "float"), f64),
        Case("batched input (B=2, H=2) with L=4, S=5, E=6, Ev=7 and scale=0.3",
             make((2, 2), 4, 5, 6, 7, scale=0.3), f64),
        Case("input with large logits (scores near 450) and L=4, S=5, E=4, Ev=3",
             make((2,), 4, 5, 4, 3, big=30.0), f32, rtol=2e-3, atol=1e-4),
        Case("input with large logits (scores near 800) and L=4, S=5, E=4, Ev=3",
             make((2,), 4, 5, 4, 3, big=40.0), f64),
        # Last: the mistakes that do not depend on precision are named above.
        half_case("batched input (B=2, H=2) with L=4, S=6, E=8, Ev=4 and a bool mask (L, S)",
                  make((2, 2), 4, 6, 8, 4, "bool")),
    ]


# --------------------------------------------------------------------------- checks


def _scores_close(got, expected, rtol, atol) -> bool:
    """Scores match when finite entries agree and masked ones are -inf or very negative."""
    if not isinstance(got, Tensor) or tuple(got.shape) != tuple(expected.shape):
        return False
    g = got.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    masked = e == float("-inf")
    if bool((g[masked] > -1e4).any()):
        return False
    return close(g.masked_fill(masked, 0.0), e.masked_fill(masked, 0.0), rtol, atol)


ATTENTION_SCORES = Exercise(
    name="attention_scores", reference=via_float32(qkv.attention_scores),
    cases=_attention_cases(with_value=False),
    mistakes=attention_mistakes(give="scores", with_value=False),
    forbid_torch=TORCH_ATTENTION, forbid_ref=QKV_ATTENTION, compare=_scores_close,
    legend="(..., L, S)", error_hints=[("without overflow", FILL_HINT)],
)

SCALED_DOT_PRODUCT_ATTENTION = Exercise(
    name="scaled_dot_product_attention",
    reference=via_float32(qkv.scaled_dot_product_attention),
    cases=_attention_cases(), mistakes=attention_mistakes(),
    forbid_torch=TORCH_ATTENTION, forbid_ref=QKV_ATTENTION,
    legend="(..., L, Ev)",
    error_hints=[("x.T", "transpose only the last two axes: key.transpose(-2, -1)"),
                 ("without overflow", FILL_HINT)],
)


def check_attention_scores(attention_scores: Callable[..., Tensor], seed: int = 0) -> None:
    """Check ``attention_scores(query, key, attn_mask=None, is_causal=False, scale=None)``.

    Masked scores may be ``-inf`` or any large negative number (below -1e4).

    Raises:
        AssertionError: naming the input it fails on and what to look at.
    """
    __tracebackhide__ = True
    run_check(ATTENTION_SCORES, attention_scores, seed)


def check_scaled_dot_product_attention(scaled_dot_product_attention: Callable[..., Tensor],
                                       seed: int = 0) -> None:
    """Check a student's ``scaled_dot_product_attention`` against the reference.

    Same signature as :func:`qkv.scaled_dot_product_attention`; the check passes
    ``dropout_p=0.0`` (the default), so dropout may be left out.

    Raises:
        AssertionError: naming the input it fails on and what to look at.
    """
    __tracebackhide__ = True
    run_check(SCALED_DOT_PRODUCT_ATTENTION, scaled_dot_product_attention, seed)


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


_VARIANCE = "dot_product_variance"
_VARIANCE_FORBID_REF = {qkv.dot_product_variance: "qkv.dot_product_variance"}


def _variance_where(d: int, device: torch.device) -> str:
    return f"d_k={d}, n_samples={VARIANCE_SAMPLES}, generator on {device.type}"


def _measure(student: Callable[..., Any], d: int, gen_seed: int, device: torch.device) -> float:
    """Run the student's function once, guarded, on a fresh generator; return its one number."""
    __tracebackhide__ = True
    name, where = _VARIANCE, _variance_where(d, device)
    generator = torch.Generator(device).manual_seed(gen_seed)
    guard = Guard(name, {}, _VARIANCE_FORBID_REF)
    with guard:
        got, error, _ = _quiet(student, d, VARIANCE_SAMPLES, generator)
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


def _judge_estimate(value: float, d: int, where: str) -> None:
    """Fail unless ``value`` is within the tolerance of ``d``, naming the mistake it is near."""
    __tracebackhide__ = True
    tol = variance_tolerance(d, VARIANCE_SAMPLES)
    if abs(value - d) <= tol:
        return
    for near, mistake, hint in _variance_mistakes(d):
        if abs(value - near) <= max(tol, 0.1 * abs(near), 0.05):
            raise AssertionError(f"{_VARIANCE}: wrong on {where}: got {value:.4g}, which "
                          f"looks like {mistake}\nLook at: {hint}")
    raise AssertionError(f"{_VARIANCE}: wrong on {where}: got {value:.4g}, expected d_k = {d} "
                  f"within {tol:.3g} (5 standard errors)")


def _judge_generator(student: Callable[..., Any], d: int, gen_seed: int, device: torch.device,
                     value: float) -> None:
    """Fail unless the same seed gives ``value`` again and another seed another number."""
    __tracebackhide__ = True
    where = _variance_where(d, device)
    if _measure(student, d, gen_seed, device) != value:
        raise AssertionError(f"{_VARIANCE}: wrong on {where}: two calls with identically seeded "
                      f"generators gave different answers\nLook at: draw every "
                      f"random number from the generator passed in: "
                      f"torch.randn(..., generator=generator)")
    if _measure(student, d, gen_seed + 1, device) == value:
        raise AssertionError(f"{_VARIANCE}: wrong on {where}: generators with different seeds "
                      f"gave exactly the same answer\nLook at: measure: draw "
                      f"n_samples pairs (q, k) from the generator and return the "
                      f"variance of their dot products, not the formula")


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
    if not callable(dot_product_variance):
        raise AssertionError(f"check_{_VARIANCE} expects your {_VARIANCE} itself, "
                      f"got {type(dot_product_variance).__name__}")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: extra threads only add overhead
    try:
        for device in devices():
            if device.type == "mps":
                continue  # CPU (and CUDA where present) cover the generator's device
            for i, d in enumerate(VARIANCE_DIMS):
                s = 1000 * seed + i
                value = _measure(dot_product_variance, d, s, device)
                _judge_estimate(value, d, _variance_where(d, device))
                if i == 0:  # the two reproducibility runs: once per device is enough
                    _judge_generator(dot_product_variance, d, s, device, value)
    finally:
        torch.set_num_threads(threads)
