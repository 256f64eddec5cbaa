"""The length-extrapolation experiment of chapter 7: a tiny causal transformer, five ways to give it position.

The task is the simplest rule that needs position and is the same at every position: **repeat
the previous token** (the target at position ``i`` is the token at ``i - 1``). Models train on
sequences of one length and are tested on longer ones, where absolute positions they never saw
appear. The five encodings (:data:`ENCODINGS`):

- ``"none"``: no position at all; only the causal mask (a causal model can count, chapter 7);
- ``"sinusoidal"``, ``"learned"``: a vector per position added to the token vectors;
- ``"rope"``: queries and keys rotated (:func:`qkv.apply_rope`);
- ``"alibi"``: a bias on the scores (:func:`qkv.alibi_bias`).

Everything else (widths, initial token weights, batches, optimiser) is the same for the five.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import torch
from torch import Tensor, nn

from . import _validate as v
from .masking import causal_mask
from .multi_head import merge_heads, split_heads
from .position import alibi_bias, apply_rope, sinusoidal_encoding
from .scaling import scaled_dot_product_attention

ENCODINGS = ("none", "sinusoidal", "learned", "rope", "alibi")
IGNORE = -100  # cross_entropy's ignore_index: position 0 has no previous token


def previous_token_batch(batch_size: int, length: int, vocab_size: int,
                         generator: torch.Generator) -> Tuple[Tensor, Tensor]:
    """Random tokens and their targets: the token one position back (``IGNORE`` at position 0).

    Shape:
        - tokens, targets: ``(batch_size, length)``, int64
    """
    tokens = torch.randint(0, vocab_size, (batch_size, length), generator=generator)
    targets = tokens.roll(1, dims=1)
    targets[:, 0] = IGNORE
    return tokens, targets


class PositionalAttention(nn.Module):
    """Multi-head self-attention with RoPE or ALiBi inside it (or no position at all).

    Args:
        embed_dim, num_heads: as :class:`qkv.MultiHeadAttention`.
        encoding: ``"rope"`` rotates queries and keys; ``"alibi"`` adds the bias to the
            scores; anything else leaves attention without position.
        causal: apply the causal mask (query ``i`` sees keys ``0..i``).
    """

    def __init__(self, embed_dim: int, num_heads: int, encoding: str = "none", causal: bool = True) -> None:
        super().__init__()
        self.num_heads, self.encoding, self.causal = num_heads, encoding, causal
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
            nn.Linear(embed_dim, embed_dim) for _ in range(4))

    def forward(self, x: Tensor) -> Tensor:
        """Shape: ``x`` ``(B, L, D)`` -> ``(B, L, D)``."""
        L = x.shape[-2]
        q, k, val = (split_heads(p(x), self.num_heads) for p in (self.q_proj, self.k_proj, self.v_proj))
        if self.encoding == "rope":
            q, k = apply_rope(q), apply_rope(k)  # never the values: they carry content only
        mask = causal_mask(L, device=x.device) if self.causal else None
        if self.encoding == "alibi":
            bias = alibi_bias(self.num_heads, L, device=x.device, dtype=x.dtype)
            mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
        return self.out_proj(merge_heads(scaled_dot_product_attention(q, k, val, attn_mask=mask)))


class TinyTransformer(nn.Module):
    """Token embedding, position (added, or inside attention), pre-norm blocks, a readout.

    Args:
        vocab_size: tokens in and classes out.
        encoding: one of :data:`ENCODINGS`.
        dim, num_heads, num_layers: sizes.
        max_len: rows of the learned table (positions past the training length keep their
            random initial vectors: no gradient ever reaches them).
        causal: as :class:`PositionalAttention`.
    """

    def __init__(self, vocab_size: int, encoding: str, dim: int = 32, num_heads: int = 4,
                 num_layers: int = 2, max_len: int = 512, causal: bool = True) -> None:
        super().__init__()
        self.encoding = v.require_choice("encoding", encoding, ENCODINGS)
        self.embed = nn.Embedding(vocab_size, dim)
        self.positions = nn.Embedding(max_len, dim) if encoding == "learned" else None
        self.attn = nn.ModuleList(PositionalAttention(dim, num_heads, encoding, causal)
                                  for _ in range(num_layers))
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(num_layers))
        self.mlps = nn.ModuleList(nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 2 * dim), nn.ReLU(),
                                                nn.Linear(2 * dim, dim)) for _ in range(num_layers))
        self.readout = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, vocab_size))

    def forward(self, tokens: Tensor) -> Tensor:
        """Shape: ``tokens`` ``(B, L)`` -> logits ``(B, L, vocab_size)``."""
        x = self.embed(tokens)
        L = tokens.shape[-1]
        if self.encoding == "sinusoidal":
            x = x + sinusoidal_encoding(L, x.shape[-1], device=x.device, dtype=x.dtype)
        elif self.positions is not None:
            x = x + self.positions.weight[:L]
        for attn, norm, mlp in zip(self.attn, self.norms, self.mlps):
            x = x + attn(norm(x))
            x = x + mlp(x)
        return self.readout(x)


def train_tiny(encoding: str, steps: int = 300, train_len: int = 16, vocab_size: int = 16,
               seed: int = 0, batch_size: int = 64, lr: float = 3e-3) -> Tuple[TinyTransformer, List[float]]:
    """Train a :class:`TinyTransformer` to repeat the previous token, on sequences of ``train_len``.

    The same seed gives every encoding the same token weights and the same batches.

    Returns:
        ``(model in eval mode, loss per step)``.
    """
    torch.manual_seed(seed)
    model = TinyTransformer(vocab_size, encoding)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        tokens, targets = previous_token_batch(batch_size, train_len, vocab_size, gen)
        logits = model(tokens)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model.eval(), losses


@torch.no_grad()
def accuracy_by_length(model: TinyTransformer, lengths: Sequence[int], vocab_size: int = 16,
                       n: int = 200, seed: int = 1) -> Dict[int, float]:
    """Accuracy on the **second half** of ``n`` fresh sequences of each length.

    The second half of a sequence twice the training length holds only positions the model
    never trained on; at the training length it is the same task as in training.
    """
    gen = torch.Generator().manual_seed(seed)
    acc = {}
    for L in lengths:
        tokens, targets = previous_token_batch(n, L, vocab_size, gen)
        right = model(tokens).argmax(-1) == targets
        acc[L] = right[:, L // 2:].float().mean().item()
    return acc


def run_extrapolation(encodings: Sequence[str] = ENCODINGS, test_lengths: Sequence[int] = (16, 32, 64, 128),
                      steps: int = 300, train_len: int = 16, seed: int = 0) -> Dict[str, dict]:
    """Train one model per encoding and measure it at every test length.

    Returns:
        ``{encoding: {"model", "losses", "accuracy": {length: accuracy}}}``.
    """
    results = {}
    for enc in encodings:
        model, losses = train_tiny(enc, steps, train_len, seed=seed)
        results[enc] = {"model": model, "losses": losses,
                        "accuracy": accuracy_by_length(model, test_lengths)}
    return results
