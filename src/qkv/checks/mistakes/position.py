"""The wrong versions of the position exercises, for :mod:`.position`'s mistakes.

Each variant computes what a student who made one mistake would return; with its default
switches it gives the right answer (it runs only after the student's code has returned).
Angles are computed in float64 and cast, so that a variant differs from the reference only
by its mistake.
"""

from __future__ import annotations

import math

import torch


def _frequencies(E, base, exponent, device):
    """``base ** (-exponent * i / E)`` for the pairs i = 0 .. E/2 - 1 (exponent 2 is right);
    ``exponent="dim"`` gives each dim its own frequency, ``base ** (-d / E)``, d = 0 .. E - 1."""
    if exponent == "dim":
        return base ** (-torch.arange(E, dtype=torch.float64, device=device) / E)
    return base ** (-exponent * torch.arange(E // 2, dtype=torch.float64, device=device) / E)


def sinusoid_variant(L, E, base=10000.0, device=None, dtype=torch.float32, *, swap=False,
                     halves=False, exponent=2, fixed_base=False, start=0, inverted=False):
    """The sinusoidal table with switches for its mistakes (the defaults: the right answer)."""
    base = 10000.0 if fixed_base else base
    pos = torch.arange(start, start + L, dtype=torch.float64, device=device)[:, None]
    freq = _frequencies(E, base, exponent, device)
    freq = 1.0 / freq if inverted else freq
    if exponent == "dim":  # each dim at its own frequency, sin on the even dims, cos on the odd
        angles = pos * freq
        out = torch.empty(L, E, dtype=torch.float64, device=device)
        first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
        out[:, 0::2], out[:, 1::2] = first(angles[:, 0::2]), second(angles[:, 1::2])
        return out.to(dtype)
    angles = pos * freq
    first, second = (angles.cos(), angles.sin()) if swap else (angles.sin(), angles.cos())
    if halves:
        return torch.cat((first, second), dim=-1).to(dtype)
    return torch.stack((first, second), dim=-1).flatten(-2).to(dtype)


def rope_variant(x, offset=0, base=10000.0, *, half=False, sign=1, exponent=2, fixed_base=False,
                 start=0, ignore_offset=False, offset_sign=1, sequential=False):
    """RoPE with switches for its mistakes (the defaults: the right answer, pairs (2i, 2i + 1));
    ``sequential``: the second dim of a pair computed from the first one already rotated
    (``out[..., 1::2] = out[..., 0::2] * sin + b * cos`` after ``out[..., 0::2] = ...``)."""
    L, E = x.shape[-2], x.shape[-1]
    first = start + (0 if ignore_offset else offset_sign * offset)
    pos = torch.arange(first, first + L, dtype=torch.float64, device=x.device)[:, None]
    angles = pos * _frequencies(E, 10000.0 if fixed_base else base, exponent, x.device)
    cos, sin = angles.cos(), sign * angles.sin()
    xw = x.to(torch.float64)
    a, b = (xw[..., : E // 2], xw[..., E // 2:]) if half else (xw[..., 0::2], xw[..., 1::2])
    ra = a * cos - b * sin
    rb = (ra if sequential else a) * sin + b * cos
    out = torch.cat((ra, rb), -1) if half else torch.stack((ra, rb), -1).flatten(-2)
    return out.to(x.dtype)


def _slopes(n, kind):
    if kind == "pow2_formula":  # 2^(-8h/n) whether or not n is a power of two
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]
    if kind == "from0":
        return [2.0 ** (-8.0 * h / n) for h in range(n)]
    if kind == "halves":  # 1/2, 1/4, ...: the slopes of 8 heads, whatever the count
        return [2.0 ** -h for h in range(1, n + 1)]
    if n & (n - 1) == 0:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]
    below = 2 ** int(math.floor(math.log2(n)))
    return _slopes(below, kind) + _slopes(2 * below, kind)[0::2][: n - below]


def alibi_variant(num_heads, L, S=None, device=None, dtype=torch.float32, *, sign=-1,
                  slopes="paper", reverse=False, signed=False, square=False, bottom=False,
                  bloom=False, clamped=False):
    """ALiBi's bias with switches for its mistakes (the defaults: ``-m_h |i - j|``);
    ``bottom`` puts query ``i`` at position ``i + S - L`` (the queries as the last keys);
    ``bloom``, ``m_h * j`` for every query (BLOOM's code); ``clamped``: the distance
    ``(i - j).clamp(min=0)``, no penalty for the keys after the query."""
    S = L if S is None or square else S
    m = _slopes(num_heads, slopes)
    m = torch.tensor(m[::-1] if reverse else m, dtype=torch.float64, device=device)
    rows = torch.arange(L, dtype=torch.float64, device=device)[:, None] + (S - L) * bottom
    cols = torch.arange(S, dtype=torch.float64, device=device)[None, :]
    dist = rows - cols if signed else (rows - cols).abs()
    dist = (rows - cols).clamp(min=0) if clamped else dist
    if bloom:  # -m (i - j) without its -m i, which a causal softmax does not see
        dist = -cols.expand(L, S)
    return (sign * m[:, None, None] * dist).to(dtype)
