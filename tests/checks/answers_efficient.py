"""Catalogues of student answers for the efficient checks (chunked_attention, kv_cache_step):
wrong ones (each with the words its hint must contain) and right ones written differently (each
passes)."""

import math

import torch
import torch.nn.functional as F

import qkv


# ----------------------------------------------------------------------------- chunked_attention
def make_chunked(rescale=True, materialise=False, stable=True, first_max=None, short=False,
                 fill="finfo", causal_diag=0, divide=True, stop="S", mask_from0=False):
    def chunked_attention(query, key, value, attn_mask=None, is_causal=False, scale=None,
                          chunk_size=256):
        L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
        c = 1 / math.sqrt(E) if scale is None else scale
        if is_causal:
            attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(causal_diag)
        if materialise:
            s = query @ key.transpose(-2, -1) * c
            if attn_mask is not None:
                s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
                    else s + attn_mask
            return torch.softmax(s, -1) @ value
        outs = []
        for i0 in range(0, L, chunk_size):
            q = query[..., i0:i0 + chunk_size, :] * c
            m = l = acc = None
            for j0 in range(0, S if stop == "S" else S - chunk_size, chunk_size):
                j1 = j0 + chunk_size - (1 if short else 0)
                s = q @ key[..., j0:j1, :].transpose(-2, -1)
                if attn_mask is not None:
                    blk = attn_mask[..., i0:i0 + chunk_size, j0:j1]
                    if mask_from0:  # the mask's first columns in every chunk
                        blk = attn_mask[..., i0:i0 + chunk_size, :s.shape[-1]]
                    low = torch.finfo(s.dtype).min if fill == "finfo" else fill
                    s = s.masked_fill(~blk, low) if blk.dtype == torch.bool else s + blk
                vj = value[..., j0:j1, :]
                if m is None and first_max == "zero":
                    m = torch.zeros_like(s[..., :1])
                    l, acc = torch.zeros_like(m), torch.zeros_like(q[..., :1] * vj[..., :1, :])
                if m is None:
                    m = s.amax(-1, keepdim=True) if stable else torch.zeros_like(s[..., :1])
                    p = (s - m).exp()
                    l, acc = p.sum(-1, keepdim=True), p @ vj
                    continue
                m_new = torch.maximum(m, s.amax(-1, keepdim=True)) if stable else m
                p = (s - m_new).exp()
                r = (m - m_new).exp() if rescale else torch.ones_like(m)
                l = l * r + p.sum(-1, keepdim=True)
                acc = acc * r + p @ vj
                m = m_new
            outs.append(acc / l if divide else acc)
        return torch.cat(outs, dim=-2)
    return chunked_attention


CHUNKED_WRONG = {
    "no rescaling": (make_chunked(rescale=False), "does not rescale its running sums"),
    "no running max": (make_chunked(stable=False), "overflows"),
}
CHUNKED_RIGHT = {"online softmax": make_chunked()}


def chunked_into_a_buffer(query, key, value, attn_mask=None, is_causal=False, scale=None,
                          chunk_size=256):
    """Scores computed chunk by chunk into a whole (L, S) buffer, then one softmax over it."""
    S = key.shape[-2]
    c = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    buf = torch.empty(*query.shape[:-1], S, dtype=query.dtype, device=query.device)
    for j in range(0, S, chunk_size):
        buf[..., j:j + chunk_size] = query @ key[..., j:j + chunk_size, :].transpose(-2, -1) * c
    if is_causal:
        attn_mask = torch.ones(query.shape[-2], S, dtype=torch.bool, device=query.device).tril()
    if attn_mask is not None:
        buf = buf.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else buf + attn_mask
    return torch.softmax(buf, -1).nan_to_num(0.0) @ value

CHUNKED_WRONG.update({
    "initial max 0": (make_chunked(first_max="zero"), "starts at 0 instead of -inf"),
    "chunk one key short": (make_chunked(short=True), "chunk bounds off by one"),
    "causal mask hides the diagonal": (make_chunked(causal_diag=-1),
                                       "causal mask off by one (the diagonal is masked)"),
    "-1e9 fill (overflows in float16)": (make_chunked(fill=-1e9), "a finite fill like -1e9"),
    # Right numbers, none of the memory: chunk_size ignored.
    "the whole score matrix at once": (make_chunked(materialise=True),
                                       "the whole (L, S) = (7, 9) score matrix"),
    "chunk by chunk into a whole buffer, one softmax": (chunked_into_a_buffer,
                                                        "the whole (L, S) = (7, 9) score matrix"),
    "float32's finfo.min fill (overflows in float16)":
        (make_chunked(fill=torch.finfo(torch.float32).min), "torch.finfo(scores.dtype).min"),
})


# ----------------------------------------------------------------------------- kv_cache_step
def make_kv(mask="bottom_right", attend_new=True, new_first=False, return_old=False, cat_dim=-2,
            scale_by="E", diag=0, fill=float("-inf"), give="triple", use_scale=True):
    def kv_cache_step(query, key, value, k_cache=None, v_cache=None, scale=None):
        if k_cache is None:
            k_all, v_all = key, value
        elif new_first:
            k_all, v_all = torch.cat([key, k_cache], dim=cat_dim), torch.cat([value, v_cache], dim=cat_dim)
        else:
            k_all, v_all = torch.cat([k_cache, key], dim=cat_dim), torch.cat([v_cache, value], dim=cat_dim)
        k_att, v_att = (k_all, v_all) if attend_new or k_cache is None else (k_cache, v_cache)
        L, S = query.shape[-2], k_att.shape[-2]
        # S: the number of keys, Ev: the values' width (the mistakes)
        d = {"E": query.shape[-1], "S": S, "Ev": value.shape[-1]}[scale_by]
        c = 1 / math.sqrt(d) if scale is None or not use_scale else scale
        s = query @ k_att.transpose(-2, -1) * c
        if mask == "bottom_right":
            allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(S - L + diag)
            s = s.masked_fill(~allowed, fill)
        elif mask == "is_causal":
            allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
            s = s.masked_fill(~allowed, float("-inf"))
        out = torch.softmax(s, dim=-1) @ v_att
        if give == "output":
            return out
        if give == "nested":
            return out, (k_all, v_all)
        return (out, k_cache, v_cache) if return_old else (out, k_all, v_all)
    return kv_cache_step


def kv_with_sdpa(query, key, value, k_cache=None, v_cache=None, scale=None):
    if k_cache is not None:
        key, value = torch.cat((k_cache, key), -2), torch.cat((v_cache, value), -2)
    L, S = query.shape[-2], key.shape[-2]
    offset = torch.arange(L, device=query.device)[:, None] + (S - L)
    mask = torch.arange(S, device=query.device)[None, :] <= offset
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale), key, value


KV_WRONG = {
    "upper-left causal": (make_kv(mask="is_causal"), "aligned to the upper left"),
    "no mask": (make_kv(mask=None), "no causal mask among several new tokens"),
    "attends to the old cache only": (make_kv(attend_new=False), "only to the old cache"),
    "new before old": (make_kv(new_first=True), "put before the cache"),
    "returns the old caches": (make_kv(return_old=True), "old caches returned"),
    "concatenated on the wrong dim": (make_kv(cat_dim=-1), "the cache appended on the wrong dim"),
    "concatenated on the heads dim": (make_kv(cat_dim=1), "the cache appended on the wrong dim"),
    "scaled by 1/sqrt(S)": (make_kv(scale_by="S"), "scaled by 1/sqrt(S)"),
    "mask hides the new token itself": (make_kv(diag=-1), "causal mask off by one (each new token"),
    "mask shows one future token": (make_kv(diag=1), "causal mask off by one (one future key"),
    "-1e9 fill (overflows in float16)": (make_kv(fill=-1e9), "a finite fill like -1e9"),
    "calls the reference": (lambda *a, **k: qkv.kv_cache_step(*a, **k), "qkv.kv_cache_step"),
}
KV_RIGHT = {"softmax by hand": make_kv()}


# ----------------------------------------------------------------------------- found by trying
# Mistakes a student made while trying the exercises (issue 13, item 5).
CHUNKED_WRONG.update({
    "never divided by l": (make_chunked(divide=False), "never divided by the running sum"),
    "loop stops at S - chunk_size": (make_chunked(stop="minus"), "the last keys left out"),
    "every chunk's mask from column 0": (make_chunked(mask_from0=True), "sliced from key 0"),
})


def chunked_mask_cut_2d(query, key, value, attn_mask=None, is_causal=False, scale=None,
                        chunk_size=256):
    """Right for an (L, S) mask; a mask with batch axes, (B, 1, L, S), is cut on the wrong axis
    (found by a student walk: every mask the check used was (L, S))."""
    L, S = query.shape[-2], key.shape[-2]
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    m = torch.full(query.shape[:-1] + (1,), float("-inf"), dtype=query.dtype)
    l = torch.zeros_like(m)
    acc = torch.zeros(query.shape[:-1] + (value.shape[-1],), dtype=query.dtype)
    for j0 in range(0, S, chunk_size):
        j1 = min(j0 + chunk_size, S)
        s = query @ key[..., j0:j1, :].transpose(-2, -1) * scale
        if is_causal:
            s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(L)[:, None],
                              float("-inf"))
        if attn_mask is not None:
            mk = attn_mask[:, j0:j1]
            s = s.masked_fill(~mk, float("-inf")) if mk.dtype == torch.bool else s + mk
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
        p, c = torch.exp(s - safe), torch.exp(m - safe)
        l, acc, m = l * c + p.sum(-1, keepdim=True), acc * c + p @ value[..., j0:j1, :], new
    return torch.where(l > 0, acc / l.clamp_min(1e-300), torch.zeros_like(acc))


CHUNKED_WRONG["mask cut as (L, S) only"] = (chunked_mask_cut_2d, "attn_mask[..., j0:j1]")


def chunked_whole_when_masked(query, key, value, attn_mask=None, is_causal=False, scale=None,
                              chunk_size=256):
    """Chunked without a mask; with one, or is_causal, the whole (L, S) scores "to keep it
    simple" (found by a student walk: the watch only looked at calls without a mask)."""
    if attn_mask is None and not is_causal:
        return chunked_mask_cut_2d(query, key, value, scale=scale, chunk_size=chunk_size)
    L, S = query.shape[-2], key.shape[-2]
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    s = query @ key.transpose(-2, -1) * scale
    if is_causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else s + attn_mask
    return torch.softmax(s, -1).nan_to_num(0.0) @ value


CHUNKED_WRONG["the whole scores when masked"] = (chunked_whole_when_masked,
                                                 "score matrix, which this exercise never makes")


def chunked_keys_transposed_first(query, key, value, attn_mask=None, is_causal=False,
                                  scale=None, chunk_size=256):
    """Right: the keys transposed once, (..., E, S), before the loop; queries with no allowed
    key found by counting each row's allowed keys in the mask's float copy (both refused as
    "the whole score matrix" once: (E, S) is (L, S) where E = L, and a sum over a float (L, S)
    tensor was taken for scores)."""
    L, S = query.shape[-2], key.shape[-2]
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    key_t = key.transpose(-2, -1)
    m = torch.full(query.shape[:-1] + (1,), float("-inf"), dtype=query.dtype, device=query.device)
    l = torch.zeros_like(m)
    acc = query.new_zeros(query.shape[:-1] + (value.shape[-1],))
    for j0 in range(0, S, chunk_size):
        j1 = min(j0 + chunk_size, S)
        s = query @ key_t[..., j0:j1] * scale
        if is_causal:
            s = s.masked_fill(torch.arange(j0, j1, device=query.device)[None, :]
                              > torch.arange(L, device=query.device)[:, None],
                              float("-inf"))
        if attn_mask is not None:
            mk = attn_mask[..., j0:j1]
            s = s.masked_fill(~mk, float("-inf")) if mk.dtype == torch.bool else s + mk
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
        p, c = torch.exp(s - safe), torch.exp(m - safe)
        l, acc, m = l * c + p.sum(-1, keepdim=True), acc * c + p @ value[..., j0:j1, :], new
    out = acc / torch.where(l > 0, l, torch.ones_like(l))
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        allowed = attn_mask.to(query.dtype).sum(-1, keepdim=True)
        out = torch.where(allowed > 0, out, torch.zeros_like(out))
    return out


CHUNKED_RIGHT["keys transposed first, allowed keys counted"] = chunked_keys_transposed_first
KV_WRONG.update({
    "scaled by 1/sqrt(Ev)": (make_kv(scale_by="Ev"), "1/sqrt(Ev)"),
    "returns the output only": (make_kv(give="output"), "expected a tuple of 3"),
    "returns (output, (k, v))": (make_kv(give="nested"), "not nested in pairs"),
    "scale argument ignored": (make_kv(use_scale=False), "the scale argument ignored"),
})


# ----------------------------------------------------------------------------- attention_backward
def make_backward(scale_dq=True, scale_dk=True, delta="out", dk="dS^T", dv="P^T", weights="lse",
                  cast=None, mask="fill", use_scale=True):
    """A student's attention_backward; the switches put one mistake in (defaults: right).

    ``mask`` (with is_causal): "fill" (-inf in the scores before exp), "where" (torch.where on
    P), "mul" (P times the bool mask) are right; "none", "inverted", "dP only", "bottom right"
    and "strict" are the named mistakes; ``use_scale=False``: the scale argument ignored.
    """
    def attention_backward(query, key, value, out, lse, grad_out, is_causal=False, scale=None):
        c = scale if scale is not None and use_scale else query.shape[-1] ** -0.5
        x = [t.to(cast) for t in (query, key, value, out, lse, grad_out)] if cast else \
            [query, key, value, out, lse, grad_out]
        q, k, v, o, m, do = x
        s = q @ k.transpose(-1, -2)
        L, S = s.shape[-2:]
        causal = torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
        keep = {"fill": causal, "where": causal, "mul": causal, "dP only": causal,
                "inverted": ~causal, "strict": causal.tril(-1),
                "bottom right": torch.ones(L, S, dtype=torch.bool, device=q.device).tril(S - L),
                "none": None}[mask] if is_causal else None
        if keep is not None and mask == "fill":
            s = s.masked_fill(~keep, float("-inf"))
        if weights == "lse":
            p = torch.exp(c * s - m.unsqueeze(-1))
        elif weights == "no lse":
            p = torch.exp(c * s)
        elif weights == "lse unscaled":
            p = torch.exp(s - m.unsqueeze(-1))
        elif weights == "lse as is":
            p = torch.exp(c * s - m)
        elif weights == "softmax":  # honest: the weights recomputed, not read back through lse
            p = torch.softmax(c * s, dim=-1)
        else:
            p = torch.softmax(c * s, dim=-2)
        if keep is not None and mask in ("where", "inverted", "strict", "bottom right"):
            p = torch.where(keep, p, torch.zeros((), dtype=p.dtype, device=p.device))
        elif keep is not None and mask == "mul":
            p = p * keep
        dv_ = (p.transpose(-1, -2) if dv == "P^T" else p) @ do
        dp = do @ v.transpose(-1, -2)
        if keep is not None and mask == "dP only":
            dp = dp.masked_fill(~keep, 0.0)
        D = {"out": (do * o).sum(dim=-1, keepdim=True), "P*dP": (p * dp).sum(dim=-1, keepdim=True),
             "dP": dp.sum(dim=-1, keepdim=True), "flat": (do * o).sum(dim=-1),
             "none": 0.0}[delta]
        ds = p * (dp - D)
        dq_ = ds @ k * (c if scale_dq else 1.0)
        dk_ = (ds.transpose(-1, -2) if dk == "dS^T" else ds) @ q * (c if scale_dk else 1.0)
        grads = (dq_, dk_, dv_)
        return tuple(g.to(query.dtype) for g in grads) if cast else grads
    return attention_backward


def backward_einsum(query, key, value, out, lse, grad_out, is_causal=False, scale=None):
    """einsum throughout, the scale applied to the queries first, the mask as a -inf bias."""
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    L, S = query.shape[-2], key.shape[-2]
    bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
    if is_causal:
        bias = bias.masked_fill(torch.ones(L, S, dtype=torch.bool, device=query.device).triu(1), float("-inf"))
    s = torch.einsum("bhle,bhse->bhls", query * scale, key) + bias
    p = s.sub(lse[..., None]).exp()
    dv = torch.einsum("bhls,bhld->bhsd", p, grad_out)
    dp = torch.einsum("bhld,bhsd->bhls", grad_out, value)
    ds = p * (dp - torch.einsum("bhld,bhld->bhl", grad_out, out)[..., None])
    return (scale * torch.einsum("bhls,bhse->bhle", ds, key),
            scale * torch.einsum("bhls,bhle->bhse", ds, query), dv)


def backward_per_head(query, key, value, out, lse, grad_out, is_causal=False, scale=None):
    """A loop over batch and heads, 2-D matrices inside; the mask by comparing indices."""
    B, H = query.shape[:2]
    scale = scale or 1 / math.sqrt(query.shape[-1])
    dq, dk, dv = torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value)
    L, S = query.shape[-2], key.shape[-2]
    seen = torch.arange(S, device=query.device)[None, :] <= torch.arange(
        L, device=query.device)[:, None] if is_causal else None
    for b in range(B):
        for h in range(H):
            Q, K, V, O, dO = (t[b, h] for t in (query, key, value, out, grad_out))
            P = torch.exp(scale * Q @ K.T - lse[b, h][:, None])
            if seen is not None:
                P = P * seen.to(P.dtype)
            dv[b, h] = P.T @ dO
            dS = P * (dO @ V.T - (dO * O).sum(1, keepdim=True))
            dq[b, h] = scale * dS @ K
            dk[b, h] = scale * dS.T @ Q
    return dq, dk, dv


def backward_autograd(query, key, value, out, lse, grad_out, is_causal=False, scale=None):
    """Autograd does the work: passes, with a notice (a flag for a person)."""
    q, k, v = (t.detach().requires_grad_() for t in (query, key, value))
    c = scale if scale is not None else query.shape[-1] ** -0.5
    with torch.enable_grad():
        s = c * q @ k.transpose(-2, -1)
        if is_causal:
            s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril(), float("-inf"))
        o = torch.softmax(s, dim=-1) @ v
    return torch.autograd.grad(o, (q, k, v), grad_out)


def backward_vjp(query, key, value, out, lse, grad_out, is_causal=False, scale=None):
    """Right numbers through torch.func.vjp: a notice."""
    def forward(q, k, v):
        return qkv.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
    return torch.func.vjp(forward, query, key, value)[1](grad_out)


def backward_no_is_causal(query, key, value, out, lse, grad_out, scale=None):
    """The signature before is_causal: fails on the causal inputs."""
    return make_backward()(query, key, value, out, lse, grad_out, scale=scale)


BACKWARD_WRONG = {
    "no scale in dQ and dK": (make_backward(scale_dq=False, scale_dk=False),
                              "the scale forgotten in dQ and dK"),
    "no scale in dK": (make_backward(scale_dk=False), "the scale forgotten in dK"),
    "scale argument ignored": (make_backward(use_scale=False), "the scale argument ignored"),
    "D = rowsum(dP)": (make_backward(delta="dP"), "rowsum(dP) instead of rowsum(dO * O)"),
    "no D": (make_backward(delta="none"), "the row term D left out"),
    # Once named after lse[..., None] (both raise the same broadcast error on a batch).
    "D without keepdim": (make_backward(delta="flat"), "the row term D summed without keepdim"),
    "dK from dS": (make_backward(dk="dS"), "dK computed from dS instead of its transpose"),
    "dV from P": (make_backward(dv="P"), "dV computed from P instead of its transpose"),
    "exp(scores), no lse": (make_backward(weights="no lse"), "without subtracting lse"),
    "lse against unscaled scores": (make_backward(weights="lse unscaled"), "from unscaled scores"),
    "lse not unsqueezed": (make_backward(weights="lse as is"), "lse subtracted along the wrong axis"),
    "softmax over the queries": (make_backward(weights="dim-2"), "softmax over the queries"),
    "is_causal ignored": (make_backward(mask="none"), "is_causal ignored"),
    "mask inverted": (make_backward(mask="inverted"), "the causal mask inverted"),
    "mask on dP only": (make_backward(mask="dP only"), "applied to dP but not to P"),
    "mask bottom right": (make_backward(mask="bottom right"), "aligned to the bottom right"),
    "diagonal masked": (make_backward(mask="strict"), "the diagonal masked too"),
    "no is_causal argument": (backward_no_is_causal, "is_causal=False, scale=None"),
    "autograd": (backward_autograd, "called autograd (torch.autograd.grad, directly or "
                                    "through torch.func)"),
    "torch.func.vjp": (backward_vjp, "called autograd (torch.autograd.grad, directly or "
                                     "through torch.func)"),
}
BACKWARD_RIGHT = {
    "matmul": make_backward(),
    "mask by torch.where on P": make_backward(mask="where"),
    "mask by multiplying P by the bool mask": make_backward(mask="mul"),
    "D as rowsum(P * dP)": make_backward(delta="P*dP"),
    "weights by softmax": make_backward(weights="softmax"),
    "computed in float64, returned in the inputs' dtype": make_backward(cast=torch.float64),
    "einsum": backward_einsum,
    "a loop per head": backward_per_head,
}


# ----------------------------------------------------------------------------- sliding_kv_cache_step
def make_ring(slot="mod", seen="filled", attend_first=False, shift=False, scale_by="E",
              fill=float("-inf"), in_place=False):
    """A student's ring-buffer step; the switches put one mistake in (defaults: right)."""
    def sliding_kv_cache_step(query, key, value, k_ring, v_ring, pos, scale=None):
        W = k_ring.shape[-2]
        c = scale if scale is not None else (1.0 if scale_by == "none" else query.shape[-1] ** -0.5)
        if attend_first:  # attend to the old ring plus the new key, then write
            ks, vs = torch.cat([k_ring, key], -2), torch.cat([v_ring, value], -2)
            ok = torch.arange(W + 1, device=query.device)
            ok = (ok < min(pos, W)) | (ok == W)
        if shift:
            k_new, v_new = torch.cat([k_ring[..., 1:, :], key], -2), torch.cat([v_ring[..., 1:, :], value], -2)
            ok_new = torch.arange(W, device=query.device) >= W - 1 - pos
        else:
            i = {"mod": pos % W, "next": (pos + 1) % W, "clamp": min(pos, W - 1)}[slot]
            k_new, v_new = (k_ring, v_ring) if in_place else (k_ring.clone(), v_ring.clone())
            k_new[..., i, :] = key[..., 0, :]
            v_new[..., i, :] = value[..., 0, :]
            n = torch.arange(W, device=query.device)
            ok_new = {"filled": n <= pos, "all": n >= 0, "before": n < pos}[seen]
        if not attend_first:
            ks, vs, ok = k_new, v_new, ok_new
        s = (query @ ks.transpose(-2, -1) * c).masked_fill(~ok, fill)
        return torch.softmax(s, -1) @ vs, k_new, v_new
    return sliding_kv_cache_step


def ring_with_index_copy(query, key, value, k_ring, v_ring, pos, scale=None):
    """index_copy out of place, a float bias, the softmax written out."""
    W, E = k_ring.shape[-2], query.shape[-1]
    at = torch.tensor([pos % W], device=query.device)
    k_ring, v_ring = k_ring.index_copy(-2, at, key), v_ring.index_copy(-2, at, value)
    bias = torch.zeros(W, dtype=query.dtype, device=query.device)
    bias[pos + 1:] = float("-inf")  # slots not written yet (an empty slice once pos >= W - 1)
    s = torch.einsum("bhle,bhwe->bhlw", query, k_ring) * (scale or 1 / math.sqrt(E)) + bias
    w = (s - s.amax(-1, keepdim=True)).exp()
    return (w / w.sum(-1, keepdim=True)) @ v_ring, k_ring, v_ring


def ring_gather_window(query, key, value, k_ring, v_ring, pos, scale=None):
    """Writes slot pos % W with torch.where, then gathers the window's slots in time order."""
    W = k_ring.shape[-2]
    slots = torch.arange(W, device=query.device)[:, None]
    k_ring = torch.where(slots == pos % W, key, k_ring)
    v_ring = torch.where(slots == pos % W, value, v_ring)
    order = [t % W for t in range(max(0, pos - W + 1), pos + 1)]  # oldest to newest
    ks, vs = k_ring[..., order, :], v_ring[..., order, :]
    c = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    return torch.softmax(query @ ks.transpose(-2, -1) * c, dim=-1) @ vs, k_ring, v_ring


def ring_with_sdpa(query, key, value, k_ring, v_ring, pos, scale=None):
    """Right, through torch's attention (a notice)."""
    _, k_ring, v_ring = make_ring()(query, key, value, k_ring, v_ring, pos, scale)
    filled = torch.arange(k_ring.shape[-2], device=query.device)[None, :] <= pos
    return F.scaled_dot_product_attention(query, k_ring, v_ring, attn_mask=filled, scale=scale), k_ring, v_ring


RING_WRONG = {
    "slot (pos + 1) % W": (make_ring(slot="next"), "slot (pos + 1) % W instead of pos % W"),
    "never wraps": (make_ring(slot="clamp"), "a ring that never wraps"),
    "shifts with torch.cat": (make_ring(shift=True), "shifted with torch.cat"),
    "attends to empty slots": (make_ring(seen="all"), "slots not written yet attended to"),
    "own slot masked": (make_ring(seen="before"), "own slot masked"),
    "W + 1 keys": (make_ring(attend_first=True), "the window off by one"),
    "no scaling": (make_ring(scale_by="none"), "no scaling"),
    "-1e9 fill (overflows in float16)": (make_ring(fill=-1e9), "a finite fill like -1e9"),
    "written in place": (make_ring(in_place=True), "inputs modified in place"),
    "calls torch's attention": (ring_with_sdpa, "calls torch.nn.functional.scaled_dot_product_attention"),
}
RING_RIGHT = {
    "clone and write the slot": make_ring(),
    "index_copy and a float bias": ring_with_index_copy,
    "where, then the window gathered in time order": ring_gather_window,
}


def _chunked_with(query, key, value, chunk_size, scale, bias=None, mult=None):
    """The online softmax over chunks, with a whole (L, S) bias added or factor multiplied."""
    S = key.shape[-2]
    m = torch.full(query.shape[:-1] + (1,), float("-inf"), dtype=query.dtype, device=query.device)
    l = torch.zeros_like(m)
    acc = query.new_zeros(query.shape[:-1] + (value.shape[-1],))
    for j0 in range(0, S, chunk_size):
        j1 = min(j0 + chunk_size, S)
        s = query @ key[..., j0:j1, :].transpose(-2, -1) * scale
        if bias is not None:
            s = s + bias[..., j0:j1]
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
        p, c = torch.exp(s - safe), torch.exp(m - safe)
        if mult is not None:
            p = p * mult[..., j0:j1]
        l, acc, m = l * c + p.sum(-1, keepdim=True), acc * c + p @ value[..., j0:j1, :], new
    return torch.where(l > 0, acc / torch.where(l > 0, l, torch.ones_like(l)), torch.zeros_like(acc))


def _bias_of(query, attn_mask):
    if attn_mask is None or attn_mask.is_floating_point():
        return attn_mask
    return query.new_zeros(attn_mask.shape).masked_fill(~attn_mask, float("-inf"))


def chunked_bias_from_float_positions(query, key, value, attn_mask=None, is_causal=False,
                                      scale=None, chunk_size=256):
    """Right: the causal bias made whole from float positions (key - query > 0), and queries
    with no allowed key found by the logsumexp of the bias (both refused as "the whole score
    matrix" once: a float (L, S) made from two vectors, and an exp over a bias, were taken for
    scores; the watch now follows only what is computed from the query and the key)."""
    L, S = query.shape[-2], key.shape[-2]
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    bias = _bias_of(query, attn_mask)
    if is_causal:
        rel = (torch.arange(S, dtype=query.dtype, device=query.device)
               - torch.arange(L, dtype=query.dtype, device=query.device)[:, None])
        bias = torch.zeros_like(rel).masked_fill(rel > 0, float("-inf"))
    out = _chunked_with(query, key, value, chunk_size, scale, bias)
    if bias is not None:
        out = out.masked_fill(torch.logsumexp(bias, -1, keepdim=True) == float("-inf"), 0.0)
    return out


def chunked_mask_as_factor(query, key, value, attn_mask=None, is_causal=False, scale=None,
                           chunk_size=256):
    """Right: the mask as a factor of exp(s), exp(s + b) = exp(s) * exp(b): a bool mask's 0/1
    copy, a float mask's exp (refused once: an exp over a whole (L, S) mask)."""
    L, S = query.shape[-2], key.shape[-2]
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    mult = None
    if attn_mask is not None:
        mult = attn_mask.to(query.dtype) if attn_mask.dtype == torch.bool else attn_mask.exp()
    if is_causal:
        mult = torch.ones(L, S, dtype=query.dtype, device=query.device).tril()
    return _chunked_with(query, key, value, chunk_size, scale, mult=mult)


CHUNKED_RIGHT["causal bias from float positions, no-key rows by logsumexp"] = \
    chunked_bias_from_float_positions
CHUNKED_RIGHT["the mask as a factor of exp(s)"] = chunked_mask_as_factor


def chunked_bias_like_the_query(query, key, value, attn_mask=None, is_causal=False, scale=None,
                                chunk_size=256):
    """Right: as chunked_bias_from_float_positions, the query's dtype and device taken with
    .to(query) and query.new_zeros (refused once: the query as a template counted as the
    bias's source, and the bias's logsumexp as scores)."""
    L, S = query.shape[-2], key.shape[-2]
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    bias = None if attn_mask is None else attn_mask.to(query)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        bias = query.new_zeros(attn_mask.shape).masked_fill(~attn_mask, float("-inf"))
    if is_causal:
        rel = (torch.arange(S) - torch.arange(L)[:, None]).to(query)
        bias = torch.zeros_like(rel).masked_fill(rel > 0, float("-inf"))
    out = _chunked_with(query, key, value, chunk_size, scale, bias)
    if bias is not None:
        out = out.masked_fill(torch.logsumexp(bias, -1, keepdim=True) == float("-inf"), 0.0)
    return out


CHUNKED_RIGHT["the bias's dtype from .to(query) and query.new_zeros"] = chunked_bias_like_the_query
