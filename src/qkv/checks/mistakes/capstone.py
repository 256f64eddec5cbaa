"""The capstone's wrong versions: the attention sublayer and the pre-norm block with one
switch turned, each computing what a student who made that mistake would get (the defaults
are the right answer)."""

from __future__ import annotations

import math
from functools import partial
from typing import Dict

import torch
import torch.nn.functional as F
from torch import Tensor

import qkv

from ..harness import ExerciseRule

__all__: list = []


def attention_variant(x, params, num_heads, num_kv_heads=None, k_cache=None, v_cache=None, *,
                      mask="bottom_right", cache="after", rope="offset", repeat="interleave",
                      scale=True, return_old=False, cache_repeated=False, merge="heads",
                      out_proj=True):
    """The attention sublayer with one switch turned from the right answer (the defaults);
    ``rope="after_cat"``: the keys rotated after the cache is appended (the cached ones twice),
    ``"q_only"``: the queries rotated, the keys not, ``"qkv"``: the values rotated too;
    ``merge="reshape"``: the heads merged by ``(weights @ v).reshape(B, L, -1)``, without
    moving the heads' axis next to the width first; ``out_proj=False``: no output projection;
    ``scale``: ``True`` (by 1/sqrt(E)), ``False`` (none) or ``"D"`` (by 1/sqrt(D), the model's
    width)."""
    Hkv = num_kv_heads or num_heads
    G = num_heads // Hkv
    q = qkv.split_heads(x @ params["q_proj.weight"].T, num_heads)
    k = qkv.split_heads(x @ params["k_proj.weight"].T, Hkv)
    val = qkv.split_heads(x @ params["v_proj.weight"].T, Hkv)
    P = 0 if k_cache is None else k_cache.shape[-2]
    if rope not in ("none", "after_cat"):
        offset = P if rope == "offset" else 0
        q = qkv.apply_rope(q, offset=offset)
        k = k if rope == "q_only" else qkv.apply_rope(k, offset=offset)
        val = qkv.apply_rope(val, offset=offset) if rope == "qkv" else val
    if k_cache is not None and cache == "after":
        k, val = torch.cat([k_cache, k], -2), torch.cat([v_cache, val], -2)
    elif k_cache is not None and cache == "before":
        k, val = torch.cat([k, k_cache], -2), torch.cat([val, v_cache], -2)
    # cache == "ignored": the new positions attend to themselves only
    if rope == "after_cat":  # every key rotated from position 0: the cached ones a second time
        q, k = qkv.apply_rope(q, offset=P), qkv.apply_rope(k)
    spread = (lambda t: t.repeat_interleave(G, dim=-3)) if repeat == "interleave" else \
        (lambda t: t.repeat(1, G, 1, 1))
    kr, vr = spread(k), spread(val)
    L, S = q.shape[-2], k.shape[-2]
    width = {True: q.shape[-1], "D": x.shape[-1], False: 1}[scale]
    scores = q @ kr.transpose(-2, -1) / math.sqrt(width)
    diagonal = {"bottom_right": S - L, "top_left": 0, "none": S}[mask]
    allowed = torch.ones(L, S, dtype=torch.bool, device=x.device).tril(diagonal)
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1)
    heads = weights @ vr
    out = heads.reshape(x.shape[0], L, -1) if merge == "reshape" else qkv.merge_heads(heads)
    out = out @ params["out_proj.weight"].T if out_proj else out
    if return_old and k_cache is not None:
        return out, k_cache, v_cache
    return (out, kr, vr) if cache_repeated else (out, k, val)


def _part(params: Dict[str, Tensor], prefix: str) -> Dict[str, Tensor]:
    return {n[len(prefix):]: t for n, t in params.items() if n.startswith(prefix)}


def _layer_norm(x: Tensor, weight: Tensor) -> Tensor:
    """LayerNorm with ``weight`` as its gain and no bias, as ``F.layer_norm`` takes it."""
    return F.layer_norm(x, x.shape[-1:], weight)


def block_variant(x, params, num_heads, num_kv_heads=None, *, arrangement="pre",
                  attn_residual=True, mlp_residual=True, norms="own", act="gelu",
                  normed=(), norm_kind="rms", mlp_input="norm2"):
    """The pre-norm block with one switch turned from the right answer (the defaults);
    ``norms``: ``"swapped"``, or one norm's gain for both (``"norm1"``, ``"norm2"``);
    ``act``: the MLP's activation, ``"gelu"`` (right), ``"gelu_tanh"`` (GPT-2's tanh
    approximation), ``"silu"``, ``"relu"`` or ``"none"``; ``norm_kind="layer"``: LayerNorm
    (``F.layer_norm`` with the gain as its weight) instead of RMSNorm, ``"layer_attn"`` /
    ``"layer_mlp"``: for that sublayer's norm only; ``mlp_input``: what the MLP reads,
    ``"norm2"`` (right), ``"stream"`` (the stream after the attention, not normalised),
    ``"norm1"`` (norm1 of the block's input, the attention's input again);
    ``normed``: the sublayers (``"attn"``, ``"mlp"``) before which the stream is replaced by
    its normalised copy (``x = rms_norm(x, ...)``), so that the residual adds to it."""
    n1, n2 = params["norm1.weight"], params["norm2.weight"]
    n1, n2 = {"own": (n1, n2), "swapped": (n2, n1), "norm1": (n1, n1), "norm2": (n2, n2)}[norms]
    norm = qkv.rms_norm if norm_kind == "rms" else _layer_norm
    norm_a = _layer_norm if norm_kind in ("layer", "layer_attn") else qkv.rms_norm
    norm_m = _layer_norm if norm_kind in ("layer", "layer_mlp") else qkv.rms_norm
    sub = _part(params, "attn.")
    attn = lambda h: qkv.attention_forward(h, sub, num_heads, num_kv_heads)[0]  # noqa: E731
    activation = {"gelu": F.gelu, "gelu_tanh": partial(F.gelu, approximate="tanh"), "silu": F.silu,
                  "relu": F.relu, "none": lambda t: t}[act]
    mlp = lambda h: activation(h @ params["mlp.up.weight"].T) @ params["mlp.down.weight"].T  # noqa: E731
    if arrangement == "post":
        x = norm(x + attn(x), n1)
        return norm(x + mlp(x), n2)
    if arrangement == "parallel":
        return x + attn(norm(x, n1)) + mlp(norm(x, n2))
    if "attn" in normed:
        x = norm_a(x, n1)
    h1 = x if "attn" in normed else norm_a(x, n1)
    a = attn(h1)
    x = x + a if attn_residual else a
    if "mlp" in normed:
        x = norm_m(x, n2)
    h2 = x if "mlp" in normed else norm_m(x, n2)
    m = mlp({"norm2": h2, "stream": x, "norm1": h1}[mlp_input])
    return x + m if mlp_residual else m


# ----------------------------------------------------------------- beyond the page
#: The seed of torch's random state while a dropout block runs: a dropout left on in eval
#: then drops the same features in the student's block and in the catalogue's, so the check
#: can name it. The caller's random state is put back afterwards.
DROPOUT_SEED = 1234


def seeded(fn, *args, _seed: int = DROPOUT_SEED, **kwargs):
    """``fn(*args, **kwargs)`` with torch's random state at :data:`DROPOUT_SEED` (or ``_seed``),
    the caller's state restored afterwards (on the CPU and on the input's CUDA device)."""
    x = args[0] if args else None
    cuda = [x.device.index or 0] if isinstance(x, Tensor) and x.is_cuda else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(_seed)
        return fn(*args, **kwargs)


def dropout_view(fn, x, params, num_heads, dropout=0.1, training=False):
    """What the check compares of a block with dropout: its output, from :func:`seeded`; but in
    training with ``0 < dropout < 1``, which entries are dropped depends on how the dropout
    draws, so the check compares what does not: the factor the kept entries were scaled by.

    That case zeroes the MLP's output matrix, so the block adds only the attention's output;
    the factor is ``(out - x) / (out_eval - x)`` at each entry kept (``1 / (1 - dropout)`` for
    torch's dropout; 1 for one that does not rescale), and at a dropped entry the mean of those;
    0 throughout when the output in training is the one in eval (no dropout in training). When
    more than twice ``dropout`` of the entries are dropped (a right dropout of these 192 or 256
    entries stays 8 standard deviations below that), the view is that share in units of
    ``dropout``, rounded, everywhere: 3 for a dropout that keeps each entry with probability
    ``dropout`` instead of dropping it.
    """
    out = seeded(fn, x, params, num_heads, dropout=dropout, training=training)
    if not (training and 0 < dropout < 1 and isinstance(out, Tensor) and out.shape == x.shape):
        return out
    # Another seed: a dropout left on in eval must not drop the same entries as in training.
    still = seeded(fn, x, params, num_heads, dropout=dropout, training=False, _seed=DROPOUT_SEED + 1)
    if not (isinstance(still, Tensor) and still.shape == x.shape):
        return out
    moved, still = out - x, still - x
    kept = moved != 0
    factor = moved / still
    if torch.equal(moved, still):  # the same output in training as in eval
        return torch.zeros_like(factor)
    # A dropout that seeds torch itself (torch.manual_seed inside) drops the same entries at
    # every call: a model trained with it drops the same features at every step.
    again = seeded(fn, x, params, num_heads, dropout=dropout, training=True, _seed=DROPOUT_SEED + 2)
    if isinstance(again, Tensor) and torch.equal(again, out):
        raise ExerciseRule(
            "in training, it dropped the same entries whatever torch's random state was",
            "draw the dropout from torch's random state as it is (F.dropout, or "
            "torch.rand_like): a torch.manual_seed inside the block makes every training "
            "step drop the same features")
    dropped = 1.0 - float(kept.double().mean())
    if dropped > 2 * dropout:
        return torch.full_like(factor, float(round(dropped / dropout)))
    return factor.where(kept, factor[kept].mean())


def viewed_block_variant(x, params, num_heads, dropout=0.1, training=False, **switches):
    """What the check compares (:func:`dropout_view`) of :func:`dropout_block_variant` with
    ``switches`` turned."""
    return dropout_view(partial(dropout_block_variant, **switches), x, params, num_heads,
                        dropout=dropout, training=training)


def dropout_block_variant(x, params, num_heads, dropout=0.1, training=False, *,
                          residual="stream", mask="causal", scale=True, eval_dropout=(),
                          rescale=True, no_dropout=(), keep_with_p=False,
                          drop_at=("attn", "mlp"), act="gelu", fixed_rate=None):
    """The pre-norm block without positions, with dropout, with bugs put back (the defaults
    are the right answer): ``residual="normed"`` (the stream replaced by its normalised copy
    before the attention), ``"post"`` (post-norm); ``mask="inverted"`` (``triu``),
    ``"none"``; ``scale=False``; ``eval_dropout``, the sublayers (``"attn"``, ``"mlp"``)
    whose dropout stays on in eval; ``rescale=False`` (the kept entries not divided by
    ``1 - dropout``); ``no_dropout``, the sublayers whose dropout is left out (in training
    too; both: dropout removed); ``keep_with_p``: each entry kept with probability
    ``dropout`` (and divided by 1 - dropout) instead of dropped with it; ``drop_at``, where
    each sublayer's dropout goes: ``"attn"``/``"mlp"`` its output (right), ``"weights"`` the
    attention weights, ``"hidden"`` the MLP's hidden layer, ``"attn stream"``/``"mlp stream"``
    the stream after its residual addition; ``act="gelu_tanh"``: GELU's tanh approximation
    (GPT-2's) in the MLP; ``fixed_rate``: the rate each dropout uses whatever ``dropout`` is
    (the argument ignored, a number written in)."""
    E = x.shape[-1] // num_heads
    L = x.shape[-2]
    w = params
    h = qkv.rms_norm(x, w["norm1.weight"])
    if residual == "normed":
        x = h
    inp = x if residual == "post" else h
    q, k, val = (qkv.split_heads(inp @ w[f"attn.{n}_proj.weight"].T, num_heads) for n in "qkv")
    ones = torch.ones(L, L, dtype=torch.bool, device=x.device)
    allowed = {"causal": ones.tril(), "inverted": ones.triu(), "none": ones}[mask]
    scores = q @ k.transpose(-2, -1) / (math.sqrt(E) if scale else 1.0)
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)

    rate = dropout if fixed_rate is None else fixed_rate

    def drop(t, sublayer, at=None):
        if (at or sublayer) not in drop_at:
            return t
        on = (training or sublayer in eval_dropout) and sublayer not in no_dropout
        if keep_with_p and on:
            return t * (torch.rand_like(t) < rate) / (1 - rate)
        kept = F.dropout(t, rate, training=on)
        return kept if rescale or not on else kept * (1 - rate)

    a = qkv.merge_heads(drop(weights, "attn", "weights") @ val) @ w["attn.out_proj.weight"].T
    x = drop(x + drop(a, "attn"), "attn", "attn stream")
    if residual == "post":
        x = qkv.rms_norm(x, w["norm1.weight"])
    h = x if residual == "post" else qkv.rms_norm(x, w["norm2.weight"])
    gelu = partial(F.gelu, approximate="tanh") if act == "gelu_tanh" else F.gelu
    m = drop(gelu(h @ w["mlp.up.weight"].T), "mlp", "hidden") @ w["mlp.down.weight"].T
    x = drop(x + drop(m, "mlp"), "mlp", "mlp stream")
    return qkv.rms_norm(x, w["norm2.weight"]) if residual == "post" else x


def swiglu_variant(h, params, *, act="silu", gated="gate", combine="product"):
    """SwiGLU's MLP, ``(silu(h W_gate^T) * h W_up^T) W_down^T``, with one switch turned (the
    defaults are the right answer): ``act`` the gate's activation (``"gelu"``, ``"sigmoid"``,
    ``"relu"``); ``gated="up"`` (the activation on the up projection), ``"none"`` (no gate:
    ``silu(h W_up^T) W_down^T``); ``combine="sum"`` (added, not multiplied), ``"inside"``
    (the activation applied to the product)."""
    f = {"silu": F.silu, "gelu": F.gelu, "sigmoid": torch.sigmoid, "relu": F.relu}[act]
    g, u = h @ params["gate.weight"].T, h @ params["up.weight"].T
    if gated == "up":
        g, u = u, g
    if gated == "none":
        hidden = f(u)
    elif combine == "sum":
        hidden = f(g) + u
    elif combine == "inside":
        hidden = f(g * u)
    else:
        hidden = f(g) * u
    return hidden @ params["down.weight"].T
