"""Recurrence, convolution and self-attention compared by measurement (chapter 9).

Vaswani et al. (2017, table 1) compare layer types by two numbers besides their cost:
the *sequential operations* (how many steps must run one after another, whatever the
hardware) and the *maximum path length* (how many steps a signal crosses between the
two farthest positions). Both are measured here on real layers instead of asserted:

- :func:`sequential_steps` is the longest chain in the autograd graph of a result: the
  operations on that chain depend on each other, so no machine can run them at once;
- :func:`path_length` finds, by gradient probes, the fewest hops (stacked layers, or
  recurrent steps through which the gradient may flow) that connect the first input to
  the last output.

:func:`recurrent`, :func:`convolutional` and :func:`self_attention_stack` build the
layers, as ``forward(x, hops)`` functions with seeded random weights.
"""

from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from . import _validate as v
from .masking import causal_mask, sliding_window_mask
from .scaling import scaled_dot_product_attention

__all__ = [
    "convolutional",
    "path_length",
    "recurrent",
    "self_attention_stack",
    "sequential_steps",
]

#: ``forward(x, hops) -> y`` with ``x`` and ``y`` of shape ``(n, d)``.
Forward = Callable[[Tensor, int], Tensor]


def sequential_steps(output: Tensor) -> int:
    """Length of the longest chain of operations in the autograd graph that made ``output``.

    Each node of the graph is one operation; a node can run only after the nodes it
    consumes. The longest chain is a lower bound on the time of any schedule, however
    many processors there are.

    Args:
        output: a tensor computed from inputs that require grad.

    Returns:
        The number of operations on the longest chain (0 for a leaf).
    """
    v.require_tensor("output", output)
    depth: Dict[object, int] = {}
    stack = [(output.grad_fn, False)] if output.grad_fn is not None else []
    # Iterative post-order: a recurrence over many steps would overflow Python's recursion.
    while stack:
        node, children_done = stack.pop()
        if node in depth:
            continue
        children = [fn for fn, _ in node.next_functions if fn is not None]
        if children_done:
            depth[node] = 1 + max((depth[c] for c in children), default=0)
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in children if c not in depth)
    return depth.get(output.grad_fn, 0)


def _reaches(forward: Forward, x: Tensor, hops: int) -> bool:
    """Whether the last output depends on the first input with ``hops`` hops (a gradient probe)."""
    x = x.detach().requires_grad_()
    (grad,) = torch.autograd.grad(forward(x, hops)[-1].sum(), x, allow_unused=True)
    return grad is not None and bool(grad[0].abs().sum() > 0)


def path_length(forward: Forward, n: int, d: int, max_hops: Optional[int] = None,
                generator: Optional[torch.Generator] = None) -> Optional[int]:
    """Fewest hops through which input ``0`` reaches output ``n - 1``, found by gradient probes.

    Reach only grows with the number of hops: doubling the hops until the input is
    reached, then halving the interval, finds the smallest with few probes (and without
    building ``n`` layers where one suffices).

    Args:
        forward: ``forward(x, hops)``, as built by :func:`recurrent`, :func:`convolutional`
            or :func:`self_attention_stack`.
        n: sequence length.
        d: width of each position's vector.
        max_hops: the most hops to try (default ``n``).
        generator: for the random input.

    Returns:
        The path length, or ``None`` if ``max_hops`` hops do not suffice.
    """
    v.require_callable("forward", forward)
    n, d = v.require_int("n", n), v.require_int("d", d)
    limit = n if max_hops is None else v.require_int("max_hops", max_hops)
    if generator is not None:
        v.require_instance("generator", generator, torch.Generator, "a torch.Generator or None")
    v.require_fits(f"the (n, d) input for n={n}, d={d}", (n, d), torch.float64,
                   torch.device("cpu") if generator is None else generator.device,
                   hint="check n and d: a sequence length and a width")
    x = torch.randn(n, d, generator=generator, dtype=torch.float64)
    lo, hi = 0, 1  # invariant: lo hops do not reach (0 never does)
    while not _reaches(forward, x, hi):
        if hi == limit:
            return None
        lo, hi = hi, min(2 * hi, limit)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _reaches(forward, x, mid) else (mid, hi)
    return hi


def _check_layer(d: object, generator: object, owner: str, count: int = 2, **sizes: int) -> None:
    """``d`` and ``generator`` checked, and ``count`` weight matrices of ``d * d * k`` refused unless they fit."""
    v.require_int("d", d)
    v.require_instance("generator", generator, torch.Generator, "a torch.Generator",
                       "; make one with torch.Generator().manual_seed(0)")
    v.require_weights_fit(owner, {"d": d, **sizes}, count * d * d * sizes.get("kernel_size", 1),
                          torch.float64, generator.device)


def _weights(generator: torch.Generator, *shape: int) -> Tensor:
    fan_in = math.prod(shape[1:]) if len(shape) > 2 else shape[0]
    return torch.randn(*shape, generator=generator, dtype=torch.float64) / math.sqrt(fan_in)


def recurrent(d: int, generator: torch.Generator) -> Forward:
    """An Elman RNN, ``h_t = tanh(x_t W + h_{t-1} U)``, as ``forward(x, hops)``.

    ``hops`` is how many of the last recurrent steps the gradient may flow through:
    the state is detached before them, as truncated backpropagation through time does.

    Args:
        d: width of the inputs and of the state.
        generator: for the weights.

    Returns:
        ``forward(x, hops)``: every state ``h_0 .. h_{n-1}``, shape ``(n, d)``.
    """
    _check_layer(d, generator, "recurrent")
    W, U = _weights(generator, d, d), _weights(generator, d, d)

    def forward(x: Tensor, hops: int) -> Tensor:
        n = x.shape[0]
        h, states = torch.zeros(d, dtype=x.dtype), []
        for t in range(n):  # one step after another: step t needs h_{t-1}
            if t == n - hops:
                h = h.detach()
            h = torch.tanh(x[t] @ W + h @ U)
            states.append(h)
        return torch.stack(states)

    return forward


def convolutional(d: int, kernel_size: int, generator: torch.Generator,
                  dilated: bool = False) -> Forward:
    """A stack of causal 1-D convolutions, ``hops`` layers deep, as ``forward(x, hops)``.

    Layer ``l`` sees ``kernel_size`` positions, ``1`` apart, or ``kernel_size ** l``
    apart when ``dilated`` (WaveNet's and ByteNet's dilations).

    Args:
        d: channels.
        kernel_size: ``k``, positions each output of a layer sees.
        generator: for the weights.
        dilated: multiply the dilation by ``k`` at each layer.

    Returns:
        ``forward(x, hops)``, shape ``(n, d)`` to ``(n, d)``.
    """
    k = v.require_int("kernel_size", kernel_size, minimum=2)
    v.require_flag("dilated", dilated)
    _check_layer(d, generator, "convolutional", count=1, kernel_size=k)
    layers: List[Tensor] = []

    def forward(x: Tensor, hops: int) -> Tensor:
        while len(layers) < hops:  # the same weights for the same layer, whatever `hops`
            layers.append(_weights(generator, d, d, k))
        y = x.T[None]  # (1, d, n): conv1d's layout
        for layer, w in enumerate(layers[:hops]):
            # Beyond n, a larger dilation changes nothing (every tap but one is padding).
            dilation = min(k**layer, x.shape[0]) if dilated else 1
            y = torch.tanh(F.conv1d(F.pad(y, ((k - 1) * dilation, 0)), w, dilation=dilation))
        return y[0].T

    return forward


def self_attention_stack(d: int, generator: torch.Generator,
                         window: Optional[int] = None) -> Forward:
    """``hops`` layers of causal self-attention, as ``forward(x, hops)``.

    Args:
        d: width of the inputs, queries, keys and values.
        generator: for the weights.
        window: restrict each query to the last ``window`` keys (``qkv.sliding_window_mask``).

    Returns:
        ``forward(x, hops)``, shape ``(n, d)`` to ``(n, d)``.
    """
    _check_layer(d, generator, "self_attention_stack", count=3)
    if window is not None:
        v.require_int("window", window)
    layers: List[List[Tensor]] = []

    def forward(x: Tensor, hops: int) -> Tensor:
        while len(layers) < hops:
            layers.append([_weights(generator, d, d) for _ in range(3)])
        n = x.shape[0]
        mask = causal_mask(n) if window is None else sliding_window_mask(n, n, window)
        for W_q, W_k, W_v in layers[:hops]:
            x = scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v, attn_mask=mask)
        return x

    return forward
