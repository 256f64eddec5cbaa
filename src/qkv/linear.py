"""Linear attention with a kernel feature map (Katharopoulos et al. 2020), chapter 9.

Softmax attention weighs key ``j`` for query ``i`` by ``exp(q_i . k_j)``. Replace that
similarity by a dot product of features, ``phi(q_i) . phi(k_j)`` with ``phi(x) =
elu(x) + 1 > 0``, and the output

    o_i = sum_j (phi(q_i) . phi(k_j)) v_j / sum_j phi(q_i) . phi(k_j)
        = phi(q_i) (sum_j phi(k_j)^T v_j) / phi(q_i) (sum_j phi(k_j))

needs only the ``E x Ev`` matrix ``sum_j phi(k_j)^T v_j`` and the vector ``sum_j phi(k_j)``,
computed once: the cost grows as ``n``, not ``n^2``. It is a different function from
softmax attention, not an approximation that converges to it.

:func:`linear_attention_weights` builds the same weights explicitly (the quadratic form),
so that the two can be compared, and plotted.
"""

from __future__ import annotations

from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from . import _validate as v

__all__ = ["elu_feature_map", "linear_attention", "linear_attention_weights"]

_LEGEND = "query (..., L, E), key (..., S, E), value (..., S, Ev)"
FeatureMap = Callable[[Tensor], Tensor]


def elu_feature_map(x: Tensor) -> Tensor:
    """``elu(x) + 1``: Katharopoulos et al.'s feature map, positive everywhere.

    Positive features make every weight positive, as softmax's are, so the
    normaliser never vanishes.

    Shape:
        - x, output: any, the same
    """
    v.require_float_tensor("x", x)
    return F.elu(x) + 1


def _check(query: Tensor, key: Tensor, value: Optional[Tensor], is_causal: bool,
           feature_map: FeatureMap, eps: object) -> None:
    names = ("query", "key") if value is None else ("query", "key", "value")
    tensors = (query, key) if value is None else (query, key, value)
    v.check_attention_inputs(names, tensors, _LEGEND)
    v.require_callable("feature_map", feature_map)
    v.require_finite_number("eps", eps)  # added to the normaliser
    v.require_flag("is_causal", is_causal)
    if is_causal and query.shape[-2] != key.shape[-2]:
        raise ValueError(f"is_causal=True needs as many queries as keys (L == S), got query "
                         f"{v.shape_str(query)} and key {v.shape_str(key)}")


def linear_attention_weights(
    query: Tensor,
    key: Tensor,
    is_causal: bool = False,
    feature_map: FeatureMap = elu_feature_map,
    eps: float = 1e-6,
) -> Tensor:
    """The weights linear attention uses, written out as an ``(L, S)`` matrix (the quadratic form).

    ``w_ij = phi(q_i) . phi(k_j) / (sum_j' phi(q_i) . phi(k_j') + eps)``, with
    ``j, j' <= i`` when causal. ``weights @ value`` equals :func:`linear_attention`.

    Args:
        query: queries.
        key: keys.
        is_causal: query ``i`` sees keys ``0..i`` (needs ``L == S``).
        feature_map: ``phi``, applied to every query and key vector.
        eps: added to each row's normaliser (as in the paper's code).

    Returns:
        The weights; each row sums to (just under) one.

    Shape:
        - query: ``(..., L, E)``, key: ``(..., S, E)``
        - output: ``(..., L, S)``
    """
    _check(query, key, None, is_causal, feature_map, eps)
    batch = v.broadcast_shapes(query.shape[:-2], key.shape[:-2])
    v.require_fits("the (..., L, S) weights", (*batch, query.shape[-2], key.shape[-2]), query.dtype,
                   query.device)
    sim = feature_map(query) @ feature_map(key).transpose(-2, -1)
    if is_causal:
        sim = sim.tril()
    return sim / (sim.sum(dim=-1, keepdim=True) + eps)


def linear_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    is_causal: bool = False,
    feature_map: FeatureMap = elu_feature_map,
    eps: float = 1e-6,
    chunk_size: int = 64,
) -> Tensor:
    """Linear attention: ``phi(Q) (phi(K)^T V)``, normalised, in time and memory linear in ``n``.

    Non-causal: the sums over all keys are formed once. Causal: query ``i`` needs the
    sums over keys ``0..i`` only, so the keys are visited a chunk at a time, carrying
    the running sums (the *state*, ``E x Ev`` numbers, an RNN's hidden state) from one
    chunk to the next; inside a chunk the weights are formed explicitly, which costs
    ``chunk_size^2`` per chunk.

    Args:
        query: queries.
        key: keys.
        value: values.
        is_causal: query ``i`` sees keys ``0..i`` (needs ``L == S``).
        feature_map: ``phi``; default ``elu(x) + 1``.
        eps: added to the normaliser.
        chunk_size: positions per chunk when causal.

    Returns:
        The output, equal to ``linear_attention_weights(...) @ value``.

    Shape:
        - query: ``(..., L, E)``, key: ``(..., S, E)``, value: ``(..., S, Ev)``
        - output: ``(..., L, Ev)``
    """
    v.require_tensor("value", value)  # _check reads None as "no values" (the weights alone)
    _check(query, key, value, is_causal, feature_map, eps)
    v.require_int("chunk_size", chunk_size)
    fq, fk = feature_map(query), feature_map(key)
    if not is_causal:
        state = fk.transpose(-2, -1) @ value  # (..., E, Ev): every key and value, summed once
        norm = fk.sum(dim=-2, keepdim=True).transpose(-2, -1)  # (..., E, 1)
        return (fq @ state) / (fq @ norm + eps)
    batch = v.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    n, E, Ev = query.shape[-2], fk.shape[-1], value.shape[-1]
    state = torch.zeros(*batch, E, Ev, dtype=fq.dtype, device=query.device)
    norm = torch.zeros(*batch, E, 1, dtype=fq.dtype, device=query.device)
    out = []
    for i0 in range(0, n, chunk_size):
        rows = slice(i0, i0 + chunk_size)
        q, k, val = fq[..., rows, :], fk[..., rows, :], value[..., rows, :]
        inside = (q @ k.transpose(-2, -1)).tril()  # this chunk's own keys, causally
        num = q @ state + inside @ val
        den = q @ norm + inside.sum(dim=-1, keepdim=True)
        out.append(num / (den + eps))
        # Carry the chunk's keys and values forward: the state of everything seen so far.
        state = state + k.transpose(-2, -1) @ val
        norm = norm + k.sum(dim=-2, keepdim=True).transpose(-2, -1)
    return torch.cat(out, dim=-2)
