"""Assignment 6's masking step and its variation, specified for :mod:`.masking`.

- ``masked_scores(scores, attn_mask=None, is_causal=False)``: the step of the reference's
  attention that hides keys (a bool mask is True where attention is allowed: ``-inf`` where it
  is False; a float mask is added; ``is_causal`` is the upper-left causal mask; both at once are
  refused with a ``ValueError``). Its reference is the reference's own masking step,
  :func:`qkv.attention_scores` applied to scores of zero, added to the student's scores: one
  masking step in the course, not two copies of it.
- ``global_window_mask(L, window, n_global, device=None)``: a variation the reference does not
  contain, a causal sliding window with ``n_global`` global tokens, checked against one built
  here from :func:`qkv.sliding_window_mask`.
"""

from __future__ import annotations

from functools import partial
from typing import Any, List, Optional

import torch
from torch import Tensor

import qkv

from .harness import (bool_mask, Case, close, Exercise, ExerciseRule, half_case, is_tensor,
                      Mistake, randn, sizes)
from .mistakes.attention import CAUSAL_DIAGONAL_MASKED, CAUSAL_FUTURE_ALLOWED, TORCH_ATTENTION

__all__: list = []

_INF = float("-inf")
#: Scores at or below this are hidden (a finite fill like -1e9 included, except where it matters).
_HIDDEN = -1e4
_CONVENTION = ("a bool attn_mask is True where attention is allowed (SDPA's convention): "
               "scores.masked_fill(~attn_mask, float('-inf'))")
_REFUSE_HINT = ("pass one or the other: raise ValueError('pass either attn_mask or is_causal=True, "
                "not both; to combine them, pass attn_mask=causal_mask(L, S) & your_mask'), as "
                "the reference and PyTorch's math backend do")

# --------------------------------------------------------------- the masking step


def _bias(scores: Tensor, attn_mask: Optional[Tensor], is_causal: bool) -> Tensor:
    """What the reference's masking step adds to ``scores``: 0 (or the float mask) where a key
    may be seen, ``-inf`` where not (:func:`qkv.attention_scores` on zero queries and keys)."""
    zeros_q = scores.new_zeros(*scores.shape[:-1], 1)
    zeros_k = scores.new_zeros(*scores.shape[:-2], scores.shape[-1], 1)
    return qkv.attention_scores(zeros_q, zeros_k, attn_mask, is_causal).to(scores.dtype)


def masked_scores(scores: Tensor, attn_mask: Optional[Tensor] = None, is_causal: bool = False, *,
                  mode: str = "right", causal_diag: int = 0, causal_align: str = "top",
                  fill: float = _INF) -> Any:
    """The right masked scores (``mode="right"``), or one known mistake's.

    Args:
        mode: ``right``; ``inverted`` (hides where the mask is True); ``zero`` (0 instead of
            -inf); ``added`` (a bool mask added as 0/1); ``ignored``; ``multiply_float`` (a
            float mask multiplied); ``float_as_bool`` (a float mask's negative entries made
            -inf, nothing added); ``float_nonzero`` (its non-zero entries made -inf); ``transposed`` (the mask's last two axes swapped);
            ``full_rows_kept`` (a row that hides every key left as it is); ``square``
            (the causal mask built ``(L, L)``); ``built`` (written out, not the reference's
            step: with ``causal_*`` or ``fill``, those mistakes).
        causal_diag, causal_align: a shifted causal mask.
        fill: what hidden scores become.

    Returns:
        The scores ``(..., L, S)``; ``torch.tensor(True)`` where the right answer refuses
        (``is_causal`` with an ``attn_mask``: see :func:`_run`).
    """
    if is_causal and attn_mask is not None and mode == "right":
        return torch.tensor(True, device=scores.device)
    L, S = scores.shape[-2], scores.shape[-1]
    if mode == "right" and fill == _INF:
        return scores + _bias(scores, attn_mask, is_causal)
    if attn_mask is not None:  # the mistakes of a mask given (not of the causal one)
        if mode == "ignored":
            return scores
        if attn_mask.dtype != torch.bool:
            if mode in ("float_as_bool", "float_nonzero"):
                return scores.masked_fill(attn_mask < 0 if mode == "float_as_bool"
                                          else attn_mask != 0, _INF)
            return scores * attn_mask if mode == "multiply_float" else scores + attn_mask
        if mode == "added":
            return scores + attn_mask.to(scores.dtype)
        if mode == "transposed":
            attn_mask = attn_mask.transpose(-2, -1)
        if mode == "full_rows_kept":
            attn_mask = attn_mask | ~attn_mask.any(dim=-1, keepdim=True)
    elif is_causal:
        if causal_align == "ignored":
            return scores
        cols = L if mode == "square" else S
        attn_mask = torch.ones(L, cols, dtype=torch.bool, device=scores.device).tril(
            causal_diag + (S - L if causal_align == "bottom" else 0))
    else:
        return scores
    hidden = attn_mask if mode == "inverted" else ~attn_mask
    return scores.masked_fill(hidden, 0.0 if mode == "zero" else fill)


def _run(student: Any, scores: Tensor, attn_mask: Optional[Tensor] = None,
         is_causal: bool = False) -> Any:
    """Call the answer; with ``is_causal`` and an ``attn_mask`` it must raise ``ValueError``."""
    if is_causal and attn_mask is not None:
        try:
            student(scores, attn_mask=attn_mask, is_causal=True)
        except ValueError:
            return torch.tensor(True, device=scores.device)  # on the inputs' device, as a result must be
        raise ExerciseRule("with is_causal=True and an attn_mask it returned a result instead of "
                           "raising ValueError", _REFUSE_HINT)
    return student(scores, attn_mask=attn_mask, is_causal=is_causal)


def _close(got: Any, expected: Any, rtol: float, atol: float) -> bool:
    """Equal where a key is seen; hidden (-inf, or a very negative finite fill) where it is not;
    and a row that hides every key exactly -inf throughout: a finite fill there gives that
    query equal weights on every key where the attention must give it none."""
    if not (is_tensor(got) and is_tensor(expected)) or tuple(got.shape) != tuple(expected.shape):
        return False
    if expected.dtype == torch.bool or got.dtype == torch.bool:
        return close(got, expected, rtol, atol)
    g = got.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    hidden = e <= _HIDDEN
    if not torch.equal(hidden, g <= _HIDDEN):
        return False
    if e.dim() and e.shape[-1]:
        full = hidden.all(dim=-1, keepdim=True).expand_as(e)
        if not torch.equal(e[full] == _INF, g[full] == _INF):
            return False
    return close(g.masked_fill(hidden, 0.0), e.masked_fill(hidden, 0.0), rtol, atol)


def _scores_cases() -> List[Case]:
    def make(batch, L, S, mask=None, **kw):
        def build(gen, device, dtype):
            scores = randn(gen, *batch, L, S).to(device=device, dtype=dtype)
            kwargs = dict(kw)
            if mask == "bool":
                kwargs["attn_mask"] = bool_mask(gen, L, S, device=device)
            elif mask == "empty row":
                m = bool_mask(gen, L, S)
                m[1] = False  # query 1 may see no key
                kwargs["attn_mask"] = m.to(device)
            elif mask == "padding":
                lengths = torch.randint(1, S, (batch[0],), generator=gen)
                keep = torch.arange(S)[None, :] < lengths[:, None]
                kwargs["attn_mask"] = keep[:, None, None, :].to(device)
            elif mask == "float":
                kwargs["attn_mask"] = randn(gen, L, S).to(device=device, dtype=dtype)
            return (scores,), kwargs
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("unbatched scores (L=3, S=5) and no mask", make((), 3, 5), f32),
        Case("scores (B=2, H=3, L=5, S=7) and a bool mask (L, S)", make((2, 3), 5, 7, "bool"),
             f64),
        Case("scores (B=3, H=2, L=S=6) and a padding mask (B, 1, 1, S)",
             make((3, 2), 6, 6, "padding"), f32),
        Case("scores (B=2, L=S=4) and is_causal=True", make((2,), 4, 4, is_causal=True), f32),
        Case("scores (B=2, H=2, L=3 < S=6) and is_causal=True",
             make((2, 2), 3, 6, is_causal=True), f64),
        Case("scores (B=2, L=6 > S=4) and is_causal=True (top left: queries 3..5 see every key)",
             make((2,), 6, 4, is_causal=True), f64),
        Case("scores (B=2, L=5, S=3) and a float mask, added to the scores",
             make((2,), 5, 3, "float"), f64),
        Case("scores (B=2, H=2, L=4, S=5) and a bool mask (L, S) under which query 1 may see "
             "no key", make((2, 2), 4, 5, "empty row"), f64),
        half_case("scores (B=2, H=2, L=4, S=6) and a bool mask (L, S)",
                  make((2, 2), 4, 6, "bool")),
        # Last: an answer that does not refuse stops the check here, after every other input.
        Case("scores (B=2, L=S=4), is_causal=True and a bool mask together (must raise "
             "ValueError)", make((2,), 4, 4, "bool", is_causal=True), f32),
    ]


_FILL_HINT = ("this exercise's masked scores are float('-inf'): a finite fill (-1e9, or even "
              "torch.finfo(scores.dtype).min, which cannot overflow) leaves equal weights on "
              "every key of a row that hides them all, where the attention must give that "
              "query none (the reference and PyTorch's SDPA return zeros for such a row); and "
              "-1e9 overflows in float16 (masked_fill raises)")

_FLOAT_HINT = ("a float attn_mask is a bias, not a bool mask: add it to the scores (scores + "
               "attn_mask.to(scores.dtype)), its -inf entries hide keys and its finite ones "
               "shift them; test attn_mask.dtype == torch.bool to tell the two apart")

MASKED_SCORES = Exercise(
    name="masked_scores", reference=masked_scores, cases=_scores_cases(), run_student=_run,
    forbid=TORCH_ATTENTION, compare=_close, legend="(..., L, S)",
    helpers={"causal_mask": qkv.causal_mask},
    mistakes=[
        Mistake("inverted bool mask", _CONVENTION + "; nn.MultiheadAttention uses the opposite",
                partial(masked_scores, mode="inverted")),
        Mistake("hidden scores set to 0 instead of -inf",
                "a hidden score must become -inf, not 0: exp(0) = 1 still gives that key "
                "weight; " + _CONVENTION, partial(masked_scores, mode="zero")),
        Mistake("a bool mask added to the scores as 0/1",
                "adding a bool mask adds 1 where it is True and 0 where it is False: nothing is "
                "hidden; " + _CONVENTION + " (only a float mask is added)",
                partial(masked_scores, mode="added")),
        Mistake("a finite fill (like -1e9 or finfo.min) instead of -inf", _FILL_HINT,
                partial(masked_scores, fill=-1e9)),
        Mistake("a row that hides every key left unmasked",
                "hide every key the mask hides, even all of a row's: that query then sees "
                "nothing (the attention gives such a row zero weights), not everything",
                partial(masked_scores, mode="full_rows_kept")),
        Mistake("mask applied along the wrong axes (transposed: keys taken for queries)",
                "the mask broadcasts against the scores (..., L, S) as it is: its last axis is "
                "the keys, the one before the queries; a (B, 1, 1, S) padding mask hides keys "
                "for every query; do not transpose or reshape it",
                partial(masked_scores, mode="transposed")),
        Mistake("attn_mask ignored", "apply attn_mask (bool: -inf where False; float: add it)",
                partial(masked_scores, mode="ignored")),
        Mistake("a float mask multiplied with the scores instead of added",
                "a float attn_mask is a bias: add it to the scores (scores + attn_mask)",
                partial(masked_scores, mode="multiply_float")),
        Mistake("a float mask's negative entries made -inf instead of the mask added",
                _FLOAT_HINT, partial(masked_scores, mode="float_as_bool")),
        Mistake("a float mask used as a bool (-inf where it is non-zero) instead of added",
                _FLOAT_HINT, partial(masked_scores, mode="float_nonzero")),
        Mistake(*CAUSAL_DIAGONAL_MASKED, partial(masked_scores, causal_diag=-1, mode="built")),
        Mistake(*CAUSAL_FUTURE_ALLOWED, partial(masked_scores, causal_diag=1, mode="built")),
        Mistake("causal mask aligned to the bottom right instead of the top left",
                "with L != S the causal mask starts at the top-left corner: "
                "causal_mask(L, S), as SDPA's is_causal does",
                partial(masked_scores, causal_align="bottom", mode="built")),
        Mistake("causal mask built square (L, L): S ignored",
                "the scores are (..., L, S): build causal_mask(L, S, device=scores.device)",
                partial(masked_scores, mode="square")),
        Mistake("is_causal ignored", "when is_causal=True, hide the future: query i sees keys "
                "0..i (causal_mask(L, S, device=scores.device))",
                partial(masked_scores, causal_align="ignored", mode="built")),
    ],
    error_hints=[("shape of the mask", "boolean indexing (scores[~mask] = ...) does not "
                  "broadcast: use scores.masked_fill(~attn_mask, float('-inf')), which "
                  "broadcasts a (B, 1, 1, S) or (L, S) mask"),
                 ("cannot be converted to type", _FILL_HINT),
                 # ~ or masked_fill on a float mask, taken for a bool one
                 ("only implemented on integer and Boolean", _FLOAT_HINT),
                 ("only supports boolean masks", _FLOAT_HINT)],
)

# --------------------------------------------------------------- the variation: global tokens


def global_window_mask(L: int, window: int, n_global: int, device: Optional[torch.device] = None,
                       *, extra: int = 0, causal: bool = True, rows: bool = True,
                       cols: bool = True, g_shift: int = 0, invert: bool = False) -> Tensor:
    """``(L, L)`` bool mask: query ``i`` sees key ``j`` when ``i - window < j <= i`` (a causal
    window, itself included), or ``j < n_global`` (every query sees the global tokens), or
    ``i < n_global`` (a global token sees every key). The keywords put one mistake back:
    ``extra`` widens the window, ``causal=False`` lets it see ahead too, ``rows``/``cols``
    drop one half of the global rule, ``g_shift`` counts the global tokens wrong."""
    band = qkv.sliding_window_mask(L, L, window + extra, device=device) if window + extra > 0 \
        else torch.zeros(L, L, dtype=torch.bool, device=device)
    if not causal:
        band = band | band.T
    g = max(n_global + g_shift, 0)
    pos = torch.arange(L, device=device)
    glob = torch.zeros(L, L, dtype=torch.bool, device=device)
    if rows:
        glob = glob | (pos < g)[:, None]
    if cols:
        glob = glob | (pos < g)[None, :]
    allowed = band | glob
    return ~allowed if invert else allowed


def _window_cases() -> List[Case]:
    return [
        Case("L=8, window=3, n_global=2", sizes(8, 3, 2), None),
        Case("L=6, window=1, n_global=1 (each token sees itself and the global one)",
             sizes(6, 1, 1), None),
        Case("L=7, window=2, n_global=0 (a plain causal window)", sizes(7, 2, 0, here=True), None),
        Case("L=10, window=4, n_global=3 and device given", sizes(10, 4, 3, here=True), None),
        Case("L=5, window=8, n_global=1 (a window wider than the sequence)", sizes(5, 8, 1),
             None),
    ]


GLOBAL_WINDOW_MASK = Exercise(
    name="global_window_mask", reference=global_window_mask, cases=_window_cases(),
    forbid=TORCH_ATTENTION, legend="(L, L)",
    mistakes=[
        Mistake("inverted mask (True marks what is hidden)",
                "a bool mask is True where attention is allowed (SDPA's convention)",
                partial(global_window_mask, invert=True)),
        Mistake("window off by one (one key too many)",
                "query i sees itself and the window - 1 keys before it: i - window < j <= i",
                partial(global_window_mask, extra=1)),
        Mistake("window off by one (one key too few)",
                "query i sees itself and the window - 1 keys before it: i - window < j <= i",
                partial(global_window_mask, extra=-1)),
        Mistake("window not causal (it also sees the next keys)",
                "outside the global tokens the window looks back only: j <= i",
                partial(global_window_mask, causal=False)),
        Mistake("global tokens are seen by all but do not see all",
                "the rows of the global tokens (queries 0..n_global-1) are True throughout",
                partial(global_window_mask, rows=False)),
        Mistake("global tokens see all but are not seen by all",
                "the columns of the global tokens (keys 0..n_global-1) are True throughout",
                partial(global_window_mask, cols=False)),
        Mistake("one global token too many", "the global tokens are 0..n_global-1: "
                "positions < n_global", partial(global_window_mask, g_shift=1)),
        Mistake("one global token too few", "the global tokens are 0..n_global-1: "
                "positions < n_global", partial(global_window_mask, g_shift=-1)),
        Mistake("no global tokens (n_global ignored)",
                "tokens 0..n_global-1 see every key and every query sees them",
                partial(global_window_mask, rows=False, cols=False)),
    ],
)
