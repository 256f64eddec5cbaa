"""Catalogues of student answers for the scaling checks (scaled_dot_product_attention,
dot_product_variance): wrong ones (each with the words its hint must contain) and right ones
written in different ways (each must pass)."""

import math

import torch


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
        c = {"sqrt": 1 / math.sqrt(E), "none": 1.0, "E": 1 / E, "const": 1 / math.sqrt(8),
             "S": 1 / math.sqrt(S)}[scale_rule]
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
            if attn_mask.dtype == torch.bool and mask_mode == "add":
                scores = scores + attn_mask  # the bool mask added as if it were a float one
            elif attn_mask.dtype == torch.bool:
                m = attn_mask if mask_mode == "inverted" else ~attn_mask
                scores = scores.masked_fill(m, torch.finfo(scores.dtype).min if fill == "finfo"
                                            else fill)
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
    "scaling by sqrt(S)": (make_sdpa(scale_rule="S"), "sqrt(S), the number of keys"),
    "softmax over the wrong axis": (make_sdpa(softmax="axis"), "softmax over the wrong axis"),
    "inverted bool mask": (make_sdpa(mask_mode="inverted"), "inverted bool mask"),
    "mask after softmax": (make_sdpa(mask_mode="after"), "mask applied after the softmax"),
    "causal off by one": (make_sdpa(causal_diag=-1), "causal mask off by one"),
    "causal one future key": (make_sdpa(causal_diag=1), "causal mask off by one"),
    "key.T on batched input": (make_sdpa(key_t="T"), "wrong axes transposed on the key"),
    "returns weights": (make_sdpa(give="weights"), "returning the weights"),
    "returns scores": (make_sdpa(give="scores"), "returning the scores"),
    "unstable softmax": (make_sdpa(softmax="unstable"), "overflows on large logits"),
    "fixed dtype": (make_sdpa(dtype_bug=True, upcast=True), "dtype"),
    "inputs modified in place": (make_sdpa(inplace=True), "inputs modified in place"),
    "bool mask added as 0/1": (make_sdpa(mask_mode="add"), "a bool mask added to the scores as 0/1"),
    "-1e9 fill (overflows in float16)": (make_sdpa(fill=-1e9), "a finite fill like -1e9"),
}

SDPA_RIGHT = {
    "matmul, scale after": make_sdpa(),
    "scale before the product": make_sdpa(order="before"),
    "einsum": make_sdpa(einsum=True),
    "large negative fill that fits float16": make_sdpa(fill=-3e4),
    "hand-written stable softmax": make_sdpa(softmax="stable"),
    "float64 inside": make_sdpa(upcast=True),
    "finfo.min fill of the scores' dtype": make_sdpa(fill="finfo"),
}


# --------------------------------------------------------------------------- variance


def make_variance(what="var", generator=True, device=True, same_q=False, scaled=False,
                  chunks=1, tensor=False, unbiased=True):
    """Build a dot_product_variance answer; the defaults give a right one."""

    def dot_product_variance(d_k, n_samples, generator_):
        kw = {"generator": generator_} if generator else {}
        if device:
            kw["device"] = generator_.device
        dots = []
        for rows in [n_samples // chunks] * (chunks - 1) + [n_samples - (chunks - 1) * (n_samples // chunks)]:
            q = torch.randn(rows, d_k, **kw)
            k = q if same_q else torch.randn(rows, d_k, **kw)
            dots.append((q * k).sum(-1) / (math.sqrt(d_k) if scaled else 1.0))
        dots = torch.cat(dots)
        if what == "formula":
            return float(d_k)
        if what == "products":
            return (q * k).var().item()
        if what == "mean":
            return dots.mean().item()
        if what == "std":
            return dots.std().item()
        if what == "mean of squares":  # right too: the mean is known to be 0
            out = dots.square().mean()
        else:
            out = dots.var(unbiased=unbiased)
        return out if tensor else out.item()

    return dot_product_variance


VARIANCE_WRONG = {
    "returns the formula": (make_variance(what="formula"), "not the formula"),
    "ignores the generator": (make_variance(generator=False), "identically seeded generators"),
    "variance of single products": (make_variance(what="products"), "single products"),
    "mean instead of variance": (make_variance(what="mean"), "the mean of the dot products"),
    "standard deviation": (make_variance(what="std"), "standard deviation"),
    "q·q": (make_variance(same_q=True), "q·q"),
    "scaled dot products": (make_variance(scaled=True), "q·k / sqrt(d_k)"),
}

VARIANCE_RIGHT = {
    "one block": make_variance(),
    "chunks": make_variance(chunks=4),
    "tensor result": make_variance(tensor=True),
    "biased variance": make_variance(unbiased=False),
    "mean of squares": make_variance(what="mean of squares"),
}


# ----------------------------------------------------------------------------- found by trying
# Mistakes a student made while trying the exercises (issue 13, item 5).
def _sdpa_float_mask(float_mask):
    """An SDPA answer right for bool masks, with ``float_mask(scores, mask)`` for float ones."""
    def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                     is_causal=False, scale=None):
        L, S = query.shape[-2], key.shape[-2]
        scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
        scores = query @ key.transpose(-2, -1) * scale
        if is_causal:
            attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                scores = scores.masked_fill(~attn_mask, float("-inf"))
            else:
                scores = float_mask(scores, attn_mask)
        return torch.softmax(scores, dim=-1) @ value
    return scaled_dot_product_attention


# A float mask is a bias, added; these multiply it, or hand it to torch.where as a condition.
sdpa_float_mask_multiplied = _sdpa_float_mask(lambda s, m: s * m)
sdpa_where_float_mask = _sdpa_float_mask(lambda s, m: torch.where(m, s, float("-inf")))


def variance_uniform(d_k, n_samples, generator):
    q = torch.rand(n_samples, d_k, generator=generator, device=generator.device)
    k = torch.rand(n_samples, d_k, generator=generator, device=generator.device)
    return (q * k).sum(-1).var().item()


SDPA_WRONG.update({
    "float mask multiplied": (sdpa_float_mask_multiplied, "a float mask multiplied"),
    "torch.where on a float mask": (sdpa_where_float_mask, "a float mask is added to the scores"),
})
VARIANCE_WRONG["uniform draws"] = (variance_uniform, "torch.randn, not torch.rand")


def variance_n_samples_ignored(d_k, n_samples, generator):
    """Always 20,000 pairs, whatever n_samples says."""
    q, k = torch.randn(20_000, d_k, generator=generator), torch.randn(20_000, d_k, generator=generator)
    return (q * k).sum(-1).var().item()


VARIANCE_WRONG["n_samples ignored"] = (variance_n_samples_ignored, "is n_samples used?")


def variance_capped(d_k, n_samples, generator):
    """At most 1,000 pairs, to save time: its estimates pass 4 times in 10; it draws 1/20 of the
    numbers n_samples pairs need."""
    n = min(n_samples, 1_000)
    q, k = torch.randn(n, d_k, generator=generator), torch.randn(n, d_k, generator=generator)
    return (q * k).sum(-1).var().item()


VARIANCE_WRONG["at most 1,000 pairs"] = (variance_capped, "fewer pairs than asked")


def variance_over_d(d_k, n_samples, generator):
    q = torch.randn(n_samples, d_k, generator=generator, device=generator.device)
    k = torch.randn(n_samples, d_k, generator=generator, device=generator.device)
    return ((q * k).sum(-1) / d_k).var().item()


# At d_k = 4 its 0.25 is within the sampling error of a uniform draw's 0.19: named by every width.
VARIANCE_WRONG["dot products divided by d_k"] = (variance_over_d, "q·k / d_k")
