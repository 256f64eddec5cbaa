"""Catalogues of student answers for the position checks (sinusoidal_encoding, apply_rope,
alibi_bias): wrong ones (each with the words its hint must contain) and right ones written
differently (each passes). Written as a student would, not through the checks' variants."""

import math

import torch


# ----------------------------------------------------------------------- sinusoidal_encoding
def _table(L, E, base, device, dtype, *, swap=False, halves=False, two=2.0, start=0, inverted=False,
           per_dim=False):
    pos = torch.arange(start, start + L, device=device, dtype=dtype)[:, None]
    if per_dim:  # div_term for every dim, then the even and odd dims each take their own
        div = base ** (torch.arange(E, device=device, dtype=dtype) / E)
        pe = torch.zeros(L, E, device=device, dtype=dtype)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos / div[0::2]), torch.cos(pos / div[1::2])
        return pe
    exponent = two * torch.arange(E // 2, device=device, dtype=dtype) / E
    angles = pos * base ** exponent if inverted else pos / base ** exponent
    first, second = (torch.cos(angles), torch.sin(angles)) if swap else (torch.sin(angles), torch.cos(angles))
    if halves:
        return torch.cat([first, second], dim=-1)
    pe = torch.zeros(L, E, device=device, dtype=dtype)
    pe[:, 0::2], pe[:, 1::2] = first, second
    return pe


def sinusoid_ok(L, E, base=10000.0, device=None, dtype=torch.float32):
    return _table(L, E, base, device, dtype)


def sinusoid_exp_log(L, E, base=10000.0, device=None, dtype=torch.float32):
    # The Annotated Transformer's form: exp(2i * -(log(base) / E)), computed in float32.
    position = torch.arange(0, L, device=device).unsqueeze(1).float()
    div_term = torch.exp(torch.arange(0, E, 2, device=device).float() * -(math.log(base) / E))
    pe = torch.zeros(L, E, device=device, dtype=dtype)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def sinusoid_loops(L, E, base=10000.0, device=None, dtype=torch.float32):
    rows = [[math.sin(p / base ** (d / E)) if d % 2 == 0 else math.cos(p / base ** ((d - 1) / E))
             for d in range(E)] for p in range(L)]
    return torch.tensor(rows, device=device, dtype=dtype)


def sinusoid_swapped(L, E, base=10000.0, device=None, dtype=torch.float32):
    return _table(L, E, base, device, dtype, swap=True)


def sinusoid_halves(L, E, base=10000.0, device=None, dtype=torch.float32):
    return _table(L, E, base, device, dtype, halves=True)


def sinusoid_exponent_i(L, E, base=10000.0, device=None, dtype=torch.float32):
    return _table(L, E, base, device, dtype, two=1.0)


def sinusoid_per_dim(L, E, base=10000.0, device=None, dtype=torch.float32):
    return _table(L, E, base, device, dtype, per_dim=True)


def sinusoid_inverted(L, E, base=10000.0, device=None, dtype=torch.float32):
    return _table(L, E, base, device, dtype, inverted=True)


def sinusoid_fixed_base(L, E, base=10000.0, device=None, dtype=torch.float32):
    return _table(L, E, 10000.0, device, dtype)


def sinusoid_from_one(L, E, base=10000.0, device=None, dtype=torch.float32):
    return _table(L, E, base, device, dtype, start=1)


def sinusoid_no_device(L, E, base=10000.0, device=None, dtype=torch.float32):
    return _table(L, E, base, None, dtype)


def sinusoid_doubled(L, E, base=10000.0, device=None, dtype=torch.float32):
    return _table(L, E, base, device, dtype, two=4.0)  # arange(0, E, 2), times 2 again


SINUSOID_WRONG = {
    "exponent 4i/E (arange(0, E, 2) doubled)": (sinusoid_doubled, "the 2 counted twice"),
    "sin and cos swapped": (sinusoid_swapped, "sin and cos swapped"),
    "two halves": (sinusoid_halves, "two halves"),
    "exponent i/E": (sinusoid_exponent_i, "exponent i/E"),
    "a frequency per dim": (sinusoid_per_dim, "a frequency per dim"),
    "frequency inverted": (sinusoid_inverted, "frequency inverted"),
    "base ignored": (sinusoid_fixed_base, "base ignored"),
    "positions from 1": (sinusoid_from_one, "counted from 1"),
}
SINUSOID_RIGHT = {"pe[:, 0::2] = sin": sinusoid_ok, "exp and log (float32 angles)": sinusoid_exp_log,
                  "Python loops": sinusoid_loops}


# ---------------------------------------------------------------------------------- apply_rope
def _rope(x, offset, base, *, half=False, sign=1.0, two=2.0, start=0, sequential=False):
    L, E = x.shape[-2], x.shape[-1]
    pos = torch.arange(start + offset, start + offset + L, device=x.device, dtype=x.dtype)
    theta = base ** (-two * torch.arange(E // 2, device=x.device, dtype=x.dtype) / E)
    angles = pos[:, None] * theta
    cos, sin = torch.cos(angles), sign * torch.sin(angles)
    if half:  # Hugging Face's rotate_half convention
        cos, sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
        rotated = torch.cat([-x[..., E // 2:], x[..., : E // 2]], -1)
        return x * cos + rotated * sin
    out = torch.empty_like(x)
    a, b = x[..., 0::2], x[..., 1::2]
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = (out[..., 0::2] if sequential else a) * sin + b * cos
    return out


def rope_ok(x, offset=0, base=10000.0):
    return _rope(x, offset, base)


def rope_sequential(x, offset=0, base=10000.0):  # reads the even dims already rotated
    return _rope(x, offset, base, sequential=True)


def rope_complex(x, offset=0, base=10000.0):
    # As in Meta's Llama code: pairs as complex numbers, times e^{i p theta}.
    L, E = x.shape[-2], x.shape[-1]
    theta = 1.0 / (base ** (torch.arange(0, E, 2, device=x.device).double() / E))
    angles = torch.outer(torch.arange(offset, offset + L, device=x.device).double(), theta)
    turn = torch.polar(torch.ones_like(angles), angles)
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], E // 2, 2).contiguous())
    return torch.view_as_real(pairs * turn).flatten(-2).to(x.dtype)


def rope_matrix(x, offset=0, base=10000.0):
    # One 2x2 rotation matrix per position and pair.
    L, E = x.shape[-2], x.shape[-1]
    angles = torch.arange(offset, offset + L, device=x.device, dtype=x.dtype)[:, None] \
        * base ** (-torch.arange(0, E, 2, device=x.device, dtype=x.dtype) / E)
    c, s = angles.cos(), angles.sin()
    R = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (L, E/2, 2, 2)
    pairs = x.unflatten(-1, (E // 2, 2))
    return (R @ pairs.unsqueeze(-1)).squeeze(-1).flatten(-2)


def rope_half(x, offset=0, base=10000.0):
    return _rope(x, offset, base, half=True)


def rope_wrong_way(x, offset=0, base=10000.0):
    return _rope(x, offset, base, sign=-1.0)


def rope_exponent_i(x, offset=0, base=10000.0):
    return _rope(x, offset, base, two=1.0)


def rope_fixed_base(x, offset=0, base=10000.0):
    return _rope(x, offset, 10000.0)


def rope_no_offset(x, offset=0, base=10000.0):
    return _rope(x, 0, base)


def rope_from_one(x, offset=0, base=10000.0):
    return _rope(x, offset, base, start=1)


def rope_in_place(x, offset=0, base=10000.0):
    out = _rope(x, offset, base)
    x.copy_(out)
    return x


def rope_doubled(x, offset=0, base=10000.0):
    L, E = x.shape[-2], x.shape[-1]
    i = torch.arange(0, E, 2, device=x.device, dtype=x.dtype)  # already 2i: doubled below
    angles = torch.arange(offset, offset + L, device=x.device, dtype=x.dtype)[:, None] * \
        base ** (-2 * i / E)
    out = torch.empty_like(x)
    a, b = x[..., 0::2], x[..., 1::2]
    out[..., 0::2], out[..., 1::2] = a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()
    return out


def rope_offset_subtracted(x, offset=0, base=10000.0):
    return _rope(x, -offset, base)


ROPE_WRONG = {
    "exponent 4i/E (arange(0, E, 2) doubled)": (rope_doubled, "the 2 counted twice"),
    "offset subtracted": (rope_offset_subtracted, "offset subtracted"),
    "half-split pairing": (rope_half, "(i, i + E/2)"),
    "rotated the wrong way": (rope_wrong_way, "wrong way"),
    "exponent i/E": (rope_exponent_i, "exponent i/E"),
    "base ignored": (rope_fixed_base, "base ignored"),
    "offset ignored": (rope_no_offset, "offset ignored"),
    "positions off by one": (rope_from_one, "off by one"),
    "x changed in place": (rope_in_place, "in place"),
    "the odd dims from the even ones already rotated": (rope_sequential, "rotated in place"),
}
ROPE_RIGHT = {"slices 0::2 and 1::2": rope_ok, "complex numbers": rope_complex,
              "2x2 rotation matrices": rope_matrix}


# ---------------------------------------------------------------------------------- alibi_bias
def _paper_slopes(n):
    if math.log2(n).is_integer():
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))  # the paper's code: 2^(-8/n)
        return [start * start ** i for i in range(n)]
    closest = 2 ** math.floor(math.log2(n))
    return _paper_slopes(closest) + _paper_slopes(2 * closest)[0::2][: n - closest]


def _bias(slopes, L, S, device, dtype, *, sign=-1.0, signed=False, clamped=False):
    S = L if S is None else S
    m = torch.tensor(slopes, device=device, dtype=dtype)
    d = torch.arange(L, device=device)[:, None] - torch.arange(S, device=device)[None, :]
    d = d if signed else d.clamp(min=0) if clamped else d.abs()
    return sign * m[:, None, None] * d.to(dtype)


def alibi_ok(num_heads, L, S=None, device=None, dtype=torch.float32):
    return _bias(_paper_slopes(num_heads), L, S, device, dtype)


def alibi_clamped(num_heads, L, S=None, device=None, dtype=torch.float32):
    return _bias(_paper_slopes(num_heads), L, S, device, dtype, clamped=True)


def alibi_loops(num_heads, L, S=None, device=None, dtype=torch.float32):
    S = L if S is None else S
    slopes = _paper_slopes(num_heads)
    rows = [[[-slopes[h] * abs(i - j) for j in range(S)] for i in range(L)] for h in range(num_heads)]
    return torch.tensor(rows, device=device, dtype=dtype).reshape(num_heads, L, S)


def alibi_plus(num_heads, L, S=None, device=None, dtype=torch.float32):
    return _bias(_paper_slopes(num_heads), L, S, device, dtype, sign=1.0)


def alibi_signed(num_heads, L, S=None, device=None, dtype=torch.float32):
    return _bias(_paper_slopes(num_heads), L, S, device, dtype, signed=True)


def alibi_from0(num_heads, L, S=None, device=None, dtype=torch.float32):
    return _bias([2 ** (-8 * h / num_heads) for h in range(num_heads)], L, S, device, dtype)


def alibi_halves(num_heads, L, S=None, device=None, dtype=torch.float32):
    return _bias([0.5 ** (h + 1) for h in range(num_heads)], L, S, device, dtype)


def alibi_pow2_only(num_heads, L, S=None, device=None, dtype=torch.float32):
    return _bias([2 ** (-8 * (h + 1) / num_heads) for h in range(num_heads)], L, S, device, dtype)


def alibi_reversed(num_heads, L, S=None, device=None, dtype=torch.float32):
    return _bias(_paper_slopes(num_heads)[::-1], L, S, device, dtype)


def alibi_square(num_heads, L, S=None, device=None, dtype=torch.float32):
    return _bias(_paper_slopes(num_heads), L, None, device, dtype)


def alibi_bottom_right(num_heads, L, S=None, device=None, dtype=torch.float32):
    S = L if S is None else S
    m = torch.tensor(_paper_slopes(num_heads), device=device, dtype=dtype)
    i = torch.arange(S - L, S, device=device)[:, None]  # the queries as the last L positions
    return -m[:, None, None] * (i - torch.arange(S, device=device)[None, :]).abs().to(dtype)


def alibi_bloom(num_heads, L, S=None, device=None, dtype=torch.float32):
    S = L if S is None else S
    m = torch.tensor(_paper_slopes(num_heads), device=device, dtype=dtype)
    return (m[:, None, None] * torch.arange(S, device=device, dtype=dtype)).expand(-1, L, -1)


def alibi_float32_always(num_heads, L, S=None, device=None, dtype=torch.float32):
    return _bias(_paper_slopes(num_heads), L, S, device, torch.float32)


ALIBI_WRONG = {
    "sign flipped": (alibi_plus, "sign flipped"),
    "no abs": (alibi_signed, "without abs"),
    "distance clamped at 0": (alibi_clamped, "clamped at 0"),
    "slopes from h=0": (alibi_from0, "off by one head"),
    "slopes 1/2^h": (alibi_halves, "right for 8 heads only"),
    "power-of-two formula for 6 heads": (alibi_pow2_only, "not a power of two"),
    "slopes reversed": (alibi_reversed, "reverse order"),
    "S ignored": (alibi_square, "S ignored"),
    "dtype ignored": (alibi_float32_always, "dtype"),
    "queries aligned to the last keys": (alibi_bottom_right, "aligned to the last keys"),
    "BLOOM's m * j": (alibi_bloom, "BLOOM's code"),
}
ALIBI_RIGHT = {"the paper's slope code": alibi_ok, "Python loops": alibi_loops}


# ----------------------------------------------------------------------------- found by trying
# Mistakes a student made while trying the exercises (issue 13, item 5).
def sinusoid_doubled_cos(L, E, base=10000.0, device=None, dtype=torch.float32):
    positions = torch.arange(L, device=device, dtype=dtype)[:, None]
    omega = base ** (-torch.arange(0, E, 2, device=device, dtype=dtype) / E)
    pe = torch.zeros(L, E, device=device, dtype=dtype)
    pe[:, 0::2] = torch.sin(positions * omega)
    pe[:, 1::2] = 2 * torch.cos(positions * omega)
    return pe


def sinusoid_batched(L, E, base=10000.0, device=None, dtype=torch.float32):
    positions = torch.arange(L, device=device, dtype=dtype)[:, None]
    omega = base ** (-torch.arange(0, E, 2, device=device, dtype=dtype) / E)
    pe = torch.zeros(L, E, device=device, dtype=dtype)
    pe[:, 0::2] = torch.sin(positions * omega)
    pe[:, 1::2] = torch.cos(positions * omega)
    return pe.unsqueeze(0)


def alibi_linear_slopes(num_heads, L, S=None, device=None, dtype=torch.float32):
    S = L if S is None else S
    m = torch.tensor([h / num_heads for h in range(1, num_heads + 1)], device=device, dtype=dtype)
    d = (torch.arange(L, device=device)[:, None] - torch.arange(S, device=device)[None, :]).abs()
    return -m[:, None, None] * d.to(dtype)


SINUSOID_WRONG.update({
    "cosines doubled": (sinusoid_doubled_cos, "right in columns 0, 2, 4, 6"),
    "a batch axis added": (sinusoid_batched, "an extra axis of size 1"),
})
ALIBI_WRONG["slopes h / H"] = (alibi_linear_slopes, "right for H = ")
