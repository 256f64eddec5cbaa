"""What is wrong with a result that matches no known mistake, in words a student can act on.

When a student's result differs from the reference and none of the exercise's
:class:`~._exercise.Mistake` variants reproduces it, :func:`describe` looks for the
shape of the difference: NaN or inf where the reference is finite, values right only
to a lower precision, the right values with the axes in another order, a constant
factor, weights whose rows do not sum to one or that land on masked keys, some batch
elements or some rows right and others not; more finders (bool masks, the reference's
values reordered, weights from other scores, some columns right, what is wrong with a
shape) are in :mod:`._findings`. The first finding that applies is reported, followed
by where the largest difference lies.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Callable, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ._compare import _where_differs, close, shape_str
from ._findings import (_is_weights, columns, describe_bool, other_scores, reordered,
                        factor_words, shape_finding)

# (tolerance, dtype name) from the finest to the coarsest: a result right only to one
# of these was computed (in part) in that dtype.
_PRECISIONS = ((1e-4, 1e-5, "float32"), (1e-2, 1e-2, "float16"), (4e-2, 4e-2, "bfloat16"))
#: The share of a precision's window (atol + rtol * |expected|) that one number must lie within
#: to be told it ran in that dtype. The window is sized for the worst element of a whole
#: tensor computed in it; a tensor close in every element is evidence, one number is not
#: (bfloat16's window is 5% wide at 3: repeat_loss shifted the wrong way lands at 0.92 of it).
#: Rounding leaves one number far inside: repeat_loss (the one exercise of one number) with its
#: inputs, its output or all of it in float16 or bfloat16, 12 seeds of each case, lay within
#: 0.08 of a window, so each is still told a precision.
_ONE_NUMBER = 0.5
_MAX_LISTED = 4

Finding = Tuple[str, str]  # (what is wrong, what to look at)


def _listed(indices: Sequence[int]) -> str:
    shown = ", ".join(str(i) for i in indices[:_MAX_LISTED])
    return shown + (", ..." if len(indices) > _MAX_LISTED else "")


def _nonfinite(got: Tensor, want: Tensor, rtol: float, atol: float) -> Optional[Finding]:
    bad = ~torch.isfinite(got) & torch.isfinite(want)
    if not bool(bad.any()):
        return None
    nan, n = int(torch.isnan(got)[bad].sum()), int(bad.sum())
    kind = "NaN" if nan == n else "inf" if nan == 0 else "NaN or inf"
    return (f"{n} value(s) are {kind} where the reference is finite",
            "NaN comes from exp overflowing (subtract the row maximum first), from 0/0, or from "
            "-inf - (-inf) in a row with nothing to attend to, or from dividing by a size that "
            "came out 0 (num_heads // embed_dim, say); inf from exp or a sum overflowing, or "
            "from a finite fill (-1e9) overflowing a half-precision dtype")


#: A computation run in a lower dtype misses by its rounding: the median relative difference,
#: in that dtype's epsilons, was at most 2 for softmax and attention computed in float32,
#: float16 and bfloat16 (float64 inputs); soft_lookup divided by sqrt(temperature), close
#: within bfloat16's window, lies 60 to 90 epsilons off. Above this, the dtype is not the cause.
_ROUNDING_EPS = 8


def _rounding_could_explain(got: Tensor, want: Tensor, name: str) -> bool:
    """Whether the difference looks like ``name``'s rounding: small for most values (the
    median relative difference within :data:`_ROUNDING_EPS` epsilons), and not the same
    factor along each row (rounding moves each value on its own)."""
    big = want.abs() > 1e-6 * float(want.abs().max())
    if not bool(big.any()):
        return True
    rel = ((got - want).abs() / want.abs())[big]
    return (float(rel.median()) <= _ROUNDING_EPS * torch.finfo(getattr(torch, name)).eps
            and _row_factors(got, want) is None)


def _row_factors(got: Tensor, want: Tensor) -> Optional[Tuple[float, float]]:
    """``(smallest, largest)`` factor when each row (along the last axis) of ``got`` is the row
    of ``want`` times a factor of its own, not all 1 (a denominator a little off); else None."""
    if want.dim() < 1 or want.shape[-1] < 2:
        return None
    big = want.abs() > 1e-6 * float(want.abs().max()) if want.numel() else want.bool()
    ratio = torch.where(big, got / want, torch.ones_like(want))
    high = torch.where(big, ratio, torch.full_like(ratio, -math.inf)).amax(-1)
    low = torch.where(big, ratio, torch.full_like(ratio, math.inf)).amin(-1)
    rows = big.sum(-1) >= 2
    if not bool(rows.any()) or not bool(torch.isfinite(ratio).all()):
        return None
    off = float((ratio - 1).abs().max())
    if off == 0 or float((high - low)[rows].max()) > 1e-2 * off:
        return None
    return float(low[rows].min()), float(high[rows].max())


def _precision(got: Tensor, want: Tensor, rtol: float, atol: float) -> Optional[Finding]:
    share = _ONE_NUMBER if want.numel() == 1 else 1.0
    for r, a, name in _PRECISIONS:
        if r > rtol and close(got, want, r * share, a * share):
            if not _rounding_could_explain(got, want, name):
                factors = _row_factors(got, want)
                if factors is None:
                    return None
                return (f"each row is the reference's times a factor of its own, close to 1 "
                        f"(from {factors[0]:.9g} to {factors[1]:.9g}): not rounding, which "
                        f"moves each value on its own",
                        "a denominator a little off: an epsilon added to a sum where the formula "
                        "has none, or one the formula has left out")
            return (f"the values are close (within {r:g} relative, {name}'s precision) but not "
                    f"to the inputs' precision (within {rtol:g})",
                    f"either part of the computation ran in {name} (a tensor created with a fixed "
                    f"dtype, torch.tensor(...) or torch.ones(...) without dtype=, or a "
                    f".float()/.half() along the way: take dtype= from the inputs), or the formula "
                    f"differs a little (an approximation, an added epsilon, a finite fill where "
                    f"-inf belongs, a size that is off)")
    return None


def _permutation(got: Tensor, want: Tensor, rtol: float, atol: float) -> Optional[Finding]:
    """The reference with its axes in another order (a transpose or a permute)."""
    n = want.dim()
    if n < 2 or n > 6 or sorted(got.shape) != sorted(want.shape):
        return None
    for perm in itertools.permutations(range(n)):
        if list(perm) == list(range(n)) or tuple(want.shape[p] for p in perm) != tuple(got.shape):
            continue
        if close(got, want.permute(*perm), rtol, atol):
            moved = [f"axis {i} holds the reference's axis {p}" for i, p in enumerate(perm) if i != p]
            return (f"the right values with the axes in another order (got shape "
                    f"{shape_str(got.shape)}, expected {shape_str(want.shape)}: "
                    f"{'; '.join(moved)})",
                    "look for a transpose or permute of the wrong axes (a .T on a batched tensor, "
                    "transpose(0, 1) instead of transpose(-2, -1)), or one that is missing")
    return None


def _factor(got: Tensor, want: Tensor, rtol: float, atol: float) -> Optional[Finding]:
    if want.numel() < 2:  # one number is always a constant times another: that says nothing
        return None
    big = want.abs() > max(10 * atol, 1e-6)
    if not bool(big.any()) or not bool((got[~big].abs() <= 10 * atol + 1e-6).all()):
        return None
    ratios = got[big] / want[big]
    c = float(ratios.median())
    if not math.isfinite(c) or abs(c - 1.0) < 1e-3 or abs(c) < 1e-6:
        return None
    if not close(got, want * c, rtol, atol):
        return None
    return (f"the result is the reference times {factor_words(c)}: right up to a constant factor",
            "look for a scale applied twice, in the wrong place or with the wrong size, or a "
            "normalisation by a constant")


def _weights(got: Tensor, want: Tensor, rtol: float, atol: float) -> Optional[Finding]:
    if not _is_weights(want):
        return None
    leak = (want == 0) & (got.abs() > atol)
    if bool(leak.any()):
        idx = tuple(int(i) for i in leak.nonzero()[0])
        return (f"{int(leak.sum())} weight(s) are not 0 where the reference's weight is exactly 0 "
                f"(a masked key, or a key a sparse lookup drops), e.g. at index {idx}: "
                f"{float(got[idx]):.4g}",
                "a masked key must get weight exactly 0: fill its score with -inf before the "
                "softmax (a bool mask is True where attention is allowed); in a sparse lookup, "
                "check the threshold and the scores it is computed from")
    sums = got.sum(-1)
    off = (sums - 1).abs() > 1e-3
    if bool(off.any()):
        row = tuple(int(i) for i in off.nonzero()[0])
        axis = ""
        if got.dim() >= 2 and bool(((got.sum(-2) - 1).abs() < 1e-3).all()):
            axis = " (they sum to one down the columns: the softmax ran over axis -2)"
        return (f"the rows of the weights do not sum to one: row {row} sums to "
                f"{float(sums[row]):.4g}{axis}",
                "each query's weights over the keys sum to one along the last axis: check "
                "the normalisation (a softmax: exp(s - max) / exp(s - max).sum(-1, "
                "keepdim=True); a sparse lookup: the threshold and the support it averages)")
    return None


_ROWS_HINT = ("look for what differs between the rows named: a fixed index ([0]), a mask or "
              "sequence not broadcast along that axis, positions counted from the wrong start, "
              "a special case for some rows (a row that hides every key, say), or a formula "
              "right only where it does not matter (at position 0 an angle is 0 whatever the "
              "frequency; a causal query 0 sees one key, weight 1 whatever the scale)")
# Only the first row right (or the last): most often where a formula cannot go wrong.
_EDGE_ROW_HINT = ("the formula is likely right only where it does not matter: {where}; so "
                  "check the formula itself first (the scale, the angles or frequencies, which "
                  "keys are hidden, which tensor is used); then a fixed index or a mask or "
                  "sequence not broadcast along that axis")
_FIRST_ROW = ("at position 0 every angle is 0 whatever the frequency, and a causal query 0 sees "
              "one key, weight 1 whatever the scale")
_LAST_ROW = ("the last query has no key after it, so whatever a formula does to later keys "
             "(hides them, clamps their distance) it is right there")
_BATCH_HINT = ("each batch element must be computed the same way: look for a fixed index ([0]), "
               "a .T or transpose(0, 1) that mixes the batch, or a mask not broadcast over the "
               "batch")


def _one_row(t: Tensor) -> bool:
    """Whether every row of ``t`` (along axis -2) is the same: an element whose queries all
    see a single key (a padded sequence of length 1) is right whatever the scores."""
    return t.dim() >= 2 and t.shape[-2] > 1 and bool((t == t[..., :1, :]).all())


def _some_right(got: Tensor, want: Tensor, rtol: float, atol: float, axis: int,
                what: str, hint: str, formula_free: bool = False) -> Optional[Finding]:
    """``formula_free``: elements right whatever the formula (:func:`_one_row`) do not count as
    right: a wrong scale is not a batch mixed up."""
    n = want.shape[axis]
    if n < 2:
        return None
    right = [i for i in range(n)
             if close(got.select(axis, i), want.select(axis, i), rtol, atol)
             and not (formula_free and _one_row(want.select(axis, i)))]
    if not right:
        return None
    wrong = [i for i in range(n) if i not in right]
    return (f"right for {what} {_listed(right)} but not for {what} {_listed(wrong)} "
            f"(along axis {axis} of the result)", hint)


def axis_name(legend: str, axis: int, ndim: int) -> Optional[str]:
    """The name the legend gives ``axis`` of an ``ndim``-axis result: ``"H"`` for axis 0 of
    ``"(H, L, S)"``; ``None`` when the legend does not say (``"..."`` covers it)."""
    found = re.search(r"\(([^()]*)\)", legend)
    if not found:
        return None
    names = [n.strip() for n in found.group(1).split(",")]
    if names and names[0] == "...":
        names = names[1:]
        axis -= ndim - len(names)
    elif len(names) != ndim:
        return None
    return names[axis] if 0 <= axis < len(names) else None


def _batch(got: Tensor, want: Tensor, rtol: float, atol: float,
           legend: str = "") -> Optional[Finding]:
    for axis in range(want.dim() - 2):
        name = axis_name(legend, axis, want.dim())
        if name in (None, "B"):
            found = _some_right(got, want, rtol, atol, axis, "batch elements", _BATCH_HINT,
                                formula_free=True)
        else:
            found = _some_right(got, want, rtol, atol, axis, f"{name} =",
                                f"every index along {name} must follow the same formula: look "
                                f"for a value computed per {name} (a slope, a head's slice) "
                                f"or a fixed index")
        if found:
            return found
    return None


def _rows(got: Tensor, want: Tensor, rtol: float, atol: float) -> Optional[Finding]:
    if want.dim() < 2:
        return None
    found = _some_right(got, want, rtol, atol, want.dim() - 2, "rows", _ROWS_HINT)
    n = want.shape[-2]
    if not found or n < 3 or _one_row(got):  # every row the same: a fixed index, more likely
        return found
    edge = [i for i in (0, n - 1) if found[0].startswith(f"right for rows {i} but")]
    return (found[0], _EDGE_ROW_HINT.format(where=_LAST_ROW if edge[0] else _FIRST_ROW)
            ) if edge else found


_SAME_SHAPE: List[Callable[[Tensor, Tensor, float, float], Optional[Finding]]] = [
    _nonfinite, _precision, _permutation, reordered, _factor, _weights, other_scores, _batch,
    _rows, columns,
]


def describe(got: object, expected: object, rtol: float, atol: float,
             legend: str = "") -> Finding:
    """Say what is wrong with ``got``, a result that matches no known mistake.

    Args:
        got: the student's result.
        expected: the reference's result (different from ``got``).
        rtol, atol: the tolerances of the comparison that failed.
        legend: the expected shape in words, e.g. ``"(..., L, Ev)"``.

    Returns:
        ``(what, hint)``: what is wrong (with where the largest difference is, when the
        shapes agree) and what to look at (``""`` when nothing specific is known).
    """
    if not (isinstance(got, Tensor) and isinstance(expected, Tensor)):
        return "the result differs from the reference", ""
    g, w = (t.detach().to("cpu", torch.float64) for t in (got, expected))
    if tuple(g.shape) != tuple(w.shape):
        found = _permutation(g, w, rtol, atol)
        if found:
            return found
        legend = f" = {legend}" if legend else ""
        return (f"the result has shape {shape_str(g.shape)}, expected "
                f"{shape_str(w.shape)}{legend}{shape_finding(g, w, rtol, atol)}", "")
    detail = _where_differs(got, expected)
    if got.dtype == torch.bool and expected.dtype == torch.bool:
        found = describe_bool(got.detach().cpu(), expected.detach().cpu())
        return f"{found[0]}; {detail}", found[1]
    if got.dtype == torch.bool or expected.dtype == torch.bool:
        return detail, ""
    for finder in _SAME_SHAPE:
        found = (_batch(g, w, rtol, atol, legend) if finder is _batch
                 else finder(g, w, rtol, atol))
        if found:
            if finder is _nonfinite:  # the detail would only say the same again
                return found
            return f"{found[0]}; {detail}", found[1]
    return detail, ""
