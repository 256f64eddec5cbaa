"""The bottleneck experiment: a small GRU encoder-decoder with and without attention.

The task is to reverse a random token sequence. Every output token depends on
exactly one input token, so the answer needs every input token and nothing can be
guessed from the others. Without attention the decoder sees the input only
through one fixed-size vector (the encoder's last state); with Bahdanau attention
it looks back at every encoder state at every step.

Both models share the same widths, the same code and the same training batches;
the only difference is where the decoder's context vector comes from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor, nn

from . import _validate as v
from .lookup import additive_score, attend
from .score_modules import AdditiveAttention

__all__ = [
    "ReverseTask",
    "Seq2Seq",
    "bahdanau_attention",
]

BOS, EOS = 0, 1  # token ids; the symbols to reverse are 2 .. 2 + n_symbols - 1


@dataclass(frozen=True)
class ReverseTask:
    """Reverse a random sequence of ``min_len`` to ``max_len`` symbols.

    Args:
        n_symbols: size of the alphabet (token ids ``2 .. n_symbols + 1``).
        min_len: shortest input.
        max_len: longest input.
    """

    n_symbols: int = 10
    min_len: int = 2
    max_len: int = 24

    def __post_init__(self) -> None:
        v.require_int("n_symbols", self.n_symbols)
        v.require_int("min_len", self.min_len)
        v.require_int(f"max_len (at least min_len={self.min_len})", self.max_len, self.min_len)

    @property
    def vocab_size(self) -> int:
        """Symbols plus BOS and EOS."""
        return self.n_symbols + 2

    def sample(self, batch_size: int, length: int, generator: torch.Generator) -> Tuple[Tensor, Tensor, Tensor]:
        """A batch of inputs of one length, with teacher-forcing inputs and targets.

        Returns:
            ``(src, tgt_in, tgt_out)``: ``tgt_out`` is the reversed input then EOS;
            ``tgt_in`` is the same shifted right behind BOS.

        Shape:
            - src: ``(B, n)``, tgt_in: ``(B, n + 1)``, tgt_out: ``(B, n + 1)``
        """
        v.require_int("batch_size", batch_size)
        if not self.min_len <= v.require_int("length", length) <= self.max_len:
            raise ValueError(f"length must be in [{self.min_len}, {self.max_len}], got {length}")
        v.require_instance("generator", generator, torch.Generator, "a torch.Generator")
        src = torch.randint(2, self.vocab_size, (batch_size, length), generator=generator)
        rev = src.flip(1)
        tgt_in = torch.cat([torch.full((batch_size, 1), BOS), rev], dim=1)
        tgt_out = torch.cat([rev, torch.full((batch_size, 1), EOS)], dim=1)
        return src, tgt_in, tgt_out


def bahdanau_attention(
    query: Tensor, keys: Tensor, W_q: Tensor, W_k: Tensor, v_a: Tensor
) -> Tuple[Tensor, Tensor]:
    """One decoder step of Bahdanau attention: score, softmax, weighted sum.

    ``e_j = v_a^T tanh(W_q s + W_k h_j)``, ``alpha = softmax(e)``,
    ``c = sum_j alpha_j h_j``: the encoder states are both keys and values.

    Args:
        query: the decoder's previous state ``s``.
        keys: the encoder states ``h_1 .. h_S``.
        W_q, W_k, v_a: the parameters of the additive score
            (see :func:`qkv.additive_score`).

    Returns:
        ``(context, weights)``.

    Shape:
        - query: ``(B, Hd)``, keys: ``(B, S, He)``
        - context: ``(B, He)``, weights: ``(B, S)``
    """
    # Checked here under this function's names (keys, not additive_score's key).
    names, tensors = ("query", "keys", "W_q", "W_k", "v_a"), (query, keys, W_q, W_k, v_a)
    for name, t in zip(names, tensors):
        v.require_float_tensor(name, t)
    v.require_same(names, tensors, "dtype")
    v.require_same(names, tensors, "device")
    if query.dim() != 2 or keys.dim() != 3 or query.shape[0] != keys.shape[0]:
        raise ValueError(
            f"expected query (B, Hd) and keys (B, S, He), got query {v.shape_str(query)} "
            f"and keys {v.shape_str(keys)}"
        )
    # One query per sequence: give it a length-1 query axis, reuse the general score.
    scores = additive_score(query.unsqueeze(1), keys, W_q, W_k, v_a)  # (B, 1, S)
    context, weights = attend(scores, keys)
    return context.squeeze(1), weights.squeeze(1)


AttentionStep = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tuple[Tensor, Tensor]]


class Seq2Seq(nn.Module):
    """GRU encoder-decoder; the context comes from attention or from the last encoder state.

    At decoder step ``t`` the context ``c_t`` is either the encoder's final state
    (``attention=False``: the same vector at every step, as in Cho et al., 2014) or
    Bahdanau attention over all encoder states with the previous decoder state as
    the query. The decoder's GRU reads ``[embed(y_{t-1}); c_t]`` and the output
    layer reads ``[s_t; c_t]``.

    Args:
        vocab_size: tokens, including BOS and EOS.
        emb_dim: embedding width.
        hidden_dim: width of encoder and decoder states.
        attention: use Bahdanau attention.
        attention_step: the function computing one attention step (default
            :func:`bahdanau_attention`); an exercise swaps in its own.
    """

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int = 32,
        hidden_dim: int = 64,
        attention: bool = True,
        attention_step: AttentionStep = bahdanau_attention,
    ) -> None:
        super().__init__()
        for name, n in (("vocab_size", vocab_size), ("emb_dim", emb_dim), ("hidden_dim", hidden_dim)):
            v.require_int(name, n)
        v.require_callable("attention_step", attention_step)
        v.require_flag("attention", attention)
        sizes = {"vocab_size": vocab_size, "emb_dim": emb_dim, "hidden_dim": hidden_dim}
        # Embedding, output layer and the GRUs' three gates dominate the count.
        count = vocab_size * (emb_dim + 2 * hidden_dim) + 6 * hidden_dim * (emb_dim + 2 * hidden_dim)
        v.require_weights_fit("Seq2Seq", sizes, count)
        self.embed = nn.Embedding(vocab_size, emb_dim)
        self.encoder = nn.GRU(emb_dim, hidden_dim, batch_first=True)
        self.decoder = nn.GRUCell(emb_dim + hidden_dim, hidden_dim)
        self.out = nn.Linear(2 * hidden_dim, vocab_size)
        self.attn = AdditiveAttention(hidden_dim, hidden_dim, hidden_dim) if attention else None
        self.attention_step = attention_step

    def _context(self, s: Tensor, enc: Tensor, last: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        if self.attn is None:
            return last, None  # the bottleneck: one vector for the whole input
        return self.attention_step(s, enc, self.attn.W_q, self.attn.W_k, self.attn.v_a)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        """Teacher-forced logits, and the attention weights (``None`` without attention).

        Shape:
            - src: ``(B, S)``, tgt_in: ``(B, T)``
            - logits: ``(B, T, vocab_size)``, weights: ``(B, T, S)``
        """
        self._check_tokens(src=src, tgt_in=tgt_in)
        enc, last = self.encoder(self.embed(src))
        s = last[0]
        emb = self.embed(tgt_in)
        logits, weights = [], []
        for t in range(tgt_in.shape[1]):
            s, logit, w = self._step(emb[:, t], s, enc, last[0])
            logits.append(logit)
            weights.append(w)
        return torch.stack(logits, 1), (None if self.attn is None else torch.stack(weights, 1))

    def _check_tokens(self, **sequences: Tensor) -> None:
        """Token ids in ``[0, vocab_size)``, one batch size: checked before the embedding sees them."""
        n = self.embed.num_embeddings
        for name, t in sequences.items():
            v.require_tokens(name, t, n, "(B, S)" if name == "src" else "(B, T)")
        batch = {name: t.shape[0] for name, t in sequences.items()}
        if len(set(batch.values())) > 1:
            raise ValueError(f"src and tgt_in must have the same batch size B, got {batch}")

    def _step(self, emb_t: Tensor, s: Tensor, enc: Tensor, last: Tensor):
        c, w = self._context(s, enc, last)
        s = self.decoder(torch.cat([emb_t, c], dim=-1), s)
        return s, self.out(torch.cat([s, c], dim=-1)), w

    @torch.no_grad()
    def greedy(self, src: Tensor, steps: int) -> Tuple[Tensor, Optional[Tensor]]:
        """Decode ``steps`` tokens, each time feeding back the model's own prediction.

        Shape:
            - src: ``(B, S)``
            - tokens: ``(B, steps)``, weights: ``(B, steps, S)``
        """
        self._check_tokens(src=src)
        v.require_int("steps", steps, minimum=0)
        enc, last = self.encoder(self.embed(src))
        s = last[0]
        y = torch.full((src.shape[0],), BOS, dtype=src.dtype, device=src.device)
        tokens, weights = [], []
        for _ in range(steps):
            s, logit, w = self._step(self.embed(y), s, enc, last[0])
            y = logit.argmax(-1)
            tokens.append(y)
            weights.append(w)
        return torch.stack(tokens, 1), (None if self.attn is None else torch.stack(weights, 1))


def train(
    model: Seq2Seq,
    task: ReverseTask,
    steps: int,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    progress: bool = True,
    desc: str = "training",
) -> List[float]:
    """Train with Adam on fresh random batches, one input length per batch.

    The batches depend only on ``task`` and ``seed``, so two models trained with
    the same arguments see exactly the same data.

    Returns:
        The loss of every step.
    """
    from tqdm.auto import tqdm

    _check_model_and_task(model, task)
    v.require_int("steps", steps, minimum=0)
    v.require_int("batch_size", batch_size)
    v.require_positive_number("lr", lr)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    model.train()
    for _ in tqdm(range(steps), desc=desc, disable=not progress, mininterval=1.0):
        n = int(torch.randint(task.min_len, task.max_len + 1, (1,), generator=gen))
        src, tgt_in, tgt_out = task.sample(batch_size, n, gen)
        logits, _ = model(src, tgt_in)
        loss = loss_fn(logits.flatten(0, 1), tgt_out.flatten())
        opt.zero_grad()
        loss.backward()
        # Clipping keeps the occasional exploding GRU gradient from undoing training.
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    return losses


def _check_model_and_task(model: object, task: object) -> None:
    v.require_instance("model", model, Seq2Seq, "a qkv.Seq2Seq")
    v.require_instance("task", task, ReverseTask, "a qkv.ReverseTask")


@torch.no_grad()
def accuracy_by_length(
    model: Seq2Seq, task: ReverseTask, n_per_length: int = 200, seed: int = 12345
) -> Dict[int, float]:
    """Per-token accuracy of greedy decoding for every input length.

    The model decodes ``n + 1`` tokens from its own predictions (no teacher
    forcing); the score is the fraction equal to the target (reversed input, EOS).

    Returns:
        ``{length: accuracy}`` for every length from ``task.min_len`` to ``task.max_len``.
    """
    _check_model_and_task(model, task)
    v.require_int("n_per_length", n_per_length)
    gen = torch.Generator().manual_seed(seed)
    model.eval()
    acc = {}
    for n in range(task.min_len, task.max_len + 1):
        src, _, tgt_out = task.sample(n_per_length, n, gen)
        pred, _ = model.greedy(src, n + 1)
        acc[n] = (pred == tgt_out).float().mean().item()
    return acc


def make_model(task: ReverseTask, attention: bool, seed: int, **kwargs) -> Seq2Seq:
    """A :class:`Seq2Seq` for ``task`` whose initial weights depend only on ``seed``."""
    v.require_instance("task", task, ReverseTask, "a qkv.ReverseTask")
    with torch.random.fork_rng():  # leave the caller's global RNG untouched
        torch.manual_seed(seed)
        return Seq2Seq(task.vocab_size, attention=attention, **kwargs)


def run_experiment(
    task: ReverseTask,
    steps: int,
    seed: int = 0,
    batch_size: int = 64,
    progress: bool = True,
    **model_kwargs,
) -> Dict[str, dict]:
    """Train both models with the same seed, data and budget; measure accuracy by length.

    Returns:
        ``{"plain": {...}, "attention": {...}}``, each with ``model``, ``losses``
        and ``accuracy`` (``{length: accuracy}``).
    """
    v.require_instance("task", task, ReverseTask, "a qkv.ReverseTask")
    results = {}
    for name, attention in (("plain", False), ("attention", True)):
        model = make_model(task, attention, seed, **model_kwargs)
        losses = train(model, task, steps, batch_size, seed=seed, progress=progress, desc=name)
        results[name] = {
            "model": model,
            "losses": losses,
            "accuracy": accuracy_by_length(model, task, seed=seed + 1),
        }
    return results
