"""Check for ``chunked_attention``: exact attention with the online softmax, chunk by chunk."""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, List, Optional, Tuple

import torch
from torch import Tensor

from .. import efficient as _efficient
from .. import functional as _functional
from .._validate import broadcast_shapes
from ._harness import Case, Exercise, Mistake, bool_mask, run_check
from .functional import QKV_ATTENTION, TORCH_ATTENTION, _qkv, attention_mistakes

_RESCALE_HINT = ("when a chunk raises the running maximum from m to m_new, multiply both the "
                 "running sum l and the running output acc by exp(m - m_new) before adding the "
                 "chunk")


def _online(query, key, value, attn_mask=None, is_causal=False, scale=None, chunk_size=256, *,
            rescale_l=True, rescale_acc=True):
    """Online softmax with switches for the rescaling mistakes (both on: the right answer)."""
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    c = 1.0 / math.sqrt(E) if scale is None else scale
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    batch = broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    m = torch.full((*batch, L, 1), float("-inf"), dtype=query.dtype, device=query.device)
    l = torch.zeros_like(m)
    acc = torch.zeros(*batch, L, value.shape[-1], dtype=query.dtype, device=query.device)
    for j0 in range(0, S, chunk_size):
        s = (query * c) @ key[..., j0:j0 + chunk_size, :].transpose(-2, -1)
        if attn_mask is not None:
            block = attn_mask[..., j0:j0 + chunk_size]
            s = s.masked_fill(~block, float("-inf")) if block.dtype == torch.bool else s + block
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        safe = m_new.masked_fill(m_new == float("-inf"), 0.0)
        p = (s - safe).exp()
        corr = (m - safe).exp()
        l = (l * corr if rescale_l else l) + p.sum(dim=-1, keepdim=True)
        acc = (acc * corr if rescale_acc else acc) + p @ value[..., j0:j0 + chunk_size, :]
        m = m_new
    return acc / l.masked_fill(l == 0, 1.0)


def _sdpa_order(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Adapt an SDPA-ordered mistake to chunked_attention's arguments (no dropout_p)."""
    def adapted(query, key, value, attn_mask=None, is_causal=False, scale=None, chunk_size=256):
        return fn(query, key, value, attn_mask, 0.0, is_causal, scale)
    return adapted


class MaterialiseWatch:
    """Notices a floating tensor as large as the full ``(..., L, S)`` score matrix."""

    def __init__(self, args: tuple, kwargs: dict) -> None:
        query, key = args[0], args[1]
        chunk = kwargs.get("chunk_size", args[6] if len(args) > 6 else 256)
        self.L, self.S = query.shape[-2], key.shape[-2]
        self.active = chunk < min(self.L, self.S)
        self.problem: Optional[Tuple[str, str]] = None
        self._inputs = {t.untyped_storage().data_ptr() for t in (*args, *kwargs.values())
                        if isinstance(t, Tensor)}

    def observe(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        if self.problem is not None or not self.active or not isinstance(out, Tensor):
            return
        if (out.is_floating_point() and out.dim() >= 2
                and tuple(out.shape[-2:]) == (self.L, self.S)
                and out.untyped_storage().data_ptr() not in self._inputs):
            self.problem = ("it builds the full (L, S) score matrix",
                            "visit the keys chunk_size at a time; keep only a running maximum, "
                            "sum and output per query (no tensor of shape (..., L, S))")


def _cases() -> List[Case]:
    def make(batch, L, S, E, Ev, chunk, mask=None, big=0.0, **kw):
        def build(gen, device, dtype):
            q, k, v = _qkv(gen, device, dtype, batch, L, S, E, Ev, big)
            kwargs = dict(kw, chunk_size=chunk)
            if mask == "bool":
                kwargs["attn_mask"] = bool_mask(gen, L, S, device=device)
            elif mask == "float":
                kwargs["attn_mask"] = torch.randn(L, S, generator=gen, dtype=torch.float64).to(
                    device=device, dtype=dtype)
            return (q, k, v), kwargs
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("batched input (B=2, H=2) with L=7, S=9, E=4, Ev=3, chunk_size=2",
             make((2, 2), 7, 9, 4, 3, 2), f32),
        Case("batched input (B=2) with L=5, S=8, E=6, Ev=5, chunk_size=3 and a bool mask",
             make((2,), 5, 8, 6, 5, 3, "bool"), f64),
        Case("batched input (B=2) with L=S=9, E=4, Ev=3, chunk_size=4 and is_causal=True",
             make((2,), 9, 9, 4, 3, 4, is_causal=True), f32),
        Case("batched input (B=2) with L=6, S=7, E=5, Ev=2, chunk_size=3 and a float mask",
             make((2,), 6, 7, 5, 2, 3, "float"), f64),
        Case("unbatched input with L=5, S=6, E=8, Ev=3, chunk_size=2 and scale=0.4",
             make((), 5, 6, 8, 3, 2, scale=0.4), f64),
        Case("input with large logits (scores near 800), L=4, S=7, chunk_size=3",
             make((2,), 4, 7, 4, 3, 3, big=40.0), f64),
        Case("input with L=3, S=5 and chunk_size=16 (one chunk holds every key)",
             make((2,), 3, 5, 4, 3, 16), f32),
    ]


_MISTAKES = [
    Mistake("an online softmax that does not rescale its running sums", _RESCALE_HINT,
            partial(_online, rescale_l=False, rescale_acc=False)),
    Mistake("an online softmax that does not rescale its running sums (l is not rescaled)",
            _RESCALE_HINT, partial(_online, rescale_l=False)),
    Mistake("an online softmax that does not rescale its running sums (acc is not rescaled)",
            _RESCALE_HINT, partial(_online, rescale_acc=False)),
] + [Mistake(m.name, m.hint, _sdpa_order(m.fn)) for m in attention_mistakes()]

CHUNKED_ATTENTION = Exercise(
    name="chunked_attention", reference=_efficient.chunked_attention, cases=_cases(),
    mistakes=_MISTAKES, forbid_torch=TORCH_ATTENTION,
    forbid_ref={**QKV_ATTENTION, _functional.softmax: "qkv.softmax"},
    legend="(..., L, Ev)",
)


def check_chunked_attention(chunked_attention: Callable[..., Tensor], seed: int = 0) -> None:
    """Check ``chunked_attention(query, key, value, attn_mask=None, is_causal=False, scale=None,
    chunk_size=256)`` against :func:`qkv.chunked_attention`.

    Besides the output, the check watches the tensors the answer creates: one of
    the full ``(..., L, S)`` size means the chunking was skipped.

    Raises:
        AssertionError: naming the input it fails on and what to look at.
    """
    __tracebackhide__ = True
    run_check(CHUNKED_ATTENTION, chunked_attention, seed, watch_factory=MaterialiseWatch)
