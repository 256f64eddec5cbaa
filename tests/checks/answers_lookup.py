"""Catalogues of student answers for the lookup checks (softmax, soft_lookup, additive_score,
luong_score): wrong ones (each with the words its hint must contain) and right ones written
differently (each must pass)."""

import math

import numpy as np
import torch
import torch.nn.functional as F

import qkv


# ----------------------------------------------------------------------------- softmax
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
    # Right in exact arithmetic; a row far below the global maximum underflows to 0 / 0.
    "global max": (softmax_global_max, "one maximum over the whole tensor"),
}

SOFTMAX_RIGHT = {
    "max subtracted": softmax_ok,
    "logsumexp": softmax_logsumexp,
    "float64 inside": softmax_float64,
}


# ----------------------------------------------------------------------------- soft_lookup
def soft(query, keys, values, temperature=1.0, *, t="div", sqrt=False, dim=-1, stable=True,
         keys_T=False, swap=False, argmax=False, device_bug=False, delegate=False):
    """Build-a-soft_lookup; the defaults give a right answer."""
    if delegate:
        return qkv.soft_lookup(query, keys, values, temperature)
    kt = keys.T if keys_T else keys.transpose(-2, -1)
    scores = query @ kt
    scores = {"div": scores / temperature, "mul": scores * temperature, "none": scores}[t]
    if sqrt:
        scores = scores / math.sqrt(query.shape[-1])
    if argmax:
        idx = scores.argmax(-1, keepdim=True)
        w = torch.zeros(scores.shape, dtype=scores.dtype, device=None if device_bug else scores.device)
        w = w.scatter(-1, idx, 1.0)
    elif stable:
        e = (scores - scores.amax(dim, keepdim=True)).exp()
        w = e / e.sum(dim, keepdim=True)
    else:
        w = scores.exp() / scores.exp().sum(dim, keepdim=True)
    out = w @ values
    return (w, out) if swap else (out, w)


def _w(**kw):
    return lambda q, k, v, temperature=1.0: soft(q, k, v, temperature, **kw)


def soft_einsum(query, keys, values, temperature=1.0):
    w = torch.softmax(torch.einsum("...le,...se->...ls", query, keys) / temperature, dim=-1)
    return torch.einsum("...ls,...sv->...lv", w, values), w


def soft_list(query, keys, values, temperature=1.0):
    return list(soft(query, keys, values, temperature))


SOFT_WRONG = {
    "pair swapped": (_w(swap=True), "order (output, weights)"),
    "temperature multiplied": (_w(t="mul"), "multiplying by the temperature"),
    "temperature ignored": (_w(t="none"), "the temperature ignored"),
    "sqrt(E) as well": (_w(sqrt=True), "as well as the temperature"),
    "sqrt(E) instead": (lambda q, k, v, temperature=1.0: soft(q, k, v, 1.0, sqrt=True),
                        "instead of the temperature"),
    "argmax": (_w(argmax=True), "hard lookup"),
    "softmax over queries": (_w(dim=-2), "softmax over the wrong axis"),
    "unstable softmax": (_w(stable=False), "overflows"),
    "keys.T": (_w(keys_T=True), "keys.transpose(-2, -1)"),
    "only the output": (lambda q, k, v, temperature=1.0: soft(q, k, v, temperature)[0],
                        "expected a pair (output, weights)"),
    "delegates": (_w(delegate=True), "calls qkv.soft_lookup"),
}
SOFT_RIGHT = {"max subtracted": _w(), "einsum and torch.softmax": soft_einsum, "a list": soft_list}


# ----------------------------------------------------------------------------- additive_score
def additive(query, key, W_q, W_k, v_a, *, proj_T=True, f=torch.tanh, swap=False, separate=False,
             flip=False, delegate=False):
    """Build-an-additive_score; the defaults give a right answer."""
    if delegate:
        return qkv.additive_score(query, key, W_q, W_k, v_a)
    if swap:
        W_q, W_k = W_k, W_q
    pq = query @ W_q.T if proj_T else query @ W_q
    pk = key @ W_k.T if proj_T else key @ W_k
    feats = f(pq)[..., :, None, :] + f(pk)[..., None, :, :] if separate else f(pq[..., :, None, :] + pk[..., None, :, :])
    s = (feats * v_a).sum(-1)
    return s.transpose(-2, -1) if flip else s


def additive_loops(query, key, W_q, W_k, v_a):
    L, S = query.shape[-2], key.shape[-2]
    out = torch.empty(*query.shape[:-2], L, S, dtype=query.dtype, device=query.device)
    for i in range(L):
        for j in range(S):
            out[..., i, j] = torch.tanh(query[..., i, :] @ W_q.T + key[..., j, :] @ W_k.T) @ v_a
    return out


def additive_einsum(query, key, W_q, W_k, v_a):
    pq, pk = torch.einsum("...le,ae->...la", query, W_q), torch.einsum("...se,ae->...sa", key, W_k)
    return torch.einsum("...lsa,a->...ls", torch.tanh(pq.unsqueeze(-2) + pk.unsqueeze(-3)), v_a)


def _a(**kw):
    return lambda q, k, W_q, W_k, v_a: additive(q, k, W_q, W_k, v_a, **kw)


ADDITIVE_WRONG = {
    "not transposed": (_a(proj_T=False), "query @ W_q.T"),
    "swapped": (_a(swap=True), "W_q projects the queries"),
    "no tanh": (_a(f=lambda x: x), "no tanh"),
    "sigmoid": (_a(f=torch.sigmoid), "sigmoid instead of tanh"),
    "separate tanh": (_a(separate=True), "one tanh of the sum"),
    "flipped": (_a(flip=True), "(S, L) instead of (L, S)"),
    "softmax": (lambda *a: torch.softmax(additive(*a), -1), "unnormalised scores"),
    "delegates": (_a(delegate=True), "calls qkv.additive_score"),
}
ADDITIVE_RIGHT = {"broadcast": _a(), "loops": additive_loops, "einsum": additive_einsum}


# ----------------------------------------------------------------------------- luong_score
def luong(query, key, W=None, *, ignore_W=False, W_T=False, scale=False, key_T=False):
    """Build-a-luong_score; the defaults give a right answer."""
    kt = key.T if key_T else key.transpose(-2, -1)
    if W is not None and not ignore_W:
        query = query @ (W.T if W_T else W)
    s = query @ kt
    return s / math.sqrt(query.shape[-1]) if scale else s


def luong_einsum(query, key, W=None):
    if W is None:
        return torch.einsum("...le,...se->...ls", query, key)
    return torch.einsum("...le,ef,...sf->...ls", query, W, key)


def _l(**kw):
    return lambda q, k, W=None: luong(q, k, W, **kw)


LUONG_WRONG = {
    "W ignored": (_l(ignore_W=True), "W ignored"),
    "W transposed": (_l(W_T=True), "W transposed"),
    "scaled": (_l(scale=True), "not scaled"),
    "key.T": (_l(key_T=True), "keys.transpose(-2, -1)"),
    "delegates": (lambda q, k, W=None: qkv.luong_score(q, k, W), "calls qkv.luong_score"),
}
LUONG_RIGHT = {"matmul": _l(), "einsum": luong_einsum,
               "key projected": lambda q, k, W=None: q @ (k if W is None else k @ W.T).transpose(-2, -1)}


# ----------------------------------------------------------------------------- found by trying
# Mistakes a student made while trying the exercises (issue 13, item 5): no variant of the
# check reproduces most of them; their messages come from the describer or the error's line.
def softmax_numpy(x, dim=-1):
    e = np.exp(x.numpy() - x.numpy().max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def softmax_no_return(x, dim=-1):
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    out = e / e.sum(dim=dim, keepdim=True)  # noqa: F841 (the mistake: no return)


def softmax_max_tuple(x, dim=-1):
    e = (x - x.max(dim=dim, keepdim=True)).exp()  # max(dim=) returns (values, indices)
    return e / e.sum(dim=dim, keepdim=True)


def softmax_base_two(x, dim=-1):
    e = 2 ** (x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def soft_temperature_squared(query, keys, values, temperature=1.0):
    w = torch.softmax(query @ keys.transpose(-2, -1) / temperature**2, dim=-1)
    return w @ values, w


def soft_distance(query, keys, values, temperature=1.0):
    w = torch.softmax(-torch.cdist(query, keys) / temperature, dim=-1)
    return w @ values, w


def soft_values_transposed(query, keys, values, temperature=1.0):
    w = torch.softmax(query @ keys.transpose(-2, -1) / temperature, dim=-1)
    return w @ values.transpose(-2, -1), w


def additive_no_v_a(query, key, W_q, W_k, v_a):
    return torch.tanh((query @ W_q.T).unsqueeze(-2) + (key @ W_k.T).unsqueeze(-3)).sum(-1)


def additive_fixed_axes(query, key, W_q, W_k, v_a):
    return torch.tanh((query @ W_q.T).unsqueeze(1) + (key @ W_k.T).unsqueeze(0)) @ v_a


def additive_kept_axis(query, key, W_q, W_k, v_a):
    pq, pk = (query @ W_q.T).unsqueeze(-2), (key @ W_k.T).unsqueeze(-3)
    return torch.tanh(pq + pk) @ v_a[:, None]


def luong_if_tensor(query, key, W=None):
    if W:  # a tensor as a condition
        query = query @ W
    return query @ key.transpose(-2, -1)


def luong_t(query, key, W=None):
    if W is not None:
        query = query @ W
    return query @ key.t()


SOFTMAX_WRONG.update({
    "a NumPy array": (softmax_numpy, "NumPy"),
    "no return": (softmax_no_return, "return statement missing"),
    "max(dim=) is a pair": (softmax_max_tuple, "at line"),
    "base 2": (softmax_base_two, "multiplied by 0.6931 before the softmax"),
})
SOFT_WRONG.update({
    "temperature squared": (soft_temperature_squared, "multiplied by 1.429"),
    "distances as scores": (soft_distance, "the scores that go into the softmax are wrong"),
    "values transposed": (soft_values_transposed, "print the shapes of both operands"),
})
ADDITIVE_WRONG.update({
    "v_a not applied": (additive_no_v_a, "v_a not applied"),
    "fixed axes (right unbatched only)": (additive_fixed_axes, "it was right on"),
    "an axis of size 1 kept": (additive_kept_axis, "an extra axis of size 1"),
})
LUONG_WRONG.update({
    "if W:": (luong_if_tensor, "if W is not None"),
    ".t() on a batch": (luong_t, ".transpose(-2, -1)"),
})
