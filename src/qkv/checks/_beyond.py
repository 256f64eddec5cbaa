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
"""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import Tensor

import qkv

from ._experiment import SPREAD, Experiment
from .harness import Case, Exercise, Mistake, half_case, via_float32
from .mistakes.efficient import chunk_by_chunk
from .mistakes.attention import FILL_HINT, OVERFLOW, TORCH_ATTENTION, qkv_inputs, row_softmax

# --------------------------------------------------------------- assignment 4: a temperature


def temperature_attention(query: Tensor, key: Tensor, value: Tensor, temperature: float = 1.0, *,
                          key_t: bool = False, scale_power: float = 0.5, dim: int = -1,
                          stable: bool = True, multiply: bool = False, width: str = "E",
                          root_t: bool = False, keepdim: bool = True,
                          tempered: bool = True) -> Tensor:
    """``softmax(query @ key^T / (sqrt(E) * temperature)) @ value``, or one bug of the buggy
    version put back (``key_t``: ``key.T``; ``scale_power=1``: ``/ E``; ``dim=-2``: the softmax
    over the queries; ``stable=False``: no maximum subtracted; ``multiply``: ``* temperature``);
    or another slip (``width="S"``: sqrt of the number of keys; ``root_t``: / sqrt(E * T);
    ``keepdim=False``: the row sums without it; ``tempered=False``: the temperature ignored)."""
    E = query.shape[-1] if width == "E" else key.shape[-2]
    kt = key.permute(*reversed(range(key.dim()))) if key_t else key.transpose(-2, -1)
    t = 1.0 / temperature if multiply else temperature if tempered else 1.0
    t = math.sqrt(t) if root_t else t
    scores = (query @ kt) / (E ** scale_power * t)
    if stable:
        scores = scores - scores.amax(dim=dim, keepdim=True)
    e = scores.exp()
    return (e / e.sum(dim=dim, keepdim=keepdim)) @ value


def _temperature_cases():
    def make(batch, L, S, E, Ev, big=0.0, **kw):
        def build(gen, device, dtype):
            return qkv_inputs(gen, device, dtype, batch, L, S, E, Ev, big), kw
        return build
    f32, f64 = torch.float32, torch.float64
    return [
        Case("unbatched input with L=3, S=5, E=4, Ev=6 (temperature left out)",
             make((), 3, 5, 4, 6), f32),
        # Not E=16 with temperature 0.5: there 1/(E T) = T/sqrt(E), and a temperature that
        # multiplies would be taken for the printed 1/E scale.
        Case("unbatched input with L=4, S=4, E=8, Ev=3 and temperature=0.5",
             make((), 4, 4, 8, 3, temperature=0.5), f64),
        Case("batched input (B=2, H=3) with L=5, S=7, E=8, Ev=3 and temperature=2.0",
             make((2, 3), 5, 7, 8, 3, temperature=2.0), f64),
        Case("input with large logits (scores near 800) and temperature=1.0",
             make((2,), 4, 5, 4, 3, big=40.0, temperature=1.0), f64),
        Case("rows far apart (scores near +450 in some rows, -450 in others) and "
             "temperature=0.5: each row needs its own maximum", _rows_apart, f64),
        half_case("batched input (B=2, H=2) with L=4, S=6, E=8, Ev=3 and temperature=2.0",
                  make((2, 2), 4, 6, 8, 3, temperature=2.0)),
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


# --------------------------------------------------------------- assignment 6: two masks at once


def padded_causal(query: Tensor, key: Tensor, value: Tensor, lengths: Tensor, *,
                  future: bool = False, inclusive: bool = False, after: bool = False,
                  invert: bool = False, stable: bool = True, short: bool = False,
                  max_over_all: bool = False) -> Tensor:
    """Attention where query ``i`` of sequence ``b`` sees keys ``j <= i`` with ``j <
    lengths[b]``; or one bug of the printed version put back (``future``: ``triu``;
    ``inclusive``: ``<=``; ``after``: weights zeroed after the softmax; ``invert``: the mask's
    meaning flipped; ``stable=False``: no row maximum subtracted; ``short``: ``< lengths - 1``;
    ``max_over_all``: the maximum taken over every key, hidden ones too, and the exponentials
    zeroed where hidden)."""
    L, S = query.shape[-2], key.shape[-2]
    ones = torch.ones(L, S, dtype=torch.bool, device=query.device)
    causal = ones.triu() if future else ones.tril()
    pos = torch.arange(S, device=query.device)[None, :]
    real = pos <= lengths[:, None] if inclusive else pos < lengths[:, None] - int(short)
    allowed = causal & real[:, None, None, :]
    if invert:
        allowed = ~allowed
    if not (future or inclusive or after or invert or short or max_over_all) and stable:
        mask = (qkv.causal_mask(L, S, device=query.device)
                & qkv.padding_mask(lengths, S)[:, None, None, :])
        return qkv.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if after:
        return torch.softmax(scores, dim=-1).masked_fill(~allowed, 0.0) @ value
    if max_over_all:
        e = torch.exp(scores - scores.amax(dim=-1, keepdim=True)) * allowed
        return e / e.sum(dim=-1, keepdim=True) @ value
    return row_softmax(scores.masked_fill(~allowed, float("-inf")), stable=stable) @ value


def _padded_cases():
    def make(B, H, L, E, Ev, lengths, big=0.0, hidden_high=False):
        def build(gen, device, dtype):
            q, k, v = qkv_inputs(gen, device, dtype, (B, H), L, L, E, Ev, big=big)
            if hidden_high:  # every key but the first scores about 800 for every query: query
                q[..., 0], k[..., 1:, 0] = 40.0, 40.0  # 0 sees key 0 only, far below the rest
            return (q, k, v, torch.tensor(lengths, device=device)), {}
        return build
    f32, f64 = torch.float32, torch.float64
    return [
        Case("B=2, H=1, L=S=4, E=4, Ev=3, lengths=[4, 2]", make(2, 1, 4, 4, 3, [4, 2]), f64),
        Case("B=3, H=2, L=S=6, E=8, Ev=5, lengths=[6, 3, 1]", make(3, 2, 6, 8, 5, [6, 3, 1]), f32),
        Case("B=2, H=4, L=S=5, E=4, Ev=2, lengths=[2, 5]", make(2, 4, 5, 4, 2, [2, 5]), f64),
        Case("B=2, H=1, L=S=4 with large logits (scores near 800), lengths=[4, 3]",
             make(2, 1, 4, 4, 3, [4, 3], big=40.0), f64),
        Case("B=2, H=1, L=S=4 with every score very negative (near -800), lengths=[4, 2]: a "
             "finite fill outweighs the real keys", make(2, 1, 4, 4, 3, [4, 2], big=-40.0), f64),
        Case("B=2, H=1, L=S=5, lengths=[5, 1]: the keys a query may not see (the future, the "
             "padding) score about 800 above the ones it may", make(2, 1, 5, 4, 3, [5, 1],
                                                                   hidden_high=True), f64),
        half_case("B=2, H=2, L=S=5, E=4, Ev=3, lengths=[5, 2]", make(2, 2, 5, 4, 3, [5, 2])),
    ]


PADDED_CAUSAL_ATTENTION = Exercise(
    name="padded_causal_attention", reference=via_float32(padded_causal), cases=_padded_cases(),
    forbid=TORCH_ATTENTION, legend="(B, H, L, Ev)",
    mistakes=[
        Mistake("the future allowed instead of the past (triu) (a bug of the printed function)",
                "query i may see keys 0..i: torch.tril", partial(padded_causal, future=True)),
        Mistake("one padding key allowed (<= lengths) (a bug of the printed function)",
                "keys 0..length-1 are real: arange(S) < lengths", partial(padded_causal,
                                                                          inclusive=True)),
        Mistake("weights zeroed after the softmax (a bug of the printed function)",
                "mask the scores with -inf before the softmax, so each row still sums to one",
                partial(padded_causal, after=True)),
        Mistake("the mask inverted (True marks what is hidden)",
                "True is allowed: masked_fill(~allowed, -inf)", partial(padded_causal, invert=True)),
        Mistake(*OVERFLOW, partial(padded_causal, stable=False)),
        Mistake("the row maximum taken over every key, the hidden ones too",
                "subtract the largest score among the keys the query may see: fill the hidden "
                "ones with -inf first, then softmax (a hidden key far above the rest leaves "
                "exp 0 everywhere it may look, and 0 / 0)",
                partial(padded_causal, max_over_all=True)),
        Mistake("one real key too few (< lengths - 1)", "keys 0..length-1 are real: "
                "arange(S) < lengths", partial(padded_causal, short=True)),
    ],
    error_hints=[("same device", "build the masks on query.device"),
                 ("without overflow", FILL_HINT)],
)


def padding_leak(length: int, S: int, generator: torch.Generator, *, scale: float = 4.0,
                 dim: int = -1, real: bool = False, queries: int = 8,
                 median: bool = False) -> float:
    """Without a padding mask, the mean weight 8 queries give to the ``S - length`` padded keys;
    or with a slip (``scale``: what the scores are divided by; ``dim``: the softmax axis;
    ``real``: the weight on the real keys; ``queries``: how many are drawn; ``median``: the
    median over the queries)."""
    q = torch.randn(queries, 16, generator=generator)
    k = torch.randn(S, 16, generator=generator)
    weights = torch.softmax(q @ k.T / scale, dim=dim)
    leak = (weights[:, :length] if real else weights[:, length:]).sum(dim=-1)
    return (leak.median() if median else leak.mean()).item()


PADDING_LEAK = Experiment(
    name="padding_leak", reference=padding_leak, settings=((4, 16), (12, 16), (4, 64)),
    quantity="weight on the padding", spread=SPREAD,
    mistakes=(
        # Every key gets 1/S on average whatever the scale: these two change only the spread.
        Mistake("scores not divided by 4", "the scores are q @ k.T / 4 (4 = sqrt(16))",
                partial(padding_leak, scale=1.0)),
        Mistake("scores divided by 16 (the width) instead of 4 = sqrt(16)",
                "the scores are q @ k.T / 4", partial(padding_leak, scale=16.0)),
        Mistake("softmax over the queries (dim=0)", "each query's weights over the keys sum to "
                "one: softmax(dim=-1)", partial(padding_leak, dim=0)),
        Mistake("the weight on the real keys 0..length-1, not on the padding",
                "the padding is keys length..S-1: weights[:, length:]",
                partial(padding_leak, real=True)),
        # Found passing by a student walk (the mean is the same by symmetry), named seed for seed.
        Mistake("scores divided by sqrt(8) instead of 4 = sqrt(16)", "the scores are q @ k.T / 4: "
                "the keys' width is 16", partial(padding_leak, scale=math.sqrt(8))),
        Mistake("16 queries drawn instead of 8", "draw 8 queries (8, 16), then the keys (S, 16)",
                partial(padding_leak, queries=16)),
        Mistake("the median over the queries instead of the mean", "return the mean over the 8 "
                "queries of each one's weight on the padding", partial(padding_leak, median=True)),
    ),
    hint="draw 8 queries (8, 16) and S keys (S, 16) from the generator, take the softmax of "
         "q @ k.T / 4 with no mask, and return the mean over the queries of the weight on keys "
         "length..S-1")

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
