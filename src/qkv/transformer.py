"""A decoder-only transformer assembled from the course's pieces.

Pre-norm blocks on a residual stream: ``x = x + attention(norm(x))``, then
``x = x + mlp(norm(x))``. The attention is the course's: heads split with
:func:`qkv.split_heads`, positions by :func:`qkv.apply_rope` on queries and keys, keys and
values shared between query heads by :func:`qkv.grouped_query_attention`, a causal or
sliding-window mask from :mod:`qkv.masking`, and a key/value cache for sampling, appended
to as :func:`qkv.kv_cache_step` does. Switches turn pieces off for ablations: the
``1/sqrt(E)`` scale, the positions, the sharing of key/value heads, the window.
"""

from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import _lm_checks as check
from . import _validate as v
from .masking import causal_mask, sliding_window_mask
from .multi_head import merge_heads, split_heads
from .position import apply_rope
from .variants import grouped_query_attention

__all__ = ["Block", "CausalSelfAttention", "DecoderLM", "rms_norm"]

Cache = Tuple[Tensor, Tensor]  # keys (B, Hkv, S, E) and values (B, Hkv, S, E), RoPE applied


def rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """Divide each vector by its root mean square, then scale each feature (Zhang and Sennrich, 2019).

    LayerNorm without the mean: cheaper, and as good in practice (Llama, Mistral use it).

    Args:
        x: vectors on the last dim.
        weight: one gain per feature.
        eps: added under the square root, so a zero vector stays finite.

    Returns:
        ``x / sqrt(mean(x^2) + eps) * weight``.

    Shape:
        - x: ``(..., D)``, weight: ``(D,)``, output: like ``x``
    """
    check.check_norm(x, weight, eps)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


class RMSNorm(nn.Module):
    """:func:`rms_norm` with a learned gain (initialised to ones).

    Args:
        dim: features ``D``.
        eps: as for :func:`rms_norm`.
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.weight, self.eps)


class CausalSelfAttention(nn.Module):
    """Causal multi-head self-attention with RoPE, grouped key/value heads and a cache.

    Args:
        d_model: width of the residual stream ``D``.
        num_heads: query heads ``H`` (must divide ``D``; head width ``E = D / H``).
        num_kv_heads: key/value heads ``Hkv`` (must divide ``H``); ``None`` means ``H``
            (multi-head attention), 1 multi-query attention.
        position: ``"rope"`` (rotate queries and keys) or ``"none"`` (no position at all).
        scale: divide the scores by ``sqrt(E)``; ``False`` leaves them unscaled.
        window: keys each query may see (itself included); ``None`` for all earlier keys.

    Shape:
        - x: ``(B, L, D)``; output ``(B, L, D)``; cache: keys and values ``(B, Hkv, S, E)``
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: Optional[int] = None,
                 position: str = "rope", scale: bool = True, window: Optional[int] = None) -> None:
        super().__init__()
        count = check.attention_sizes(d_model, num_heads, num_kv_heads, position, scale, window)
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        v.require_weights_fit("CausalSelfAttention", {"d_model": d_model, "num_heads": num_heads}, count)
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.position, self.scale, self.window = position, scale, window
        E = d_model // num_heads
        self.q_proj = nn.Linear(d_model, num_heads * E, bias=False)
        # GQA: fewer key/value heads, so smaller projections and a smaller cache
        self.k_proj = nn.Linear(d_model, num_kv_heads * E, bias=False)
        self.v_proj = nn.Linear(d_model, num_kv_heads * E, bias=False)
        self.out_proj = nn.Linear(num_heads * E, d_model, bias=False)

    def forward(self, x: Tensor, cache: Optional[Cache] = None) -> Tuple[Tensor, Cache]:
        """Attend from the ``L`` new positions to the cached ones and to themselves.

        Args:
            x: the new positions' (normalised) stream.
            cache: keys and values of the ``P`` earlier positions, or ``None``.

        Returns:
            ``(output, cache)``, the cache with the new keys and values appended.
        """
        check.require_stream("x", x, self.q_proj.weight)
        if cache is not None:
            keys, values = check.unpack_cache("cache", cache)
            check.require_cache(("cache[0] (keys)", "cache[1] (values)"), keys, values, x,
                                self.num_kv_heads, self.q_proj.weight.shape[0] // self.num_heads)
        q = split_heads(self.q_proj(x), self.num_heads)
        k = split_heads(self.k_proj(x), self.num_kv_heads)
        val = split_heads(self.v_proj(x), self.num_kv_heads)
        P = 0 if cache is None else cache[0].shape[-2]
        if self.position == "rope":  # new token i sits at position P + i
            q, k = apply_rope(q, offset=P), apply_rope(k, offset=P)
        if cache is not None:  # append, as kv_cache_step does
            k, val = torch.cat([cache[0], k], dim=-2), torch.cat([cache[1], val], dim=-2)
        L, S = q.shape[-2], k.shape[-2]
        full = causal_mask(S, device=x.device) if self.window is None else \
            sliding_window_mask(S, S, self.window, device=x.device)
        # the new queries are the LAST L positions: bottom-right alignment
        out = grouped_query_attention(q, k, val, attn_mask=full[S - L:],
                                      scale=None if self.scale else 1.0)
        return self.out_proj(merge_heads(out)), (k, val)


class Block(nn.Module):
    """A pre-norm transformer block: ``x + attention(norm1(x))``, then ``+ mlp(norm2(x))``.

    Each sublayer reads a normalised copy of the residual stream and adds its output
    back; the stream itself is never normalised, so the identity path from the input to
    the output stays clean (Xiong et al., 2020). The MLP widens to ``d_ff``, applies GELU
    and narrows back. Dropout acts on each sublayer's output before it is added.

    Args:
        d_model, num_heads, num_kv_heads, position, scale, window: as for
            :class:`CausalSelfAttention`.
        d_ff: the MLP's hidden width; ``None`` means ``4 * d_model``.
        dropout: probability of zeroing a sublayer's output features in training.

    Shape:
        - x: ``(B, L, D)``; output ``(B, L, D)``
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: Optional[int] = None,
                 d_ff: Optional[int] = None, dropout: float = 0.0, position: str = "rope",
                 scale: bool = True, window: Optional[int] = None) -> None:
        super().__init__()
        d_ff, count = check.block_sizes(d_model, num_heads, num_kv_heads, d_ff, dropout, position, scale, window)
        v.require_weights_fit("Block", {"d_model": d_model, "d_ff": d_ff}, count)
        self.norm1 = RMSNorm(d_model)
        self.attn = CausalSelfAttention(d_model, num_heads, num_kv_heads, position, scale, window)
        self.norm2 = RMSNorm(d_model)
        self.mlp = nn.Sequential()
        self.mlp.add_module("up", nn.Linear(d_model, d_ff, bias=False))
        self.mlp.add_module("act", nn.GELU())
        self.mlp.add_module("down", nn.Linear(d_ff, d_model, bias=False))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, cache: Optional[Cache] = None) -> Tuple[Tensor, Cache]:
        """The block on the new positions; see :meth:`CausalSelfAttention.forward` for ``cache``.

        Returns:
            ``(x, cache)``.
        """
        check.require_stream("x", x, self.norm1.weight)
        a, cache = self.attn(self.norm1(x), cache)
        x = x + self.drop(a)  # the residual stream: each sublayer adds, nothing replaces
        x = x + self.drop(self.mlp(self.norm2(x)))
        return x, cache


class DecoderLM(nn.Module):
    """Embedding, pre-norm blocks, a final norm and an unembedding: next-token logits.

    Args:
        vocab_size: number of token ids ``V``.
        d_model: width of the residual stream ``D``.
        num_layers: blocks.
        num_heads, num_kv_heads, d_ff, dropout, position, scale, window: as for :class:`Block`.

    Shape:
        - tokens: ``(B, T)``; logits: ``(B, T, V)``
    """

    def __init__(self, vocab_size: int, d_model: int = 64, num_layers: int = 2, num_heads: int = 4,
                 num_kv_heads: Optional[int] = None, d_ff: Optional[int] = None,
                 dropout: float = 0.0, position: str = "rope", scale: bool = True,
                 window: Optional[int] = None) -> None:
        super().__init__()
        v.require_int("vocab_size", vocab_size)
        v.require_int("num_layers", num_layers)
        _, count = check.block_sizes(d_model, num_heads, num_kv_heads, d_ff, dropout, position, scale, window)
        v.require_weights_fit("DecoderLM", {"vocab_size": vocab_size, "d_model": d_model, "num_layers": num_layers},
                              num_layers * count + (2 * vocab_size + 1) * d_model)
        self.options = dict(d_model=d_model, num_layers=num_layers, num_heads=num_heads,
                            num_kv_heads=num_kv_heads, d_ff=d_ff, dropout=dropout,
                            position=position, scale=scale, window=window)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(
            Block(d_model, num_heads, num_kv_heads, d_ff, dropout, position, scale, window)
            for _ in range(num_layers))
        self.norm = RMSNorm(d_model)
        self.unembed = nn.Linear(d_model, vocab_size, bias=False)
        self.drop = nn.Dropout(dropout)
        # GPT-2's initialisation, smaller on the layers that add to the stream
        writes = ("out_proj.weight", "down.weight")
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * num_layers) if name.endswith(writes) else 0.02)

    def forward(self, tokens: Tensor, caches: Optional[List[Cache]] = None) -> Tensor:
        """Next-token logits at every position.

        Args:
            tokens: token ids; with ``caches``, only the new ones.
            caches: a list to read and update one cache per block (start with ``[]``);
                ``None`` keeps no cache.

        Returns:
            The logits.
        """
        v.require_dim("tokens", tokens, 2, "(B, T)")
        v.require_values("tokens", tokens, "the embedding looks up each id")
        v.require_tokens("tokens", tokens, self.embed.num_embeddings, "(B, T)")
        if caches is not None and not isinstance(caches, list):
            raise TypeError(f"caches must be None or a list (start with []), got {type(caches).__name__}")
        x = self.drop(self.embed(tokens))
        for i, block in enumerate(self.blocks):
            old = caches[i] if caches is not None and i < len(caches) else None
            x, new = block(x, old)
            if caches is not None:
                caches[i:i + 1] = [new]
        return self.unembed(self.norm(x))

    @torch.no_grad()
    def generate(self, prompt: Tensor, max_new_tokens: int, temperature: float = 1.0,
                 generator: Optional[torch.Generator] = None, use_cache: bool = True,
                 window: Optional[int] = None) -> Tensor:
        """Sample ``max_new_tokens`` tokens after ``prompt``, one at a time.

        With the cache, the prompt runs once and each new token runs alone, attending to
        the cached keys and values; without it the whole sequence runs again at every step.
        Both compute the same logits (up to rounding), so with the same generator they
        sample the same text. The model is put in eval mode (no dropout) and left there.

        Args:
            prompt: token ids to continue.
            max_new_tokens: tokens to add.
            temperature: divides the logits; 0 takes the most likely token.
            generator: source of the samples.
            use_cache: keep keys and values instead of recomputing them.
            window: while sampling, each position sees at most this many positions (itself
                included), whatever the model was built with. A model trained on windows of
                ``T`` positions has never seen a query and a key further apart than ``T - 1``;
                with RoPE, which depends on that distance only, ``window=T`` lets it continue
                past ``T`` positions on familiar ground. ``None`` keeps the model's own.

        Returns:
            The prompt followed by the new tokens.

        Shape:
            - prompt: ``(B, T)``; output ``(B, T + max_new_tokens)``
        """
        v.require_dim("prompt", prompt, 2, "(B, T)")
        v.require_values("prompt", prompt, "the embedding looks up each id")
        v.require_tokens("prompt", prompt, self.embed.num_embeddings, "(B, T)")
        v.require_int("max_new_tokens", max_new_tokens, minimum=0)
        if not (isinstance(temperature, (int, float)) and temperature >= 0):
            raise ValueError(f"temperature must be a number >= 0, got {temperature!r}")
        if window is not None:
            v.require_int("window", window)
        self.eval()
        own = [block.attn.window for block in self.blocks]
        out, caches = prompt, ([] if use_cache else None)
        step_input = prompt
        try:
            for block in self.blocks:
                block.attn.window = block.attn.window if window is None else window
            for _ in range(max_new_tokens):
                logits = self(step_input if use_cache else out, caches)[:, -1]
                if temperature == 0:
                    nxt = logits.argmax(-1, keepdim=True)
                else:
                    probs = F.softmax(logits / temperature, dim=-1)
                    nxt = torch.multinomial(probs, 1, generator=generator)
                out = torch.cat([out, nxt], dim=1)
                step_input = nxt  # with the cache, only the new token runs next time
        finally:
            for block, w in zip(self.blocks, own):
                block.attn.window = w
        return out

