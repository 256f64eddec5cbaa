"""Exercises that copying a page cannot answer: debugging, variations and experiments.

- **Debugging**: the assignment prints a function with bugs from the course's catalogue of
  mistakes (``key.T`` on a batch, a scale of ``1/E``, the softmax over the wrong axis, a mask
  applied after the softmax, a running sum not rescaled...). The student writes the fixed
  function; the check compares it with the right one and, when a bug is left, the known wrong
  variant it matches names that bug (each :class:`Mistake` below is the fixed function with one
  bug put back).
- **Variations**: a function the reference does not contain (attention with a temperature, a
  dilated window as a FlexAttention ``mask_mod``), checked against one built here from
  :mod:`qkv`'s public functions.
- **Experiments**: a measurement from a generator (:mod:`._experiment`), judged as a
  measurement against the same experiment written with :mod:`qkv`.

Every check is seeded inputs -> the student's function -> outputs judged against a reference.

This module holds those of assignments 4 (a temperature) and 8 (streaming softmax); the other
assignments' are in the ``_beyond_<which>`` modules beside it (:mod:`._beyond_masking` for 6,
:mod:`._beyond_position` for 7, ...) and :mod:`._variations_early`.
"""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import Tensor

import qkv

from .harness import Case, Exercise, Mistake, half_case, via_float32
from .mistakes.efficient import chunk_by_chunk
from .mistakes.attention import TORCH_ATTENTION, qkv_case, qkv_inputs

# --------------------------------------------------------------- assignment 4: a temperature


def temperature_attention(query: Tensor, key: Tensor, value: Tensor, temperature: float = 1.0, *,
                          scale_power: float = 0.5, dim: int = -1, stable: bool = True,
                          multiply: bool = False, width: str = "E", root_t: bool = False,
                          keepdim: bool = True, tempered: bool = True,
                          sum_dim: int = 0, max_dim: int = 0) -> Tensor:
    """``softmax(query @ key^T / (sqrt(E) * temperature)) @ value``, or one bug of the buggy
    version put back (``scale_power=1``: ``/ E``; ``dim=-2``: the softmax over the queries;
    ``stable=False``: no maximum subtracted; ``multiply``: ``* temperature``); or another slip
    (``width="S"``: sqrt of the number of keys, ``"none"``: no sqrt(E); ``root_t``:
    / sqrt(E * T); ``keepdim=False``: the row sums without it; ``tempered=False``: the
    temperature ignored; ``sum_dim=-2``: the maximum over the keys added, the printed sum
    over the queries kept; ``max_dim=-2``: the maximum over the queries, the sum over the
    keys fixed)."""
    E = {"E": query.shape[-1], "S": key.shape[-2], "none": 1}[width]
    t = 1.0 / temperature if multiply else temperature if tempered else 1.0
    t = math.sqrt(t) if root_t else t
    scores = (query @ key.transpose(-2, -1)) / (E ** scale_power * t)
    if stable:
        scores = scores - scores.amax(dim=max_dim or dim, keepdim=True)
    e = scores.exp()
    return (e / e.sum(dim=sum_dim or dim, keepdim=keepdim)) @ value


def _temperature_cases():
    f32, f64 = torch.float32, torch.float64
    return [
        Case("unbatched input with L=3, S=5, E=4, Ev=6 (temperature left out)",
             qkv_case((), 3, 5, 4, 6), f32),
        # Not E=16 with temperature 0.5: there 1/(E T) = T/sqrt(E), and a temperature that
        # multiplies would be taken for the printed 1/E scale.
        Case("unbatched input with L=4, S=4, E=8, Ev=3 and temperature=0.5",
             qkv_case((), 4, 4, 8, 3, temperature=0.5), f64),
        Case("batched input (B=2, H=3) with L=5, S=7, E=8, Ev=3 and temperature=2.0",
             qkv_case((2, 3), 5, 7, 8, 3, temperature=2.0), f64),
        Case("input with large logits (scores near 800) and temperature=1.0",
             qkv_case((2,), 4, 5, 4, 3, big=40.0, temperature=1.0), f64),
        Case("rows far apart (scores near +450 in some rows, -450 in others) and "
             "temperature=0.5: each row needs its own maximum", _rows_apart, f64),
        half_case("batched input (B=2, H=2) with L=4, S=6, E=8, Ev=3 and temperature=2.0",
                  qkv_case((2, 2), 4, 6, 8, 3, temperature=2.0)),
    ]


def _rows_apart(gen, device, dtype):
    """Queries alternately along and against a component every key shares: one maximum for
    the whole tensor leaves the low rows with exp(-1800) = 0 everywhere (0 / 0)."""
    q, k, v = qkv_inputs(gen, device, dtype, (2,), 4, 5, 4, 3)
    sign = torch.tensor([1.0, -1.0, 1.0, -1.0], device=device, dtype=dtype)
    q[..., 0], k[..., 0] = 30.0 * sign, 30.0
    return (q, k, v), {"temperature": 0.5}


ATTENTION_WITH_TEMPERATURE = Exercise(
    name="attention_with_temperature", reference=via_float32(temperature_attention),
    cases=_temperature_cases(), forbid=TORCH_ATTENTION, legend="(..., L, Ev)",
    # The set-up gives the course's softmax: a fix that calls it is no delegation.
    helpers={"softmax": qkv.softmax},
    mistakes=[
        Mistake("scale 1/E instead of 1/sqrt(E) (a bug of the printed function)",
                "the scores are divided by sqrt(E) * temperature", partial(
                    temperature_attention, scale_power=1.0)),
        Mistake("softmax over the queries (dim=-2) (a bug of the printed function)",
                "each query's weights over the keys sum to one: reduce over dim=-1",
                partial(temperature_attention, dim=-2)),
        # Found by a student walk: the maximum added over dim=-1, the printed sum kept.
        # Not marked printed: with no maximum it is the dim=-2 bug, and combined it was named so.
        Mistake("the sums over the queries (dim=-2), the printed function's, kept",
                "each query's weights over the keys sum to one: e.sum(dim=-1, keepdim=True), "
                "over the same axis as the maximum", partial(temperature_attention, sum_dim=-2)),
        # The same half fix with the printed / E kept too (no combination of printed bugs
        # computes it: the sum over dim=-2 with a maximum over dim=-1 is none of them).
        Mistake("the sums over the queries (dim=-2), the printed function's, kept, and the "
                "printed scale 1/E instead of 1/sqrt(E)",
                "each query's weights over the keys sum to one: e.sum(dim=-1, keepdim=True), "
                "over the same axis as the maximum; and the scores are divided by sqrt(E) * "
                "temperature, not E * temperature",
                partial(temperature_attention, sum_dim=-2, scale_power=1.0)),
        # The other half fix: the sum moved to dim=-1, the maximum moved to the printed axis.
        Mistake("the maximum subtracted over the queries (dim=-2), the sum over the keys",
                "subtract each query's maximum over the keys: scores.amax(dim=-1, "
                "keepdim=True), along the same axis as the sum",
                partial(temperature_attention, max_dim=-2)),
        Mistake("no maximum subtracted: exp overflows (a bug of the printed function)",
                "subtract each row's maximum before exp", partial(temperature_attention,
                                                                  stable=False)),
        Mistake("temperature multiplies the scores instead of dividing them",
                "a high temperature flattens the weights: divide by it",
                partial(temperature_attention, multiply=True)),
        Mistake("scores divided by sqrt(E * temperature) instead of sqrt(E) * temperature",
                "the temperature divides the scaled scores: / (sqrt(E) * temperature)",
                partial(temperature_attention, root_t=True)),
        Mistake("scaled by 1/sqrt(S), the number of keys, instead of 1/sqrt(E)",
                "E is the width of queries and keys, query.shape[-1]",
                partial(temperature_attention, width="S")),
        Mistake("divided by the temperature only (the 1/sqrt(E) left out)",
                "the temperature divides the scaled scores: query @ key^T / (sqrt(E) * "
                "temperature), both", partial(temperature_attention, width="none")),
        Mistake("the temperature ignored", "divide the scaled scores by the temperature: "
                "query @ key^T / (sqrt(E) * temperature)",
                partial(temperature_attention, tempered=False)),
        # The same error comes from a maximum taken without keepdim: the name says both.
        Mistake("a row's sum (or maximum) taken without keepdim=True",
                "a (L, S) tensor divided by a (L,) one broadcasts along the keys, not the "
                "rows: e.sum(dim=-1, keepdim=True), scores.amax(dim=-1, keepdim=True)",
                partial(temperature_attention, keepdim=False)),
    ],
    # For errors no mistake above raises: key.T on a batch, a broadcast gone wrong elsewhere.
    error_hints=[("size of tensor", "a shape that does not broadcast: key.T reverses every axis "
                  "of a batched tensor (key.transpose(-2, -1)), and a row's sum or maximum needs "
                  "keepdim=True"), ("mat1 and mat2", "key.T reverses every axis of a batched "
                                    "tensor: key.transpose(-2, -1)")],
)


# --------------------------------------------------------------- assignment 8: streaming softmax


def streaming(query: Tensor, key: Tensor, value: Tensor, block: int, *, rescale_sum: bool = True,
              sign: int = 1, drop_last: bool = False, zero_start: bool = False,
              rescale_acc: bool = True, frozen: bool = False) -> Tensor:
    """Attention visiting the keys ``block`` at a time with a running max, sum and output; or
    one bug of the printed version put back (or ``rescale_acc=False``: the output not
    rescaled)."""
    scale = 1.0 / math.sqrt(query.shape[-1])
    shape = query.shape[:-1] + (1,)
    m = (torch.zeros if zero_start else partial(torch.full, fill_value=float("-inf")))(
        shape, dtype=query.dtype, device=query.device)
    l = torch.zeros(shape, dtype=query.dtype, device=query.device)
    acc = torch.zeros(query.shape[:-1] + (value.shape[-1],), dtype=query.dtype,
                      device=query.device)
    S = key.shape[-2]
    stop = S - block if drop_last else S
    for start in range(0, stop, block):
        s = query @ key[..., start:start + block, :].transpose(-2, -1) * scale
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        if frozen and start > 0:  # the first block's maximum kept for good
            m_new = m
        p = (s - m_new).exp()
        c = (sign * (m - m_new)).exp()
        l = (l * c if rescale_sum else l) + p.sum(dim=-1, keepdim=True)
        acc = (acc * c if rescale_acc else acc) + p @ value[..., start:start + block, :]
        m = m_new
    return acc / l


def _streaming_cases():
    def make(batch, L, S, E, Ev, block, shift=0.0, later=False):
        def build(gen, device, dtype):
            q, k, v = qkv_inputs(gen, device, dtype, batch, L, S, E, Ev)
            if shift:  # every score far below 0: a max that starts at 0 underflows
                q = q * 0.1
                k = k * 0.1
                q[..., 0], k[..., 0] = shift, -shift
            if later:  # the first block's scores near 0, the later blocks' near 800
                q[..., 0], k[..., :block, 0], k[..., block:, 0] = 40.0, 0.0, 40.0
            return (q, k, v, block), {}
        return build
    f32, f64 = torch.float32, torch.float64
    return [
        Case("batched input (B=2) with L=3, S=8, E=4, Ev=3 and block=4", make((2,), 3, 8, 4, 3, 4),
             f64),
        Case("batched input (B=2, H=2) with L=5, S=10, E=8, Ev=3 and block=3 (S not a multiple)",
             make((2, 2), 5, 10, 8, 3, 3), f64),
        Case("unbatched input with L=4, S=6, E=4, Ev=2 and block=1", make((), 4, 6, 4, 2, 1), f32),
        Case("unbatched input with L=4, S=6, E=4, Ev=2 and block=16 (one block)",
             make((), 4, 6, 4, 2, 16), f32),
        Case("input whose scores are all near -1000 (L=3, S=8, block=4)",
             make((1,), 3, 8, 4, 3, 4, shift=63.0), f64),
        Case("input whose later blocks score far above the first (near 800 against 0), L=3, "
             "S=8, E=4, block=3", make((2,), 3, 8, 4, 3, 3, later=True), f64),
        half_case("batched input (B=2, H=2) with L=4, S=7, E=4, Ev=3 and block=3",
                  make((2, 2), 4, 7, 4, 3, 3)),
    ]


STREAMING_ATTENTION = Exercise(
    name="streaming_attention",
    reference=via_float32(lambda q, k, v, block: qkv.scaled_dot_product_attention(q, k, v)),
    cases=_streaming_cases(), forbid=TORCH_ATTENTION, legend="(..., L, Ev)",
    run_student=chunk_by_chunk(lambda args, kwargs: args[3], "block"),
    mistakes=[
        Mistake("the running max starts at 0 instead of -inf (a bug of the printed function)",
                "start the max at -inf: with every score far below 0, exp(s - 0) underflows to 0",
                partial(streaming, zero_start=True)),
        Mistake("the running sum is not rescaled when the max grows (a bug of the printed "
                "function)", "l = l * exp(m - m_new) + p.sum(-1)", partial(streaming,
                                                                           rescale_sum=False)),
        Mistake("the running max is never updated after the first block (nothing is "
                "rescaled)", "m_new = max(m, the block's max) at every block, with l and acc "
                "rescaled by exp(m - m_new): a later block scoring far above the first "
                "overflows exp otherwise", partial(streaming, frozen=True)),
        Mistake("the running output is not rescaled when the max grows (the sum is)",
                "acc = acc * exp(m - m_new) + p @ v_block, like the sum",
                partial(streaming, rescale_acc=False)),
        Mistake("the rescale factor is exp(m_new - m), upside down (a bug of the printed "
                "function)", "old terms shrink when the max grows: exp(m - m_new)",
                partial(streaming, sign=-1)),
        Mistake("the last block of keys is skipped (a bug of the printed function)",
                "range(0, S, block) visits every key, the last (shorter) block included",
                partial(streaming, drop_last=True)),
    ],
)
