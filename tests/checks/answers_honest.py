"""Catalogue of honest answers: right code written the many ways students write it.

Issue 23 measured the old checks refusing several of these, some with an accusation. Each
entry here must pass its check, with no notice: decorators, dataclasses, classes, recursion,
einsum, loops (a slow one too), logging, warnings, NumPy round trips, ``.to(device)``, a
thread finished before returning, ``tqdm.auto``, a bool mask turned into a float bias.
"""

from __future__ import annotations

import functools
import logging
import math
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

import qkv

from answers_efficient import CHUNKED_RIGHT, KV_RIGHT
from answers_lookup import SOFT_RIGHT, SOFTMAX_RIGHT
from answers_masking import CAUSAL_RIGHT
from answers_multi_head import MHA_RIGHT, SPLIT_RIGHT
from answers_scaling import SDPA_RIGHT, VARIANCE_RIGHT

_log = logging.getLogger("student")


@dataclass
class Config:
    """A student's own settings object, printed while the answer runs."""

    name: str
    scale: float = 1.0


def _wrapping(f):
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        _log.debug("called %s", f.__name__)
        return f(*args, **kwargs)
    return wrapper


def _with_dataclass(f):
    def answer(*args, **kwargs):
        print(Config("my settings"))
        return f(*args, **kwargs)
    return answer


def _logging(f):
    def answer(*args, **kwargs):
        _log.warning("computing with %d inputs", len(args))
        return f(*args, **kwargs)
    return answer


def _warning(f):
    def answer(*args, **kwargs):
        warnings.warn("a note from the student's code", UserWarning)
        return f(*args, **kwargs)
    return answer


def _numpy_round_trip(f):
    def answer(*args, **kwargs):
        out = f(*args, **kwargs)
        via = out.detach().cpu().float().numpy()  # NumPy has no bfloat16: through float32
        return torch.from_numpy(via).to(device=out.device, dtype=out.dtype)
    return answer


def _to_device(f):
    def answer(*args, **kwargs):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        device = tensors[0].device if tensors else kwargs.get("device") or torch.device("cpu")
        args = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)
        out = f(*args, **kwargs)
        if isinstance(out, tuple):
            return tuple(o.to(device) if isinstance(o, torch.Tensor) else o for o in out)
        return out.to(device)
    return answer


def _thread(f):
    def answer(*args, **kwargs):
        with ThreadPoolExecutor(max_workers=2) as pool:  # finished before returning
            return pool.submit(f, *args, **kwargs).result()
    return answer


def _tqdm(f):
    def answer(*args, **kwargs):
        for _ in tqdm(range(2), disable=True):
            pass
        return f(*args, **kwargs)
    return answer


@functools.lru_cache(maxsize=None)
def _inverse_sqrt(n: int) -> float:
    return 1.0 / math.sqrt(n)


class _AsClass:
    """The answer as a callable object of the student's own class."""

    def __init__(self, f):
        self.f = f

    def __call__(self, *args, **kwargs):
        return self.f(*args, **kwargs)


WRAPPERS = {
    "@torch.no_grad()": lambda f: torch.no_grad()(f),
    "@torch.inference_mode()": lambda f: torch.inference_mode()(f),
    "functools.wraps": _wrapping,
    "prints a dataclass": _with_dataclass,
    "logging": _logging,
    "warnings.warn": _warning,
    "NumPy round trip": _numpy_round_trip,
    ".to(device)": _to_device,
    "a thread finished before returning": _thread,
    "tqdm.auto": _tqdm,
    "a callable object": _AsClass,
}

# The checks each wrapper is tried on, with a right answer of each.
BASES = {
    "check_softmax": next(iter(SOFTMAX_RIGHT.values())),
    "check_soft_lookup": SOFT_RIGHT["einsum and torch.softmax"],
    "check_scaled_dot_product_attention": SDPA_RIGHT["einsum"],
    "check_chunked_attention": CHUNKED_RIGHT["online softmax"],
    "check_kv_cache_step": KV_RIGHT["softmax by hand"],
    "check_split_heads": next(iter(SPLIT_RIGHT.values())),
    "check_causal_mask": next(iter(CAUSAL_RIGHT.values())),
}
# A wrapper that reads a tensor result (the NumPy round trip) is for functions returning one.
ONE_TENSOR = {"check_softmax", "check_scaled_dot_product_attention", "check_chunked_attention",
              "check_split_heads", "check_causal_mask"}


# ----------------------------------------------------------------------------- written otherwise


def softmax_recursive(x, dim=-1):
    """Recursion over the leading axes, down to 1-D rows."""
    dim = dim % x.dim()
    if dim != x.dim() - 1:
        return softmax_recursive(x.movedim(dim, -1), -1).movedim(-1, dim)
    if x.dim() > 1:
        return torch.stack([softmax_recursive(row, -1) for row in x])
    m = x.max()
    e = (x - m).exp() if torch.isfinite(m) else torch.zeros_like(x)
    return e / e.sum()


def softmax_summed_in_a_random_order(x, dim=-1):
    """The row sums taken over the terms in a torch.randperm order: any order gives the same
    sum but for rounding (honest12: told 'dropout left on')."""
    x = x.movedim(dim, -1)
    e = (x - x.amax(-1, keepdim=True)).exp()
    order = torch.randperm(x.shape[-1])
    return (e / e[..., order].sum(-1, keepdim=True)).movedim(-1, dim)


def attention_scores_cached_scale(query, key, scale=None):
    """The scale from an lru_cache'd helper."""
    s = _inverse_sqrt(query.shape[-1]) if scale is None else scale
    return torch.einsum("...le,...se->...ls", query, key) * s


def chunked_with_a_mask_of_its_own(query, key, value, attn_mask=None, is_causal=False,
                                   scale=None, chunk_size=256):
    """An all-True mask made when none is given, turned into a float bias: no scores whole."""
    L, S = query.shape[-2], key.shape[-2]
    mask = torch.ones(L, S, dtype=torch.bool, device=query.device) if attn_mask is None \
        else attn_mask
    if is_causal:
        mask = mask & torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    bias = torch.zeros_like(mask, dtype=query.dtype).masked_fill(~mask, float("-inf")) \
        if mask.dtype == torch.bool else mask
    c = scale if scale is not None else 1 / math.sqrt(query.shape[-1])
    m = torch.full(query.shape[:-1] + (1,), float("-inf"), dtype=query.dtype, device=query.device)
    total = torch.zeros_like(m)
    acc = torch.zeros(*query.shape[:-1], value.shape[-1], dtype=query.dtype, device=query.device)
    for j in range(0, S, chunk_size):
        s = query @ key[..., j:j + chunk_size, :].transpose(-2, -1) * c + bias[..., j:j + chunk_size]
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        p, r = (s - safe).exp(), (m - safe).exp()
        total, acc, m = total * r + p.sum(-1, keepdim=True), acc * r + p @ value[..., j:j + chunk_size, :], m_new
    return torch.where(total > 0, acc / total, torch.zeros_like(acc))


def chunked_with_float_bias(query, key, value, attn_mask=None, is_causal=False, scale=None,
                            chunk_size=256):
    """A bool mask turned into a float bias first (0 where allowed, -inf elsewhere)."""
    L, S = query.shape[-2], key.shape[-2]
    bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
    if is_causal:
        allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        bias = bias.masked_fill(~allowed, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            bias = bias + torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill(
                ~attn_mask, float("-inf"))
        else:
            bias = bias + attn_mask
    s = scale if scale is not None else 1 / math.sqrt(query.shape[-1])
    m = torch.full(query.shape[:-1] + (1,), float("-inf"), dtype=query.dtype,
                   device=query.device)
    denom = torch.zeros_like(m)
    acc = torch.zeros(query.shape[:-1] + (value.shape[-1],), dtype=query.dtype,
                      device=query.device)
    for j in range(0, S, chunk_size):
        scores = query @ key[..., j:j + chunk_size, :].transpose(-2, -1) * s
        scores = scores + bias[..., j:j + chunk_size]
        m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
        safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        p = (scores - safe).exp()
        correction = (m - safe).exp()
        denom = denom * correction + p.sum(-1, keepdim=True)
        acc = acc * correction + p @ value[..., j:j + chunk_size, :]
        m = m_new
    return torch.where(denom > 0, acc / denom.clamp_min(torch.finfo(acc.dtype).tiny),
                       torch.zeros_like(acc))


def variance_per_sample_loop(d_k, n_samples, generator):
    """An honest, slow loop: one dot product per sample."""
    q = torch.randn(n_samples, d_k, generator=generator, device=generator.device)
    k = torch.randn(n_samples, d_k, generator=generator, device=generator.device)
    dots = torch.empty(n_samples, device=generator.device)
    for i in range(n_samples):
        dots[i] = q[i] @ k[i]
    return dots.var().item()


def kv_mask_without_device(query, key, value, k_cache=None, v_cache=None, scale=None):
    """The causal mask created without device= (right on the CPU, where the check runs)."""
    if k_cache is not None:
        key = torch.cat([k_cache, key], dim=-2)
        value = torch.cat([v_cache, value], dim=-2)
    L, S = query.shape[-2], key.shape[-2]
    mask = torch.ones(L, S, dtype=torch.bool).tril(S - L)
    s = scale if scale is not None else query.shape[-1] ** -0.5
    scores = (query @ key.transpose(-2, -1) * s).masked_fill(~mask, float("-inf"))
    w = (scores - scores.amax(-1, keepdim=True)).exp()
    return (w / w.sum(-1, keepdim=True)) @ value, key, value


def grouped_linear_by_view(query, key, value):
    """The debugged causal linear attention with the heads grouped by a view instead of copied
    (running sums: the (L, L) weights get a note)."""
    B, Hq, L, E = query.shape
    Hkv = key.shape[1]
    phi_q = (torch.nn.functional.elu(query) + 1).reshape(B, Hkv, Hq // Hkv, L, E)
    phi_k = torch.nn.functional.elu(key) + 1
    kv = torch.einsum("bhse,bhsv->bhsev", phi_k, value).cumsum(2)
    num = torch.einsum("bhgle,bhlev->bhglv", phi_q, kv)
    den = torch.einsum("bhgle,bhle->bhgl", phi_q, phi_k.cumsum(2))
    return (num / (den[..., None] + 1e-6)).reshape(B, Hq, L, value.shape[-1])


def grouped_linear_in_chunks(query, key, value, chunk=64):
    """The causal linear attention a chunk at a time, as qkv.linear_attention's chunk_size does:
    running sums between chunks, the causal block inside each (honest12: noted as the (L, L)
    weights when the sequence was no longer than a chunk)."""
    G = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(G, 1), value.repeat_interleave(G, 1)
    pq, pk = torch.nn.functional.elu(query) + 1, torch.nn.functional.elu(key) + 1
    B, H, L, E = pq.shape
    kv, z, out = pq.new_zeros(B, H, E, value.shape[-1]), pq.new_zeros(B, H, E), []
    for s in range(0, L, chunk):
        q, k, v = pq[:, :, s:s + chunk], pk[:, :, s:s + chunk], value[:, :, s:s + chunk]
        block = (q @ k.transpose(-2, -1)).tril()
        num = q @ kv + block @ v
        den = (q * z[:, :, None]).sum(-1) + block.sum(-1)
        out.append(num / (den[..., None] + 1e-6))
        kv, z = kv + k.transpose(-2, -1) @ v, z + k.sum(2)
    return torch.cat(out, 2)


def duplicate_score_loops(weights, tokens):
    """The duplicate-token score by Python loops over the (sequence, query) pairs."""
    B, H, T, _ = weights.shape
    total, pairs = torch.zeros(H, dtype=weights.dtype, device=weights.device), 0
    for b in range(B):
        for t in range(T):
            earlier = [j for j in range(t) if tokens[b, j] == tokens[b, t]]
            if earlier:
                total = total + weights[b, :, t, earlier].sum(-1)
                pairs += 1
    return total / pairs


def max_weight_in_numpy(d_k, scaled, generator):
    """The max-weight experiment finished in NumPy: a float32 NumPy number comes back."""
    q, k = torch.randn(32, d_k, generator=generator), torch.randn(32, d_k, generator=generator)
    w = torch.softmax(q @ k.T / (math.sqrt(d_k) if scaled else 1.0), -1).numpy()
    return w.max(-1).mean()


def variance_in_numpy(d_k, n_samples, generator):
    """The variance measured in NumPy, as a one-element float32 array."""
    q = torch.randn(n_samples, d_k, generator=generator).numpy()
    k = torch.randn(n_samples, d_k, generator=generator).numpy()
    return np.array([(q * k).sum(-1).var(ddof=1)])


def fp16_overflow_row_by_row(spread, generator):
    """The overflowing rows counted one row at a time, the count divided by the 256 rows."""
    x = (torch.randn(256, 64, generator=generator) * spread).half()
    overflowed = 0
    for row in x:
        w = row.exp() / row.exp().sum()
        overflowed += int(not bool(torch.isfinite(w).all()))
    return overflowed / 256


# Answers as a notebook holds them: defined beside what its set-up cell imports from qkv (the
# "given" functions) and the student's own earlier answers.
_NOTEBOOK = """
import math
import numpy as np
import torch
import torch.nn.functional as F

def quiet_attention_padded(query, key, value, scale=None):
    # torch's softmax, with a zero score appended for the "1": the global softmax
    # (the given one) is not what torch.softmax names
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    s = query @ key.transpose(-2, -1) * scale
    w = torch.softmax(F.pad(s, (0, 1)), dim=-1)[..., :-1]
    return w @ value

def quiet_attention_given(query, key, value, scale=None):
    # the softmax the set-up gives, on the scores with a zero appended
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    s = query @ key.transpose(-2, -1) * scale
    return softmax(F.pad(s, (0, 1)), dim=-1)[..., :-1] @ value

def split_heads(x, num_heads):  # the student's own, for any leading dims
    return x.unflatten(-1, (num_heads, -1)).transpose(-3, -2)

def head_difference_2d(share, generator):
    # split_heads on (16, 32), as split_heads splits it: no batch axis added
    x = torch.randn(16, 32, generator=generator)
    W_q = torch.randn(32, 32, generator=generator) / math.sqrt(32)
    W_k = torch.randn(32, 32, generator=generator) / math.sqrt(32)
    q, k = split_heads(x @ W_q.T, 4), split_heads(x @ W_k.T, 4)
    if share in ("key", "both"):
        k = k[:1].expand_as(k)
    if share == "both":
        q = q[:1].expand_as(q)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)
    pairs = [(a, b) for a in range(4) for b in range(a + 1, 4)]
    return sum(0.5 * (w[a] - w[b]).abs().sum(-1).mean().item() for a, b in pairs) / 6

def attention_scores(query, key, scale=None, *, upcast=False):
    # the student's own, with an option the course's has not: it passes its own check
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    if upcast:
        return (query.double() @ key.double().transpose(-2, -1) * scale).to(query.dtype)
    return query @ key.transpose(-2, -1) * scale

def sdpa_on_own_scores(query, key, value, scale=None):
    # calls its own helper with that option: the course's attention_scores would refuse it
    return softmax(attention_scores(query, key, scale, upcast=True), dim=-1) @ value

def attention_forward(x, params, num_heads, num_kv_heads, k_cache=None, v_cache=None):
    # the student's own: reads the four weights it needs from whatever dict it is given
    q = split_heads(x @ params["q_proj.weight"].T, num_heads)
    k = split_heads(x @ params["k_proj.weight"].T, num_kv_heads)
    v = split_heads(x @ params["v_proj.weight"].T, num_kv_heads)
    P = 0 if k_cache is None else k_cache.shape[-2]
    q, k = apply_rope(q, offset=P), apply_rope(k, offset=P)
    if k_cache is not None:
        k, v = torch.cat([k_cache, k], -2), torch.cat([v_cache, v], -2)
    G = num_heads // num_kv_heads
    s = q @ repeat_kv(k, G).transpose(-2, -1) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~causal_mask_bottom_right(q.shape[-2], P + x.shape[1], device=x.device),
                      float("-inf"))
    return merge_heads(torch.softmax(s, -1) @ repeat_kv(v, G)) @ params["out_proj.weight"].T, k, v

def block_forward_with_every_key(x, params, num_heads, num_kv_heads=None):
    # hands its own attention_forward the block's whole dict, prefix dropped (extra keys too)
    attn = {k.replace("attn.", ""): v for k, v in params.items()}
    h = attention_forward(rms_norm(x, params["norm1.weight"]), attn, num_heads,
                          num_kv_heads or num_heads)[0]
    x = x + h
    h = rms_norm(x, params["norm2.weight"])
    return x + F.gelu(h @ params["mlp.up.weight"].T) @ params["mlp.down.weight"].T

def gelu(z):  # exact GELU written out (the erf form), not F.gelu
    return 0.5 * z * (1 + torch.erf(z / math.sqrt(2)))

def block_forward_gelu_by_erf(x, params, num_heads, num_kv_heads=None):
    attn = {k[len("attn."):]: v for k, v in params.items() if k.startswith("attn.")}
    x = x + attention_forward(rms_norm(x, params["norm1.weight"]), attn, num_heads,
                              num_kv_heads or num_heads)[0]
    h = rms_norm(x, params["norm2.weight"])
    return x + gelu(h @ params["mlp.up.weight"].T) @ params["mlp.down.weight"].T

def block_forward_norm_by_hand(x, params, num_heads, num_kv_heads=None):
    # RMSNorm written out inline (rsqrt of the mean square), not the given rms_norm
    def norm(t, w):
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    attn = {k[len("attn."):]: v for k, v in params.items() if k.startswith("attn.")}
    x = x + attention_forward(norm(x, params["norm1.weight"]), attn, num_heads,
                              num_kv_heads or num_heads)[0]
    h = norm(x, params["norm2.weight"])
    return x + F.gelu(h @ params["mlp.up.weight"].T) @ params["mlp.down.weight"].T

def dropout_block_forward_gelu_by_erf(x, params, num_heads, dropout=0.1, training=False):
    L, E = x.shape[-2], x.shape[-1] // num_heads
    h = rms_norm(x, params["norm1.weight"])
    q, k, v = (split_heads(h @ params[f"attn.{n}_proj.weight"].T, num_heads) for n in "qkv")
    allowed = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()
    s = (q @ k.transpose(-2, -1) / math.sqrt(E)).masked_fill(~allowed, float("-inf"))
    a = merge_heads(torch.softmax(s, dim=-1) @ v) @ params["attn.out_proj.weight"].T
    x = x + F.dropout(a, dropout, training)
    h = rms_norm(x, params["norm2.weight"])
    m = gelu(h @ params["mlp.up.weight"].T) @ params["mlp.down.weight"].T
    return x + F.dropout(m, dropout, training)

def order_sensitivity_numpy(num_layers, rope, generator):
    # the change measured in NumPy on the blocks' outputs
    x = torch.randn(1, 16, 32, generator=generator)
    ps = [random_block_params(32, 4, generator=generator) for _ in range(num_layers)]
    order = torch.randperm(15, generator=generator).tolist()
    xs = torch.stack([x[0, i] for i in order] + [x[0, 15]])[None]
    h, hs = x, xs
    for p in ps:
        h = block_forward(h, p, 4, 4) if rope else dropout_block_forward(h, p, 4, 0.0)
        hs = block_forward(hs, p, 4, 4) if rope else dropout_block_forward(hs, p, 4, 0.0)
    y, y2 = h[0, -1].numpy(), hs[0, -1].numpy()
    return np.linalg.norm(y2 - y) / np.linalg.norm(y)
"""
NOTEBOOK = {"softmax": qkv.softmax, "random_block_params": qkv.random_block_params,
            "block_forward": qkv.block_forward, "dropout_block_forward": None,
            **{name: getattr(qkv, name) for name in (
                "apply_rope", "causal_mask_bottom_right", "merge_heads", "repeat_kv", "rms_norm")}}
exec(_NOTEBOOK, NOTEBOOK)

# A second notebook: a student whose own split_heads returns a contiguous tensor, and whose
# later answers rely on it (.view); and an answer that reaches the set-up's given pieces
# through the package (qkv.split_heads) and takes the softmax with the tensor's method.
_NOTEBOOK_CONTIGUOUS = """
import math
import torch
import qkv

def split_heads(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, L, num_heads, D // num_heads).transpose(1, 2).contiguous()

def mhsa_with_view(x, W_q, W_k, W_v, W_o, num_heads):
    B, L, D = x.shape
    q, k, v = (split_heads(x @ W.T, num_heads) for W in (W_q, W_k, W_v))
    E = D // num_heads
    q, k, v = (t.view(B * num_heads, L, E) for t in (q, k, v))  # needs contiguous heads
    w = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(E)
    out = torch.bmm(w.softmax(dim=-1), v).view(B, num_heads, L, E)
    return out.transpose(1, 2).reshape(B, L, D) @ W_o.T

def head_difference_with_view(share, generator):
    # the experiment on this notebook's contiguous split_heads, viewed as (4, 16, 8)
    x = torch.randn(16, 32, generator=generator)
    W_q = torch.randn(32, 32, generator=generator) / math.sqrt(32)
    W_k = torch.randn(32, 32, generator=generator) / math.sqrt(32)
    q = split_heads((x @ W_q.T)[None], 4).view(64, 8).view(4, 16, 8)
    k = split_heads((x @ W_k.T)[None], 4).view(64, 8).view(4, 16, 8)
    if share in ("key", "both"):
        k = k[:1].expand_as(k)
    if share == "both":
        q = q[:1].expand_as(q)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)
    tv = 0.5 * (w[:, None] - w[None, :]).abs().sum(-1).mean(-1)
    a, b = torch.triu_indices(4, 4, offset=1)
    return tv[a, b].mean().item()

def attention_forward_via_package(x, params, num_heads, num_kv_heads, k_cache=None,
                                  v_cache=None):
    q = qkv.split_heads(x @ params["q_proj.weight"].T, num_heads)
    k = qkv.split_heads(x @ params["k_proj.weight"].T, num_kv_heads)
    v = qkv.split_heads(x @ params["v_proj.weight"].T, num_kv_heads)
    P = 0 if k_cache is None else k_cache.shape[-2]
    q, k = qkv.apply_rope(q, offset=P), qkv.apply_rope(k, offset=P)
    if k_cache is not None:
        k, v = torch.cat([k_cache, k], -2), torch.cat([v_cache, v], -2)
    G = num_heads // num_kv_heads
    s = q @ qkv.repeat_kv(k, G).transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = qkv.causal_mask_bottom_right(q.shape[-2], k.shape[-2], device=x.device)
    w = s.masked_fill(~allowed, float("-inf")).softmax(dim=-1)  # the tensor's method
    out = qkv.merge_heads(w @ qkv.repeat_kv(v, G)) @ params["out_proj.weight"].T
    return out, k, v
"""
CONTIGUOUS = {}
exec(_NOTEBOOK_CONTIGUOUS, CONTIGUOUS)

#: Right where the check runs without a GPU, and named as a mistake where it also runs CUDA
#: inputs (a tensor made without device= stays on the CPU).
CPU_ONLY = ("kv_cache_step with a mask made without device=",)

OTHERWISE = {
    "softmax by recursion": ("check_softmax", softmax_recursive, {}),
    "softmax summed in a random order": ("check_softmax", softmax_summed_in_a_random_order, {}),
    "attention_scores with an lru_cache'd scale and einsum": (
        "check_attention_scores", attention_scores_cached_scale, {}),
    "chunked attention with a mask of its own turned into a float bias": (
        "check_chunked_attention", chunked_with_a_mask_of_its_own, {}),
    "chunked attention with a bool mask turned into a float bias": (
        "check_chunked_attention", chunked_with_float_bias, {}),
    "dot_product_variance as a per-sample loop": (
        "check_dot_product_variance", variance_per_sample_loop, {}),
    "dot_product_variance, one block": (
        "check_dot_product_variance", next(iter(VARIANCE_RIGHT.values())), {}),
    "kv_cache_step with a mask made without device=": (
        "check_kv_cache_step", kv_mask_without_device, {}),
    "MultiHeadAttention": ("check_MultiHeadAttention", next(iter(MHA_RIGHT.values())), {}),
    "grouped causal linear attention, heads grouped by a view": (
        "check_grouped_causal_linear_attention", grouped_linear_by_view, {}),
    "grouped causal linear attention, in chunks of 64": (
        "check_grouped_causal_linear_attention", grouped_linear_in_chunks, {}),
    "duplicate_token_score by loops": ("check_duplicate_token_score", duplicate_score_loops, {}),
    "an experiment finished in NumPy (a float32 NumPy number)": (
        "check_max_weight", max_weight_in_numpy, {}),
    "dot_product_variance in NumPy (a one-element array)": (
        "check_dot_product_variance", variance_in_numpy, {}),
    "quiet_attention with torch.softmax, beside the given softmax": (
        "check_quiet_attention", NOTEBOOK["quiet_attention_padded"], {}),
    "quiet_attention with the given softmax": (
        "check_quiet_attention", NOTEBOOK["quiet_attention_given"], {}),
    "head_difference with the student's split_heads on (L, D)": (
        "check_head_difference", NOTEBOOK["head_difference_2d"], {}),
    "scaled_dot_product_attention on its own attention_scores, called with an option the "
    "course's has not": ("check_scaled_dot_product_attention", NOTEBOOK["sdpa_on_own_scores"],
                        {"masks": False}),
    "block_forward handing its own attention_forward a dict with more keys than it reads": (
        "check_block_forward", NOTEBOOK["block_forward_with_every_key"], {}),
    "multi_head_self_attention with .view on the heads of its own contiguous split_heads": (
        "check_multi_head_self_attention", CONTIGUOUS["mhsa_with_view"], {}),
    "head_difference with .view on the heads of its own contiguous split_heads": (
        "check_head_difference", CONTIGUOUS["head_difference_with_view"], {}),
    "attention_forward reaching the given pieces as qkv.<name>, softmax as a tensor method": (
        "check_attention_forward", CONTIGUOUS["attention_forward_via_package"], {}),
    "block_forward with exact GELU written out (the erf form)": (
        "check_block_forward", NOTEBOOK["block_forward_gelu_by_erf"], {}),
    "block_forward with RMSNorm written out inline (rsqrt)": (
        "check_block_forward", NOTEBOOK["block_forward_norm_by_hand"], {}),
    "dropout_block_forward with exact GELU written out (the erf form)": (
        "check_dropout_block_forward", NOTEBOOK["dropout_block_forward_gelu_by_erf"], {}),
    "fp16_overflow_rate counted row by row, the count divided by 256": (
        "check_fp16_overflow_rate", fp16_overflow_row_by_row, {}),
    "order_sensitivity finished in NumPy": (
        "check_order_sensitivity", NOTEBOOK["order_sensitivity_numpy"], {}),
}
