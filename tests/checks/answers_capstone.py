"""Student answers for the capstone checks (attention_forward, block_forward), written as a
student would: plain torch and the pieces of earlier assignments imported from qkv. Each
``make_*`` switch turns one known mistake on; with none the answer is right."""

import math

import torch
import torch.nn.functional as F

from qkv import apply_rope, merge_heads, random_block_params, repeat_kv, rms_norm, split_heads

qkv_rms_norm = rms_norm


def make_attention(mask="bottom_right", cache="after", rope="offset", repeat="interleave",
                   scale=True, return_old=False, cache_repeated=False, merge="heads",
                   out_proj=True):
    def attention_forward(x, params, num_heads, num_kv_heads, k_cache=None, v_cache=None):
        q = split_heads(x @ params["q_proj.weight"].T, num_heads)
        k = split_heads(x @ params["k_proj.weight"].T, num_kv_heads)
        v = split_heads(x @ params["v_proj.weight"].T, num_kv_heads)
        P = 0 if k_cache is None else k_cache.shape[-2]
        if rope not in ("none", "after_cat"):
            off = P if rope == "offset" else 0
            q = apply_rope(q, offset=off)
            k = k if rope == "q_only" else apply_rope(k, offset=off)  # q_only: keys unrotated
            v = apply_rope(v, offset=off) if rope == "qkv" else v  # qkv: the values too
        if k_cache is not None and cache == "after":
            k, v = torch.cat([k_cache, k], dim=-2), torch.cat([v_cache, v], dim=-2)
        elif k_cache is not None and cache == "before":
            k, v = torch.cat([k, k_cache], dim=-2), torch.cat([v, v_cache], dim=-2)
        if rope == "after_cat":  # the whole key cache rotated again, from position 0
            q, k = apply_rope(q, offset=P), apply_rope(k)
        G = num_heads // num_kv_heads
        kr, vr = (repeat_kv(k, G), repeat_kv(v, G)) if repeat == "interleave" else \
            (k.repeat(1, G, 1, 1), v.repeat(1, G, 1, 1))
        L, S = q.shape[-2], k.shape[-2]
        scores = q @ kr.transpose(-2, -1)
        if scale:  # "D": by the model's width, not a head's
            scores = scores / math.sqrt(x.shape[-1] if scale == "D" else q.shape[-1])
        if mask != "none":
            allowed = torch.ones(L, S, dtype=torch.bool, device=x.device).tril(S - L if mask == "bottom_right" else 0)
            scores = scores.masked_fill(~allowed, float("-inf"))
        o = torch.softmax(scores, dim=-1) @ vr
        # merge="reshape": the heads merged without the transpose
        out = o.reshape(x.shape[0], L, -1) if merge == "reshape" else merge_heads(o)
        out = out @ params["out_proj.weight"].T if out_proj else out
        if return_old and k_cache is not None:
            return out, k_cache, v_cache
        return (out, kr, vr) if cache_repeated else (out, k, v)
    return attention_forward


attention_forward = make_attention()  # what the block's answers call (the check swaps in the course's)


def make_block(arrangement="pre", attn_residual=True, mlp_residual=True, norms="own", act="gelu",
               normed=(), norm_kind="rms", mlp_input="norm2"):
    def block_forward(x, params, num_heads, num_kv_heads):
        def norm(kinds):  # LayerNorm where norm_kind is one of kinds (its bias left at 0)
            return lambda t, w: F.layer_norm(t, t.shape[-1:], w) if norm_kind in kinds else \
                qkv_rms_norm(t, w)
        rms_norm = norm(("layer",))
        norm_a, norm_m = norm(("layer", "layer_attn")), norm(("layer", "layer_mlp"))

        n1, n2 = params["norm1.weight"], params["norm2.weight"]
        if norms == "swapped":
            n1, n2 = n2, n1
        elif norms in ("norm1", "norm2"):  # one gain copied for both
            n1 = n2 = params[f"{norms}.weight"]
        attn_params = {n[5:]: t for n, t in params.items() if n.startswith("attn.")}
        f = {"gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu,
             "relu": F.relu, "none": lambda t: t}[act]

        def attn(h):
            return attention_forward(h, attn_params, num_heads, num_kv_heads)[0]

        def mlp(h):
            return f(h @ params["mlp.up.weight"].T) @ params["mlp.down.weight"].T

        if arrangement == "post":
            x = rms_norm(x + attn(x), n1)
            return rms_norm(x + mlp(x), n2)
        if arrangement == "parallel":
            return x + attn(rms_norm(x, n1)) + mlp(rms_norm(x, n2))
        if "attn" in normed:  # the stream replaced by its normalised copy
            x = h1 = norm_a(x, n1)
        else:
            h1 = norm_a(x, n1)
        a = attn(h1)
        x = x + a if attn_residual else a
        if "mlp" in normed:
            x = norm_m(x, n2)
            m = mlp(x)
        elif mlp_input == "stream":  # norm2 left out
            m = mlp(x)
        elif mlp_input == "norm1":  # the attention's input again
            m = mlp(h1)
        else:
            m = mlp(norm_m(x, n2))
        return x + m if mlp_residual else m
    return block_forward


# ----------------------------------------------------------------------------- beyond the page
def make_dropout_block(residual="stream", mask="causal", scale=True, eval_dropout=(),
                       own_dropout=False, rescale=True, no_dropout=(), keep_with_p=False,
                       drop_at=("attn", "mlp"), act="gelu", fixed_rate=None):
    """The debugging exercise's block, written as a student would, with the printed bugs (and a
    few wrong fixes) as switches; ``own_dropout``: an honest variant that drops with
    ``torch.rand`` itself (``if training``) instead of ``F.dropout``; ``rescale=False`` the
    same without dividing the kept entries by ``1 - dropout``; ``keep_with_p``: its own
    dropout with the comparison turned round (each entry kept with probability dropout);
    ``drop_at``: where each sublayer's dropout goes (its output, "weights", "hidden", or the
    stream after its residual addition, "attn stream" / "mlp stream"); ``act="gelu_tanh"``:
    GPT-2's GELU (F.gelu(..., approximate="tanh")); ``fixed_rate``: a rate written in, the
    dropout argument ignored."""
    def dropout_block_forward(x, params, num_heads, dropout=0.1, training=False):
        dropout = dropout if fixed_rate is None else fixed_rate
        L, E = x.shape[-2], x.shape[-1] // num_heads
        h = rms_norm(x, params["norm1.weight"])
        if residual == "normed":
            x = h
        inp = x if residual == "post" else h
        q = split_heads(inp @ params["attn.q_proj.weight"].T, num_heads)
        k = split_heads(inp @ params["attn.k_proj.weight"].T, num_heads)
        v = split_heads(inp @ params["attn.v_proj.weight"].T, num_heads)
        ones = torch.ones(L, L, dtype=torch.bool, device=x.device)
        allowed = {"causal": ones.tril(), "inverted": ones.triu(), "none": ones}[mask]
        scores = q @ k.transpose(-2, -1)
        if scale:
            scores = scores / math.sqrt(E)
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)

        def drop(t, where):
            if where in no_dropout or where not in drop_at + ("attn", "mlp"):
                return t
            if not rescale and training:
                return t * (torch.rand(t.shape, device=t.device) >= dropout)
            if keep_with_p and training:
                return t * (torch.rand(t.shape, device=t.device) < dropout) / (1 - dropout)
            if own_dropout:
                if not training or dropout == 0:
                    return t
                keep = torch.rand(t.shape, device=t.device) >= dropout
                return t * keep / (1 - dropout) if dropout < 1 else t * 0
            return F.dropout(t, dropout, training or where in eval_dropout)

        if "weights" in drop_at:
            weights = drop(weights, "weights")
        a = merge_heads(weights @ v) @ params["attn.out_proj.weight"].T
        if "attn stream" in drop_at:
            x = drop(x + a, "attn stream")
        else:
            x = x + (drop(a, "attn") if "attn" in drop_at else a)
        if residual == "post":
            x = rms_norm(x, params["norm1.weight"])
        h = x if residual == "post" else rms_norm(x, params["norm2.weight"])
        hidden = F.gelu(h @ params["mlp.up.weight"].T,
                        approximate="tanh" if act == "gelu_tanh" else "none")
        if "hidden" in drop_at:
            hidden = drop(hidden, "hidden")
        m = hidden @ params["mlp.down.weight"].T
        if "mlp stream" in drop_at:
            x = drop(x + m, "mlp stream")
        else:
            x = x + (drop(m, "mlp") if "mlp" in drop_at else m)
        return rms_norm(x, params["norm2.weight"]) if residual == "post" else x
    return dropout_block_forward


#: The printed block, as the assignment prints it (its three bugs).
buggy_dropout_block = make_dropout_block(residual="normed", mask="inverted", eval_dropout=("attn",))
dropout_block_forward = make_dropout_block()


def swiglu_mlp(h, params):
    gate = h @ params["gate.weight"].T
    return (F.silu(gate) * (h @ params["up.weight"].T)) @ params["down.weight"].T


def swiglu_mlp_linear(h, params):
    """An honest variant: F.linear and x * sigmoid(x)."""
    gate = F.linear(h, params["gate.weight"])
    return F.linear(gate * torch.sigmoid(gate) * F.linear(h, params["up.weight"]),
                    params["down.weight"])


def order_sensitivity(num_layers, rope, generator, size="norm", reuse=""):
    """The experiment, or a slip a walk found passing (``size``: "after", the shuffled output's
    norm, or "l1", mean absolute values; ``reuse``: one block's weights, drawn "once" or the
    "first" of those drawn)."""
    x = torch.randn(1, 16, 32, generator=generator)
    if reuse == "once":
        layers = [random_block_params(32, 4, generator=generator)] * num_layers
    else:
        layers = [random_block_params(32, 4, generator=generator) for _ in range(num_layers)]
        layers = [layers[0]] * num_layers if reuse == "first" else layers
    order = torch.randperm(15, generator=generator)
    shuffled = torch.cat([x[:, order], x[:, 15:]], dim=1)

    def last(h):
        for p in layers:
            h = block_forward(h, p, 4, 4) if rope else dropout_block_forward(h, p, 4, 0.0)
        return h[0, -1]

    before, after = last(x), last(shuffled)
    if size == "after":
        return ((after - before).norm() / after.norm()).item()
    if size == "l1":
        return ((after - before).abs().mean() / before.abs().mean()).item()
    return ((after - before).norm() / before.norm()).item()


block_forward = make_block()
