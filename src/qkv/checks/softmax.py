"""Check for the scaling assignment's ``softmax``.

The check compares the student's function with :func:`qkv.softmax` and, when
they differ, names the mistake: the wrong variants below compute exactly what a
student who made it would get.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, List

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import scaling as _scaling
from ._harness import Case, Exercise, Mistake, run_check
from ._inputs import bool_mask, randn

TORCH_SOFTMAX = {
    torch.softmax: "torch.softmax",
    torch.Tensor.softmax: "Tensor.softmax",
    F.softmax: "torch.nn.functional.softmax (or nn.Softmax)",
    torch.special.softmax: "torch.special.softmax",
    torch._softmax: "torch._softmax",
    torch.log_softmax: "torch.log_softmax",
    torch.Tensor.log_softmax: "Tensor.log_softmax",
    F.log_softmax: "torch.nn.functional.log_softmax",
    torch.special.log_softmax: "torch.special.log_softmax",
}


# --------------------------------------------------------------------------- checks


def _softmax_variant(x, dim=-1, *, ignore_dim=False, stable=True, keep=True, norm="sum",
                     log=False):
    d = -1 if ignore_dim else dim
    shifted = x - (x.amax(dim=d, keepdim=True) if keep else x.amax(dim=d)) if stable else x
    e = shifted.exp()
    if norm == "max":
        return e / e.amax(dim=d, keepdim=True)
    if norm == "none":
        return e
    out = e / (e.sum(dim=d, keepdim=True) if keep else e.sum(dim=d))
    return out.log() if log else out


_SOFTMAX_MISTAKES = [
    Mistake("the dim argument ignored (always the last axis)",
            "reduce along dim (amax(dim=dim, keepdim=True), sum(dim=dim, keepdim=True))",
            partial(_softmax_variant, ignore_dim=True)),
    Mistake("a softmax that overflows on large logits",
            "subtract the maximum along dim before exp: softmax does not change, exp cannot "
            "overflow", partial(_softmax_variant, stable=False)),
    Mistake("max or sum taken without keepdim=True",
            "keep the reduced axis (keepdim=True) so that it broadcasts back along dim",
            partial(_softmax_variant, keep=False)),
    Mistake("not normalised (exp only)", "divide by the sum of the exponentials along dim",
            partial(_softmax_variant, norm="none")),
    Mistake("normalised by the maximum instead of the sum",
            "divide by the sum of the exponentials along dim, so the result sums to one",
            partial(_softmax_variant, norm="max")),
    Mistake("log-softmax instead of softmax", "return the probabilities, not their logarithm",
            partial(_softmax_variant, log=True)),
]


def _softmax_cases() -> List[Case]:
    def make(shape, dim, big=0.0, neg_inf=False):
        def build(gen, device, dtype):
            x = randn(gen, *shape) * 2
            if big:
                x = x + big
            if neg_inf:
                m = bool_mask(gen, *shape)
                x = x.masked_fill(~m, float("-inf"))
            return (x.to(device=device, dtype=dtype),), {"dim": dim}
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("1-D input of 5 logits", make((5,), -1), f32),
        Case("square input (4, 4) with dim=-1", make((4, 4), -1), f64),
        Case("input (3, 5) with dim=0", make((3, 5), 0), f32),
        Case("input (2, 5, 3) with dim=-2", make((2, 5, 3), -2), f64),
        Case("input (2, 3, 4, 5) with dim=1", make((2, 3, 4, 5), 1), f32),
        Case("input (3, 6) with -inf entries (masked positions)", make((3, 6), -1, neg_inf=True),
             f64),
        Case("input (3, 6) with large logits (near 1000)", make((3, 6), -1, big=1000.0), f32),
        Case("input (2, 4, 3) with large logits (near 1000) and dim=1",
             make((2, 4, 3), 1, big=1000.0), f64),
    ]


SOFTMAX = Exercise(
    name="softmax", reference=_scaling.softmax, cases=_softmax_cases(),
    mistakes=_SOFTMAX_MISTAKES, forbid_torch=TORCH_SOFTMAX,
    forbid_ref={_scaling.softmax: "qkv.softmax",
                _scaling.attention_weights: "qkv's reference weights"},
    legend="the input's shape",
)


def check_softmax(softmax: Callable[..., Tensor], seed: int = 0) -> None:
    """Check a student's ``softmax(x, dim=-1)`` against :func:`qkv.softmax`.

    Args:
        softmax: the student's function.
        seed: another seed gives other random inputs (the hidden tests use one).

    Raises:
        AssertionError: naming the input it fails on and what to look at.
    """
    __tracebackhide__ = True
    run_check(SOFTMAX, softmax, seed)
