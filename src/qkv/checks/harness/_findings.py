"""More shapes of a difference for :mod:`._describe`: masks, reorderings, softmax temperatures.

Each finder takes the student's result and the reference's (float64 on the CPU, or bool)
and returns ``(what is wrong, what to look at)`` or ``None``:

- :func:`describe_bool`: a bool mask that is inverted, transposed, flipped, a triangle
  with its diagonal shifted, or else how many positions are wrongly True / False;
- :func:`shape_finding`: a shape with an extra or missing axis of size 1, or which axes
  differ;
- :func:`reordered`: the reference's values, all of them, in other places;
- :func:`other_scores`: weights whose rows sum to one but that come from other scores
  (scaled by a constant: a temperature or scale applied wrongly);
- :func:`columns`: some columns (the last axis) right and others not.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from ._compare import close

__all__: list = []

Finding = Tuple[str, str]

_MASK_HINT = ("a mask is True where attention is allowed (for a padding mask: True on the "
              "real tokens)")


def _nice(c: float) -> str:
    """``c`` in words when it is a simple factor: 2, 1/4, sqrt(8), 1/sqrt(8)."""
    for value, word in ((c, ""), (1.0 / c, "1/")):
        k = round(value)
        if k >= 2 and abs(value - k) < 1e-3 * k:
            return f"{word}{k}"
        k2 = round(value * value)
        if k2 >= 2 and abs(value * value - k2) < 1e-3 * k2:
            return f"{word}sqrt({k2})"
    return f"{c:.4g}"


def factor_words(c: float) -> str:
    """``0.3536 (= 1/sqrt(8))``: a factor, and its simple form when it has one."""
    nice = _nice(c)
    return f"{c:.4g}" + ("" if nice == f"{c:.4g}" else f" (= {nice})")


def _idx(t: Tensor) -> tuple:
    return tuple(int(i) for i in t.nonzero()[0])


def _triangle(m: Tensor) -> Optional[Tuple[str, int]]:
    """``("tril", k)`` or ``("triu", k)`` when the 2-D bool ``m`` is ones(L, S).tril(k)/.triu(k)."""
    L, S = m.shape
    ones = torch.ones(L, S, dtype=torch.bool)
    for k in range(-L, S + 1):
        for name in ("tril", "triu"):
            if torch.equal(m, getattr(ones, name)(k)):
                return name, k
    return None


def _triangles(got: Tensor, want: Tensor) -> Optional[Finding]:
    if got.dim() != 2:
        return None
    g, w = _triangle(got), _triangle(want)
    if g is None or w is None:
        return None
    if g[0] == "triu":
        return (f"the mask is upper-triangular (True above the diagonal, torch.triu({g[1]})): "
                f"True marks the future keys", f"{_MASK_HINT}: query i sees keys up to its own "
                f"position, a lower triangle, torch.ones(L, S).tril({w[1]})")
    return (f"the diagonal is shifted: the mask is torch.ones(L, S).tril({g[1]}), expected "
            f"tril({w[1]}) (query i sees keys 0 .. i + {w[1]})",
            "count which key each query may see last: with L != S the diagonal's offset "
            "depends on how the mask is aligned")


def describe_bool(got: Tensor, want: Tensor) -> Finding:
    """What is wrong with a bool mask of the right shape (``got`` differs from ``want``)."""
    if torch.equal(got, ~want):
        return "the mask is inverted: True exactly where the reference is False", _MASK_HINT
    if got.dim() >= 2 and got.shape[-1] == got.shape[-2] and torch.equal(got, want.mT):
        return ("the mask is transposed (rows and columns swapped): True above the diagonal "
                "where the reference is True below it", f"{_MASK_HINT}: row i is query i, "
                "column j key j; use tril, not triu")
    for dims, words in (((-1,), "left to right"), ((-2,), "top to bottom"),
                        ((-2, -1), "both ways")):
        if got.dim() >= len(dims) and torch.equal(got, want.flip(dims)):
            return f"the mask is the reference flipped {words}", ("row i is query i and column "
                                                                  "j key j: no flip is needed")
    found = _triangles(got, want)
    if found:
        return found
    extra, missing = got & ~want, ~got & want
    parts = []
    if bool(extra.any()):
        parts.append(f"{int(extra.sum())} position(s) True where the reference is False "
                     f"(first at {_idx(extra)})")
    if bool(missing.any()):
        parts.append(f"{int(missing.sum())} position(s) False where the reference is True "
                     f"(first at {_idx(missing)})")
    return "; ".join(parts), ("print your mask on this small input and read it row by row: row i "
                              "is query i, column j key j, True where query i may attend to key j; "
                              "the first position named above is one your rule gets wrong")


def shape_finding(got: Tensor, want: Tensor, rtol: float, atol: float) -> str:
    """Why the shapes differ, in words: an axis of size 1 too many or too few, or which axes."""
    gs, ws = tuple(got.shape), tuple(want.shape)
    if tuple(d for d in gs if d != 1) == tuple(d for d in ws if d != 1):
        extra = len(gs) > len(ws)
        right = close(got.reshape(ws), want, rtol, atol)
        return (f": {'an extra' if extra else 'a missing'} axis of size 1"
                + (" (the values are right)" if right else "")
                + (": squeeze it away (or drop keepdim=True / an unsqueeze)" if extra else
                   ": keep it (keepdim=True, or unsqueeze where the axis belongs)"))
    if len(gs) == len(ws):
        diff = [i for i, (g, w) in enumerate(zip(gs, ws)) if g != w]
        if len(diff) == 2 and (gs[diff[0]], gs[diff[1]]) == (ws[diff[1]], ws[diff[0]]):
            i, j = diff
            return (f": the sizes of axes {i} and {j} are swapped ({gs[i]} and {gs[j]}, "
                    f"expected {ws[i]} and {ws[j]}): a reshape or view with its sizes in the "
                    f"wrong order, or a transpose of the wrong axes")
        return ": " + "; ".join(f"axis {i} is {gs[i]} (expected {ws[i]})" for i in diff)
    return f": {len(gs)} axes instead of {len(ws)}" + _merged(gs, ws)


def _merged(gs: tuple, ws: tuple) -> str:
    """``"; axes 2 and 3 ... should be one"``: when one shape is the other with some
    neighbouring axes joined (a reshape or flatten that joins too few or too many)."""
    short, long_, joined = (gs, ws, False) if len(gs) < len(ws) else (ws, gs, True)
    k = len(long_) - len(short)
    for i in range(len(short)):
        group = long_[i:i + k + 1]
        n = 1
        for d in group:
            n *= d
        if long_[:i] + (n,) + long_[i + k + 1:] == short:
            axes = ", ".join(str(a) for a in range(i, i + k + 1))
            sizes = ", ".join(str(d) for d in group)
            if joined:  # the student's result has the extra axes
                return (f"; axes {axes} (sizes {sizes}) should be one axis of size {n}: "
                        f"join them (reshape or flatten)")
            return (f"; axis {i} (size {n}) should be {k + 1} axes of sizes ({sizes}): "
                    f"the reshape or flatten joined too many")
    return ""


def reordered(got: Tensor, want: Tensor, rtol: float, atol: float) -> Optional[Finding]:
    """The reference's values, every one of them, in other places."""
    if want.numel() < 4 or bool((want == want.flatten()[0]).all()):
        return None
    if not close(got.flatten().sort().values, want.flatten().sort().values, rtol, atol):
        return None
    return ("the right values in the wrong places (the result holds exactly the reference's "
            "values, in another order)", "look at the order of the axes in your reshape, "
            "view, stack, expand or cat: the axes that are merged must sit next to each other "
            "in the order the result lays them out")


def _is_weights(t: Tensor) -> bool:
    """Non-negative rows (the last axis) summing to one."""
    if t.dim() < 1 or t.shape[-1] < 2 or bool((t < 0).any()):
        return False
    return close(t.sum(-1), torch.ones_like(t[..., 0]), 0.0, 1e-3)


def other_scores(got: Tensor, want: Tensor, rtol: float, atol: float) -> Optional[Finding]:
    """Weights whose rows sum to one but that are the softmax of other scores."""
    if not (_is_weights(want) and _is_weights(got)):
        return None
    live = (want > 0) & (got > 0)
    if not bool(live.all(-1).any()):
        return None
    rows = live.all(-1)
    lg, lw = got[rows].log(), want[rows].log()
    lg, lw = lg - lg.mean(-1, keepdim=True), lw - lw.mean(-1, keepdim=True)
    denom = float((lw * lw).sum())
    c = float((lg * lw).sum()) / denom if denom > 0 else 0.0
    if c > 0 and abs(c - 1) > 1e-3 and close(lg, c * lw, max(rtol, 1e-3), max(atol, 1e-3)):
        said = factor_words(c)
        return (f"each row sums to one, but the weights are those of the reference's scores "
                f"multiplied by {said} before the softmax",
                "the scores are scaled wrongly: look at the temperature or scale (divide by "
                "it, once) and at 1/sqrt(E)")
    return ("each row sums to one (the softmax itself is fine) but the weights differ: the "
            "scores that go into the softmax are wrong",
            "print the scores before the softmax and compare them with the formula")


def columns(got: Tensor, want: Tensor, rtol: float, atol: float) -> Optional[Finding]:
    """Some columns (indices of the last axis) right and others not."""
    n = want.shape[-1] if want.dim() >= 2 else 0  # a 1-D result's "columns" are its values
    if n < 2:
        return None
    right = [i for i in range(n) if close(got[..., i], want[..., i], rtol, atol)]
    if not right:
        return None
    wrong = [i for i in range(n) if i not in right]
    shown = ", ".join(str(i) for i in wrong[:4]) + (", ..." if len(wrong) > 4 else "")
    return (f"right in columns {', '.join(str(i) for i in right[:4])}"
            f"{', ...' if len(right) > 4 else ''} of the last axis but not in columns {shown}",
            "look for what treats those positions of the last axis differently: the even and "
            "odd dims, one half of the features, a slice that stops early")
