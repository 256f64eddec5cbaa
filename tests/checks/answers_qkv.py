"""Catalogues of student answers for the qkv checks (self_attention, cross_attention): wrong ones
(each with the words its hint must contain) and right ones written differently (each passes)."""

import math

import torch


def make_cross(q_from="x", kv_from="context", transposed=False, swap_kv=False, swap_qk=False,
               scale="sqrt", axis=-1, give="output", key_t="ok", einsum=False, linear=False,
               manual_softmax=False):
    """Build a cross_attention answer; the defaults give a right one."""

    def cross_attention(x, context, W_q, W_k, W_v):
        src = {"x": x, "context": context}
        # nn.Linear's layout (out, in): x @ W.T; the mistake multiplies by W as it is.
        wq, wk, wv = (W_q, W_k, W_v) if transposed else (W_q.T, W_k.T, W_v.T)
        if swap_kv:
            wk, wv = wv, wk
        if linear:  # through F.linear, which takes (out, in) weights as they are
            Q = torch.nn.functional.linear(src[q_from], wq.T)
            K = torch.nn.functional.linear(src[kv_from], wk.T)
            V = torch.nn.functional.linear(src[kv_from], wv.T)
        else:
            Q, K, V = src[q_from] @ wq, src[kv_from] @ wk, src[kv_from] @ wv
        if swap_qk:
            Q, K = K, Q
        E = Q.shape[-1]
        c = {"sqrt": 1 / math.sqrt(E), "none": 1.0, "E": 1 / E, "Ev": 1 / math.sqrt(V.shape[-1]),
             "const": 1 / 8, "S": 1 / math.sqrt(K.shape[-2]),
             "Dc": 1 / math.sqrt(src[kv_from].shape[-1])}[scale]
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
    "weights untransposed": ({"transposed": True}, "(out_features, in_features)"),
    "transpose(K, 0, 1)": ({"key_t": "01"}, "transpose only the last two axes"),
    "constant scale": ({"scale": "const"}, "wrong on"),
    "scaling by sqrt(S)": ({"scale": "S"}, "sqrt(S), the number of keys"),
}

SELF_WRONG = {name: (make_self(**kw), words) for name, (kw, words) in _COMMON_WRONG.items()}
CROSS_WRONG = {name: (make_cross(**kw), words) for name, (kw, words) in _COMMON_WRONG.items()}
CROSS_WRONG["keys and values from x"] = (make_cross(kv_from="x"), "from x instead of the context")
CROSS_WRONG["queries from the context"] = (make_cross(q_from="context", kv_from="x"),
                                           "queries taken from the context")
CROSS_WRONG["scaling by sqrt(Dc)"] = (make_cross(scale="Dc"), "the context's width")

_RIGHT = {
    "matmul": {},
    "einsum": {"einsum": True},
    "K.mT": {"key_t": "mT"},
    "F.linear": {"linear": True},
    "hand-written softmax": {"manual_softmax": True},
}
SELF_RIGHT = {name: make_self(**kw) for name, kw in _RIGHT.items()}
CROSS_RIGHT = {name: make_cross(**kw) for name, kw in _RIGHT.items()}


# ----------------------------------------------------------------------------- found by trying
# Mistakes a student made while trying the exercises (issue 13, item 5).
def self_scaled_by_input_width(x, W_q, W_k, W_v):
    Q, K, V = x @ W_q.T, x @ W_k.T, x @ W_v.T
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(x.shape[-1]), -1) @ V


def self_values_from_W_k(x, W_q, W_k, W_v):
    Q, K, V = x @ W_q.T, x @ W_k.T, x @ W_k.T  # copy-paste: V from W_k
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V


def cross_output_transposed(x, context, W_q, W_k, W_v):
    Q, K, V = x @ W_q.T, context @ W_k.T, context @ W_v.T
    w = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1)
    return V.transpose(-2, -1) @ w.transpose(-2, -1)


SELF_WRONG.update({
    "scaled by the width of x": (self_scaled_by_input_width, "sqrt(D), the width of x"),
    "values from W_k": (self_values_from_W_k, "axis 1 is 3 (expected 5)"),
})
CROSS_WRONG["output transposed"] = (cross_output_transposed, "axes in another order")
