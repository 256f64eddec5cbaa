"""Catalogues of student answers for the self/cross-attention and variance checks: wrong ones
(each with the words its hint must contain) and right ones written differently (each passes)."""

import math

import torch


def make_cross(q_from="x", kv_from="context", transposed=False, swap_kv=False, swap_qk=False,
               scale="sqrt", axis=-1, give="output", key_t="ok", einsum=False, linear=False,
               manual_softmax=False):
    """Build a cross_attention answer; the defaults give a right one."""

    def cross_attention(x, context, W_q, W_k, W_v):
        src = {"x": x, "context": context}
        wq, wk, wv = (W_q.T, W_k.T, W_v.T) if transposed else (W_q, W_k, W_v)
        if swap_kv:
            wk, wv = wv, wk
        if linear:  # through F.linear, which wants (out, in) weights
            Q = torch.nn.functional.linear(src[q_from], wq.T)
            K = torch.nn.functional.linear(src[kv_from], wk.T)
            V = torch.nn.functional.linear(src[kv_from], wv.T)
        else:
            Q, K, V = src[q_from] @ wq, src[kv_from] @ wk, src[kv_from] @ wv
        if swap_qk:
            Q, K = K, Q
        E = Q.shape[-1]
        c = {"sqrt": 1 / math.sqrt(E), "none": 1.0, "E": 1 / E, "Ev": 1 / math.sqrt(V.shape[-1]),
             "const": 1 / 8}[scale]
        if einsum:
            scores = torch.einsum("...le,...se->...ls", Q, K) * c
        else:
            kt = {"ok": K.transpose(-2, -1), "01": torch.transpose(K, 0, 1), "mT": K.mT}[key_t]
            scores = Q @ kt * c
        if give == "scores":
            return scores
        if manual_softmax:
            e = (scores - scores.amax(-1, keepdim=True)).exp()
            w = e / e.sum(-1, keepdim=True)
        else:
            w = torch.softmax(scores, dim=axis)
        if give == "weights":
            return w
        return w @ V

    return cross_attention


def make_self(**kw):
    cross = make_cross(**kw)

    def self_attention(x, W_q, W_k, W_v):
        return cross(x, x, W_q, W_k, W_v)

    return self_attention


_COMMON_WRONG = {
    "no scaling": ({"scale": "none"}, "no scaling"),
    "scaling by E": ({"scale": "E"}, "scaling by E instead of sqrt(E)"),
    "scaling by sqrt(Ev)": ({"scale": "Ev"}, "scaling by sqrt(Ev)"),
    "softmax over queries": ({"axis": -2}, "softmax over the wrong axis"),
    "weights returned": ({"give": "weights"}, "returning the weights"),
    "scores returned": ({"give": "scores"}, "returning the scores"),
    "W_k and W_v swapped": ({"swap_kv": True}, "W_k and W_v swapped"),
    "queries and keys swapped": ({"swap_qk": True}, "queries and keys swapped"),
    "weights transposed": ({"transposed": True}, "(in_features, out_features)"),
    "transpose(K, 0, 1)": ({"key_t": "01"}, "transpose only the last two axes"),
    "constant scale": ({"scale": "const"}, "wrong on"),
}

SELF_WRONG = {name: (make_self(**kw), words) for name, (kw, words) in _COMMON_WRONG.items()}
CROSS_WRONG = {name: (make_cross(**kw), words) for name, (kw, words) in _COMMON_WRONG.items()}
CROSS_WRONG["keys and values from x"] = (make_cross(kv_from="x"), "from x instead of the context")
CROSS_WRONG["queries from the context"] = (make_cross(q_from="context", kv_from="x"),
                                           "queries taken from the context")

_RIGHT = {
    "matmul": {},
    "einsum": {"einsum": True},
    "K.mT": {"key_t": "mT"},
    "F.linear with transposed weights": {"linear": True},
    "hand-written softmax": {"manual_softmax": True},
}
SELF_RIGHT = {name: make_self(**kw) for name, kw in _RIGHT.items()}
CROSS_RIGHT = {name: make_cross(**kw) for name, kw in _RIGHT.items()}


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
