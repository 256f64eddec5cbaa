"""Position slips (assignment 7) that got only the "right for rows 0 but not ..." hint, which
points at fixed indices and broadcasting (wrong14 B7): each written as a student would; the
words are what the message must say."""

import math

import pytest
import torch

from qkv import apply_rope
from qkv import checks

from named import assert_named


def rope(sequential=False):
    def apply_rope_(x, offset=0, base=10000.0):
        L, E = x.shape[-2:]
        pos = torch.arange(offset, offset + L, dtype=torch.float64)[:, None]
        ang = pos * base ** (-torch.arange(0, E, 2, dtype=torch.float64) / E)
        c, s = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        out = x.clone()
        out[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s
        first = out[..., 0::2] if sequential else x[..., 0::2]
        out[..., 1::2] = first * s + x[..., 1::2] * c
        return out
    return apply_rope_


def partial_rope(pass_base=True):
    def apply_partial_rope(x, rotary_dim, offset=0, base=10000.0):
        kw = {"base": base} if pass_base else {}
        rotated = apply_rope(x[..., :rotary_dim], offset=offset, **kw)
        return torch.cat([rotated, x[..., rotary_dim:]], -1)
    return apply_partial_rope


def _slopes(n):
    if n & (n - 1) == 0:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]
    b = 2 ** int(math.log2(n))
    return _slopes(b) + _slopes(2 * b)[0::2][: n - b]


def alibi(clamp=False):
    def alibi_bias(num_heads, L, S=None, device=None, dtype=torch.float32):
        S = L if S is None else S
        m = torch.tensor(_slopes(num_heads), dtype=dtype, device=device)
        d = torch.arange(L, device=device)[:, None] - torch.arange(S, device=device)[None, :]
        d = d.clamp(min=0) if clamp else d.abs()
        return -m[:, None, None] * d.to(dtype)
    return alibi_bias


# name: (check, answer, words the message must hold)
NAMED = {
    "apply_rope: the pair rotated in place": ("check_apply_rope", rope(sequential=True),
                                              "the pair rotated in place"),
    "apply_partial_rope: base not passed on": ("check_apply_partial_rope", partial_rope(False),
                                               "base not passed on"),
    "alibi_bias: distance clamped at 0": ("check_alibi_bias", alibi(clamp=True),
                                          "the distance clamped at 0"),
}


@pytest.mark.parametrize("name", NAMED)
def test_the_slip_is_named(name):
    assert_named(*NAMED[name])


@pytest.mark.parametrize("check,answer", [("check_apply_rope", rope()),
                                          ("check_apply_partial_rope", partial_rope()),
                                          ("check_alibi_bias", alibi())])
def test_the_right_answers_written_so_pass(check, answer):
    getattr(checks, check)(answer)
