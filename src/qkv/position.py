"""Position for attention (chapter 7): sinusoidal encodings, rotary embeddings and ALiBi.

Attention on its own is permutation equivariant: shuffle the tokens and the outputs are
shuffled the same way. Three published ways to give it position, as the papers define them:

- :func:`sinusoidal_encoding` (Vaswani et al., 2017): a fixed ``(L, E)`` table *added* to the
  token vectors; ``sin`` at the even dims ``2i``, ``cos`` at the odd dims ``2i + 1``, both at
  the angular frequency ``base ** (-2i / E)``.
- :func:`apply_rope` (Su et al., 2021, RoFormer): rotate the queries and the keys (never the
  values) pair of dims by pair of dims, by the angle ``position * base ** (-2i / E)``. The course
  pairs dims ``(2i, 2i + 1)`` as the paper does; ``pairing="half"`` pairs ``(i, i + E/2)`` as
  many language-model codebases do (Hugging Face's Llama, GPT-NeoX). The two differ by a fixed
  permutation of the dims, so weights trained with one need the other's permutation.
- :func:`alibi_bias` (Press et al., 2022, ALiBi): no change to the vectors at all; a float
  bias ``-m_h * |i - j|`` per head, added to the scores, usable as the ``attn_mask`` of
  :func:`qkv.scaled_dot_product_attention` and of PyTorch's SDPA.

Positions count from 0, and the first query and the first key share position 0 (the top-left
alignment of ``is_causal``). Angles are computed in float32 at least: in half precision a
position times a frequency would lose whole digits.
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence

import torch
from torch import Tensor

from . import _validate as v

__all__ = [
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "sinusoidal_encoding",
]

_PAIRS = "pairs of dims"


def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype angles are computed in: the input's, but never below float32."""
    return torch.promote_types(dtype, torch.float32)


def _angles(positions: Tensor, E: int, base: float) -> Tensor:
    """``positions[:, None] * base ** (-2i / E)`` for the pairs ``i = 0 .. E/2 - 1``: ``(L, E/2)``."""
    two_i = torch.arange(0, E, 2, device=positions.device, dtype=positions.dtype)
    return positions[:, None] * base ** (-two_i / E)


def _sizes(E: object, base: object) -> int:
    E = v.require_even("E", v.require_int("E", E), _PAIRS + " share a frequency")
    _check_base(base)
    return E


def _check_base(base: object) -> None:
    v.require_positive_number("base", base)
    if not math.isfinite(base):
        raise ValueError(f"base must be a finite positive number (10000.0 in the papers), got {base!r}")


def _require_fits(what: str, shapes: Sequence[Sequence[int]], dtype: torch.dtype,
                  device: Optional[torch.device]) -> None:
    """Refuse, before allocating, any of the tables ``shapes`` that could never fit."""
    for shape in shapes:
        v.require_fits(what, shape, dtype, device or torch.device("cpu"),
                       hint="check the sizes: a position table holds every position")


def sinusoidal_encoding(
    L: int,
    E: int,
    base: float = 10000.0,
    device: Optional[torch.device] = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """The sinusoidal position table of Vaswani et al. (2017), to add to the token vectors.

    Row ``p`` holds ``sin(p * w_i)`` at dim ``2i`` and ``cos(p * w_i)`` at dim ``2i + 1``, with
    ``w_i = base ** (-2i / E)``: pair ``i`` turns through a circle as the position grows, fast
    for the first pairs and slowly for the last.

    Args:
        L: number of positions (0 .. L - 1).
        E: width of the table (even).
        base: the frequency base (10000 in the paper).
        device: where to create the table.
        dtype: floating dtype of the table.

    Returns:
        The table; add it to token vectors of width ``E``.

    Shape:
        - output: ``(L, E)``
    """
    L = v.require_int("L", L, minimum=0)
    E = _sizes(E, base)
    device = v.require_device("device", device)
    v.require_float_dtype("dtype", dtype)
    _require_fits(f"the sinusoidal table (L, E) for L={L}, E={E}", [(L, E), (E,), (L,)], _work_dtype(dtype), device)
    positions = torch.arange(L, device=device, dtype=_work_dtype(dtype))
    angles = _angles(positions, E, base)
    # Stacked on a new last dim and flattened: sin, cos, sin, cos, ... (pair i at 2i, 2i + 1).
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2).to(dtype)


def apply_rope(x: Tensor, offset: int = 0, base: float = 10000.0, pairing: str = "interleaved") -> Tensor:
    """Rotary position embedding (RoPE, Su et al. 2021): rotate each pair of dims by its angle.

    The vector at row ``l`` (position ``p = offset + l``) has each pair ``(x_a, x_b)`` turned by
    ``p * base ** (-2i / E)``: ``(x_a cos - x_b sin, x_a sin + x_b cos)``. Apply it to queries
    and keys, not values: then ``rope(q, m) . rope(k, n)`` depends on ``m - n`` only.

    Args:
        x: queries or keys, sequence on dim -2.
        offset: position of the first row (a KV cache's length, when decoding).
        base: the frequency base (10000 in the paper).
        pairing: ``"interleaved"``: pair ``i`` is dims ``(2i, 2i + 1)`` (the paper's, the
            course's); ``"half"``: dims ``(i, i + E/2)``.

    Returns:
        The rotated tensor, same dtype.

    Shape:
        - x: ``(..., L, E)``, ``E`` even, e.g. ``(B, H, L, E)``
        - output: same as ``x``
    """
    v.require_float_tensor("x", x, "(..., L, E)", min_dim=2)
    L, E = x.shape[-2], x.shape[-1]
    if E == 0 or E % 2:
        raise ValueError(f"E must be even and positive ({_PAIRS} are rotated together): x must have "
                         f"shape (..., L, E), got {v.shape_str(x)}")
    _check_base(base)
    offset = v.require_int("offset", offset, minimum=0)
    v.require_choice("pairing", pairing, ("interleaved", "half"))
    work = _work_dtype(x.dtype)
    angles = _angles(torch.arange(offset, offset + L, device=x.device, dtype=work), E, base)
    cos, sin = angles.cos(), angles.sin()  # (L, E/2), broadcast over the batch dims
    xw = x.to(work)
    if pairing == "interleaved":
        a, b = xw[..., 0::2], xw[..., 1::2]
    else:
        a, b = xw[..., : E // 2], xw[..., E // 2 :]
    ra, rb = a * cos - b * sin, a * sin + b * cos
    out = torch.stack((ra, rb), dim=-1).flatten(-2) if pairing == "interleaved" else torch.cat((ra, rb), -1)
    return out.to(x.dtype)


def _slopes(n: int) -> List[float]:
    """Press et al.'s slopes: ``2 ** (-8h / n)``, h = 1 .. n, for a power of two ``n``;
    otherwise those of the power of two below, then every other slope of the one above."""
    if n & (n - 1) == 0:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]
    below = 2 ** int(math.floor(math.log2(n)))
    return _slopes(below) + _slopes(2 * below)[0::2][: n - below]


def alibi_slopes(
    num_heads: int, device: Optional[torch.device] = None, dtype: torch.dtype = torch.float32
) -> Tensor:
    """ALiBi's slope ``m_h`` per head (Press et al., 2022): a geometric sequence.

    For 8 heads: ``1/2, 1/4, ..., 1/256``; in general ``2 ** (-8h / H)`` for a power of two
    ``H``, and the paper's interleaving for other head counts.

    Args:
        num_heads: number of heads ``H``.
        device, dtype: of the result.

    Returns:
        The slopes, in the paper's order (steepest first for a power of two).

    Shape:
        - output: ``(H,)``
    """
    v.require_int("num_heads", num_heads)
    device = v.require_device("device", device)
    v.require_float_dtype("dtype", dtype)
    # Python floats, as Python computes them (torch's pow differs in the last bit): a list of
    # up to 3 * num_heads of them while they are made, 32 bytes each, i.e. 12 float64s a head.
    _require_fits(f"the slopes of num_heads={num_heads} heads", [(num_heads, 12)], torch.float64, device)
    return torch.tensor(_slopes(num_heads), device=device, dtype=dtype)


def alibi_bias(
    num_heads: int,
    L: int,
    S: Optional[int] = None,
    device: Optional[torch.device] = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """ALiBi's bias (Press et al., 2022): ``-m_h * |i - j|`` for query ``i``, key ``j``, head ``h``.

    A float mask, added to the scores: pass it as ``attn_mask`` to
    :func:`qkv.scaled_dot_product_attention` or PyTorch's SDPA (it broadcasts over the batch).
    Under a causal mask it is the paper's bias; without one, the same penalty on both sides
    (as bidirectional models use it). To combine it with a bool mask, fill the bias with
    ``-inf`` where the mask is ``False``.

    Args:
        num_heads: number of heads ``H`` (see :func:`alibi_slopes`).
        L: number of queries.
        S: number of keys (default ``L``).
        device, dtype: of the result (use the query's dtype).

    Returns:
        The bias, 0 on the diagonal and more negative the farther the key.

    Shape:
        - output: ``(H, L, S)``
    """
    L = v.require_int("L", L, minimum=0)
    S = L if S is None else v.require_int("S", S, minimum=0)
    v.require_int("num_heads", num_heads)
    device = v.require_device("device", device)
    v.require_float_dtype("dtype", dtype)
    work = _work_dtype(dtype)
    _require_fits(f"the ALiBi bias (num_heads, L, S) for num_heads={num_heads}, L={L}, S={S}",
                  [(num_heads, L, S), (L, S), (L + S,)], work, device)
    slopes = alibi_slopes(num_heads, device=device, dtype=work)
    rows = torch.arange(L, device=device, dtype=work)[:, None]
    cols = torch.arange(S, device=device, dtype=work)[None, :]
    # -|i - j| as min(i - j, j - i): 0 on the diagonal is +0, not the -0 a negation prints.
    return (slopes[:, None, None] * torch.minimum(rows - cols, cols - rows)).to(dtype)
