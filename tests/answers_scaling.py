"""Catalogues of student answers for the scaling checks: wrong ones (each with the words its
hint must contain) and right ones written in different ways (each must pass)."""

import math

import torch
import torch.nn.functional as F

import qkv


def _mask(scores, attn_mask, is_causal, L, S, fill=float("-inf")):
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=scores.device).tril()
    if attn_mask is None:
        return scores
    if attn_mask.dtype == torch.bool:
        return scores.masked_fill(~attn_mask, fill)
    return scores + attn_mask


def make_sdpa(scale_rule="sqrt", mask_mode="before", causal_diag=0, softmax="torch", key_t="ok",
              give="output", order="after", fill=float("-inf"), inplace=False, device_bug=False,
              dtype_bug=False, einsum=False, upcast=False):
    """Build an SDPA answer; the defaults give a right one."""

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
        dt = query.dtype
        if upcast:
            query, key, value = query.double(), key.double(), value.double()
            if attn_mask is not None and attn_mask.dtype != torch.bool:
                attn_mask = attn_mask.double()
        c = {"sqrt": 1 / math.sqrt(E), "none": 1.0, "E": 1 / E, "const": 1 / math.sqrt(8)}[scale_rule]
        if scale is not None and scale_rule == "sqrt":
            c = scale
        kt = {"ok": key.transpose(-2, -1), "T": key.T}[key_t]
        if inplace:
            query *= c
            scores = query @ kt
        elif einsum:
            scores = torch.einsum("...le,...se->...ls", query * c, key)
        elif order == "before":
            scores = (query * c) @ kt
        else:
            scores = (query @ kt) * c
        if is_causal:
            if device_bug:
                allowed = torch.ones(L, S, dtype=torch.bool).tril(causal_diag)
            else:
                allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(causal_diag)
            attn_mask = allowed
        if attn_mask is not None and mask_mode != "after":
            if attn_mask.dtype == torch.bool:
                m = attn_mask if mask_mode == "inverted" else ~attn_mask
                scores = scores.masked_fill(m, fill)
            else:
                scores = scores + attn_mask
        if give == "scores":
            return scores
        if softmax == "torch":
            w = torch.softmax(scores, dim=-1)
        elif softmax == "stable":
            e = (scores - scores.amax(-1, keepdim=True)).exp()
            w = e / e.sum(-1, keepdim=True)
        elif softmax == "unstable":
            w = scores.exp() / scores.exp().sum(-1, keepdim=True)
        elif softmax == "axis":
            w = torch.softmax(scores, dim=-2)
        if mask_mode == "after" and attn_mask is not None and attn_mask.dtype == torch.bool:
            w = w.masked_fill(~attn_mask, 0.0)
        if give == "weights":
            return w
        out = w @ value
        if dtype_bug:
            return out.to(torch.float32)  # a fixed dtype: wrong for float64 inputs
        return out.to(dt)
    return sdpa


# (answer, words the failure message must contain)
SDPA_WRONG = {
    "no scaling": (make_sdpa(scale_rule="none"), "no scaling"),
    "scaling by E": (make_sdpa(scale_rule="E"), "scaling by E instead of sqrt(E)"),
    "scaling by a constant": (make_sdpa(scale_rule="const"), "constant"),
    "softmax over the wrong axis": (make_sdpa(softmax="axis"), "softmax over the wrong axis"),
    "inverted bool mask": (make_sdpa(mask_mode="inverted"), "inverted bool mask"),
    "mask after softmax": (make_sdpa(mask_mode="after"), "mask applied after the softmax"),
    "causal off by one": (make_sdpa(causal_diag=-1), "causal mask off by one"),
    "causal one future key": (make_sdpa(causal_diag=1), "causal mask off by one"),
    "key.T on batched input": (make_sdpa(key_t="T"), "wrong axes transposed on the key"),
    "returns weights": (make_sdpa(give="weights"), "returning the weights"),
    "returns scores": (make_sdpa(give="scores"), "returning the scores"),
    "unstable softmax": (make_sdpa(softmax="unstable"), "overflows on large logits"),
    "wrong device": (make_sdpa(device_bug=True), "device="),
    "fixed dtype": (make_sdpa(dtype_bug=True, upcast=True), "dtype"),
    "inputs modified in place": (make_sdpa(inplace=True), "inputs modified in place"),
}

SDPA_RIGHT = {
    "matmul, scale after": make_sdpa(),
    "scale before the product": make_sdpa(order="before"),
    "einsum": make_sdpa(einsum=True),
    "large negative fill": make_sdpa(fill=-1e9),
    "hand-written stable softmax": make_sdpa(softmax="stable"),
    "float64 inside": make_sdpa(upcast=True),
    "finfo.min fill": make_sdpa(fill=torch.finfo(torch.float32).min),
}


def softmax_ok(x, dim=-1):
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)


def softmax_global_max(x, dim=-1):
    e = (x - x.max()).exp() if torch.isfinite(x.max()) else x.exp()
    return e / e.sum(dim=dim, keepdim=True)


def softmax_logsumexp(x, dim=-1):
    return (x - torch.logsumexp(x, dim=dim, keepdim=True)).exp()


def softmax_float64(x, dim=-1):
    y = x.double()
    e = (y - y.max(dim=dim, keepdim=True).values).exp()
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)


def softmax_unstable(x, dim=-1):
    return x.exp() / x.exp().sum(dim=dim, keepdim=True)


def softmax_last_axis(x, dim=-1):
    e = (x - x.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


def softmax_no_keepdim(x, dim=-1):
    e = (x - x.amax(dim=dim)).exp()
    return e / e.sum(dim=dim)


def softmax_inplace(x, dim=-1):
    x -= x.amax(dim=dim, keepdim=True)
    x.exp_()
    return x / x.sum(dim=dim, keepdim=True)


def softmax_fixed_dtype(x, dim=-1):
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return (e / e.sum(dim=dim, keepdim=True)).float()


def softmax_delegates(x, dim=-1):
    return F.softmax(x, dim=dim)


_alias = qkv.softmax


def softmax_alias(x, dim=-1):
    return _alias(x, dim)


SOFTMAX_WRONG = {
    "unstable": (softmax_unstable, "overflows on large logits"),
    "ignores dim": (softmax_last_axis, "dim argument ignored"),
    "no keepdim": (softmax_no_keepdim, "keepdim"),
    "in place": (softmax_inplace, "inputs modified in place"),
    "fixed dtype": (softmax_fixed_dtype, "dtype"),
    "delegates to F.softmax": (softmax_delegates, "torch.nn.functional.softmax"),
    "delegates to qkv.softmax imported earlier": (softmax_alias, "qkv.softmax"),
}

SOFTMAX_RIGHT = {
    "max subtracted": softmax_ok,
    "logsumexp": softmax_logsumexp,
    "float64 inside": softmax_float64,
    "global max": softmax_global_max,
}
