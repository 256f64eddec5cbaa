"""The capstone: a :class:`qkv.transformer.DecoderLM` trained on text and measured on held-out text.

Batches are random windows of the training text; the validation loss is the mean
next-token cross-entropy on fixed, evenly spaced windows of the validation text, so two
models (an ablation and its baseline) are measured on exactly the same characters. The
learning rate is constant after a short warm-up, so a run stopped early is the same run
as a longer one up to that step: an ablation trained for ``n`` steps compares with the
baseline's measurement at step ``n``.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Dict, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from . import _lm_checks as check
from . import _validate as v
from .text_data import TextSplit, load_corpus
from .transformer import Block, CausalSelfAttention, DecoderLM

# TrainLog is a record that train_lm returns (users read it, never build it): it stays in
# this module, not in the package's API, as the other result records do.
__all__ = ["ablation_baseline", "ablation_loss", "attention_forward", "block_forward",
           "chapter_ablations", "evaluate", "random_block_params", "random_windows", "train_lm"]

#: The capstone's model and training: small enough for a minute on one CPU core.
BASELINE: Dict[str, Any] = dict(d_model=64, num_layers=2, num_heads=4, num_kv_heads=2, d_ff=None,
                                dropout=0.1, position="rope", scale=True, window=None)
CONTEXT = 64  # characters per training window
BATCH_SIZE = 32
LR = 3e-3
WARMUP = 20  # steps of linear warm-up
ABLATION_STEPS = 200
#: Chapter 11's ablations, one setting of :data:`BASELINE` changed in each (the assignment
#: asks for a change the chapter did not make).
CHAPTER_ABLATIONS: Dict[str, Dict[str, Any]] = {
    "no scaling": {"scale": False},
    "no position": {"position": "none"},
    "MHA, not GQA": {"num_kv_heads": BASELINE["num_heads"]},
    "window of 8": {"window": 8},
}


class TrainLog(NamedTuple):
    """What :func:`train_lm` measured.

    Shape:
        - step: ``(N,)``, the steps after which the model was measured
        - train_loss: ``(N,)``, the mean training loss since the previous measurement
          (at step 0, the loss of the untrained model on the first batch)
        - valid_loss: ``(N,)``, :func:`evaluate` on the validation text
    """

    step: Tensor
    train_loss: Tensor
    valid_loss: Tensor


def random_windows(data: Tensor, batch_size: int, context: int,
                   generator: torch.Generator) -> tuple:
    """``batch_size`` random windows of ``context + 1`` ids, as inputs and next-id targets.

    Args:
        data: the text's ids.
        batch_size: windows ``B``.
        context: positions per window ``T``.
        generator: where the windows start.

    Returns:
        ``(inputs, targets)``, targets shifted by one.

    Shape:
        - data: ``(N,)``; inputs and targets ``(B, T)``
    """
    check.require_ids("data", data)
    v.require_int("batch_size", batch_size)
    v.require_int("context", context)
    check.require_long_enough("data", data, context)
    v.require_instance("generator", generator, torch.Generator, "a torch.Generator",
                       "; make one with torch.Generator().manual_seed(0)")
    v.require_fits("the windows", (batch_size, context + 1), torch.long, data.device,
                   hint="draw fewer windows (batch_size) or shorter ones (context)")
    start = torch.randint(0, data.numel() - context - 1, (batch_size, 1), generator=generator)
    idx = start + torch.arange(context + 1)
    chunk = data[idx]
    return chunk[:, :-1], chunk[:, 1:]


@torch.no_grad()
def evaluate(model: DecoderLM, data: Tensor, context: int = CONTEXT, windows: int = 128) -> float:
    """Mean next-token cross-entropy (nats) on ``windows`` evenly spaced windows of ``data``.

    The windows are the same for every model, so differences are the models'. The model
    is evaluated in eval mode (no dropout) and put back in the mode it was in.

    Args:
        model: the model.
        data: ids, e.g. :attr:`TextSplit.valid`.
        context: positions per window.
        windows: how many windows.

    Returns:
        The loss, a float.
    """
    v.require_instance("model", model, DecoderLM, "a qkv.transformer.DecoderLM")
    check.require_ids("data", data, model.embed.num_embeddings)
    v.require_int("context", context)
    v.require_int("windows", windows)
    check.require_long_enough("data", data, context)
    v.require_fits("the logits of the windows", (windows, context, model.embed.num_embeddings),
                   model.unembed.weight.dtype, model.unembed.weight.device,
                   hint="evaluate on fewer windows or shorter ones (context)")
    was_training = model.training
    model.eval()
    start = torch.linspace(0, data.numel() - context - 1, windows).long()[:, None]
    chunk = data[start + torch.arange(context + 1)]
    logits = model(chunk[:, :-1])
    loss = F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten()).item()
    model.train(was_training)
    return loss


def train_lm(model: DecoderLM, split: TextSplit, steps: int, seed: int = 0,
             eval_every: int = 50, context: int = CONTEXT, batch_size: int = BATCH_SIZE,
             lr: float = LR, progress: bool = True, desc: str = "training") -> TrainLog:
    """Train with AdamW on random windows of ``split.train``, measuring on ``split.valid``.

    Args:
        model: trained in place (left in eval mode).
        split: the text, from :func:`qkv.text_data.load_corpus`.
        steps: optimiser steps.
        seed: seed of the windows (the model's initialisation is the caller's).
        eval_every: steps between measurements (step 0 and the last are always measured).
        context, batch_size, lr: the windows' length, their number per step, the peak
            learning rate (reached after a short warm-up, then constant).
        progress: show a progress bar (tqdm).
        desc: the bar's label.

    Returns:
        A :class:`TrainLog`.
    """
    v.require_instance("model", model, DecoderLM, "a qkv.transformer.DecoderLM")
    v.require_int("steps", steps, minimum=0)
    v.require_int("eval_every", eval_every)
    v.require_positive_number("lr", lr)
    from tqdm.auto import tqdm

    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warm = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / WARMUP))
    model.train()
    log, running = [], []
    for step in tqdm(range(steps + 1), desc=desc, disable=not progress, mininterval=1.0):
        if step % eval_every == 0 or step == steps:
            if not running:  # step 0: the untrained model's loss on a first batch
                x, y = random_windows(split.train, batch_size, context, torch.Generator().manual_seed(seed))
                with torch.no_grad():
                    running = [F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()]
            log.append((step, sum(running) / len(running), evaluate(model, split.valid, context)))
            running = []
        if step == steps:
            break
        x, y = random_windows(split.train, batch_size, context, gen)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        warm.step()
        running.append(loss.item())
    model.eval()
    step, train_loss, valid_loss = zip(*log)
    return TrainLog(torch.tensor(step), torch.tensor(train_loss), torch.tensor(valid_loss))


def chapter_ablations() -> Dict[str, Dict[str, Any]]:
    """Chapter 11's ablations, by label: the one setting of :data:`BASELINE` each changes (a
    copy of :data:`CHAPTER_ABLATIONS`; the assignment asks for a change the chapter did not
    make).

    Returns:
        ``{label: {setting: value}}``, e.g. ``{"window of 8": {"window": 8}, ...}``.
    """
    return {label: dict(options) for label, options in CHAPTER_ABLATIONS.items()}


def ablation_baseline(options: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The settings of the baseline model that an ablation may change (a copy of :data:`BASELINE`).

    Args:
        options: settings to change, as for :func:`ablation_loss`; ``None`` changes none.

    Returns:
        ``{setting: value}``, keyword arguments of :class:`qkv.transformer.DecoderLM`.
    """
    options = {} if options is None else options
    check.check_options(options, BASELINE)
    return {**BASELINE, **options}


@functools.lru_cache(maxsize=1)
def _default_split() -> TextSplit:
    """The corpus, read once per process (reading it imports some 80 modules)."""
    return load_corpus()


def ablation_loss(options: Dict[str, Any], seed: int, steps: int = ABLATION_STEPS,
                  split: Optional[TextSplit] = None, progress: bool = True) -> float:
    """Train the baseline with ``options`` changed, from ``seed``; return its validation loss.

    The model is :data:`BASELINE` with ``options`` replacing some of its settings,
    initialised from ``torch.manual_seed(seed)`` and trained on windows drawn from the
    same seed for ``steps`` steps. The same options and seed give the same loss on the
    same machine and Python version (up to rounding in the thread scheduling).

    Args:
        options: settings of :class:`qkv.transformer.DecoderLM` to change, e.g.
            ``{"window": 8}`` or ``{"position": "none"}``.
        seed: the run's seed.
        steps: optimiser steps.
        split: the text; ``None`` loads :func:`qkv.text_data.load_corpus`.
        progress: show a progress bar.

    Returns:
        The validation loss after training (nats per character).
    """
    settings = ablation_baseline(options)
    v.require_int("seed", seed, minimum=0)
    split = _default_split() if split is None else \
        v.require_instance("split", split, TextSplit, "a TextSplit", "; make one with qkv.text_data.load_corpus()")
    torch.manual_seed(seed)
    model = DecoderLM(split.tokenizer.vocab_size, **settings)
    log = train_lm(model, split, steps, seed=seed, eval_every=max(steps, 1), progress=progress,
                   desc=f"{options or 'baseline'}, seed {seed}")
    return float(log.valid_loss[-1])


def random_block_params(d_model: int, num_heads: int, num_kv_heads: Optional[int] = None,
                        d_ff: Optional[int] = None,
                        generator: Optional[torch.Generator] = None) -> Dict[str, Tensor]:
    """A :class:`qkv.transformer.Block`'s ``state_dict`` with weights drawn from ``generator``.

    Each matrix of shape ``(out, in)`` is standard normal divided by ``sqrt(in)``, so that it
    keeps its input's scale; each norm's gain is 1. The global random state is not used.

    Args:
        d_model, num_heads, num_kv_heads, d_ff: as for the block.
        generator: where the weights come from (``None``: a generator seeded with 0).

    Returns:
        ``{name: tensor}``, in the order of the block's ``state_dict()``.
    """
    if generator is None:
        generator = torch.Generator().manual_seed(0)
    v.require_instance("generator", generator, torch.Generator, "a torch.Generator",
                       "; make one with torch.Generator().manual_seed(0)")
    with torch.device("meta"):  # the shapes only: no weights made, no random numbers drawn
        shapes = {n: t.shape for n, t in Block(d_model, num_heads, num_kv_heads, d_ff).state_dict().items()}
    return {n: torch.ones(s) if len(s) == 1 else torch.randn(s, generator=generator) / math.sqrt(s[1])
            for n, s in shapes.items()}


def chance_loss(vocab_size: int) -> float:
    """The loss of a uniform guess over ``vocab_size`` tokens, ``log V`` nats."""
    return math.log(vocab_size)


def _sizes(x: object, params: object, names: Tuple[str, ...], num_heads: object,
           num_kv_heads: object) -> Tuple[int, int]:
    """``(D, num_kv_heads)`` read from a state dict, with ``x`` and the names checked."""
    v.require_float_tensor("x", x)
    v.require_dim("x", x, 3, "(B, L, D)")
    check.require_params(params, names)
    v.require_int("num_heads", num_heads)
    return params[names[0]].shape[1], num_heads if num_kv_heads is None else num_kv_heads


def attention_forward(x: Tensor, params: Dict[str, Tensor], num_heads: int,
                      num_kv_heads: Optional[int] = None, k_cache: Optional[Tensor] = None,
                      v_cache: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Tensor]:
    """:class:`qkv.transformer.CausalSelfAttention` (RoPE, scaled, causal) as a function of its weights.

    Args:
        x: the new positions' stream (already normalised).
        params: the module's ``state_dict()``: ``q_proj.weight``, ``k_proj.weight``,
            ``v_proj.weight``, ``out_proj.weight``.
        num_heads, num_kv_heads: as for the module.
        k_cache, v_cache: keys (RoPE applied) and values of the ``P`` earlier positions, or ``None``.

    Returns:
        ``(output, k_cache, v_cache)``, the caches with the new positions appended.

    Shape:
        - x: ``(B, L, D)``; output ``(B, L, D)``
        - k_cache, v_cache: ``(B, Hkv, P, E)``, returned with ``P + L`` positions
    """
    D, hkv = _sizes(x, params, ("q_proj.weight", "out_proj.weight"), num_heads, num_kv_heads)
    module = CausalSelfAttention(D, num_heads, hkv).to(device=x.device, dtype=x.dtype)
    check.load(module, params)
    if (k_cache is None) != (v_cache is None):
        raise ValueError("k_cache and v_cache must both be tensors or both be None")
    if k_cache is not None:
        check.require_cache(("k_cache", "v_cache"), k_cache, v_cache, x, hkv, D // num_heads)
    out, (k, val) = module(x, None if k_cache is None else (k_cache, v_cache))
    return out, k, val


def block_forward(x: Tensor, params: Dict[str, Tensor], num_heads: int,
                  num_kv_heads: Optional[int] = None) -> Tensor:
    """A :class:`qkv.transformer.Block` (RoPE, scaled, causal, no dropout) as a function of its weights.

    Args:
        x: the residual stream.
        params: the block's ``state_dict()`` (``norm1.weight``, ``attn.q_proj.weight``, ...,
            ``mlp.up.weight``, ``mlp.down.weight``).
        num_heads, num_kv_heads: as for the block.

    Returns:
        The block's output.

    Shape:
        - x: ``(B, L, D)``; output ``(B, L, D)``
    """
    D, hkv = _sizes(x, params, ("attn.q_proj.weight", "mlp.up.weight"), num_heads, num_kv_heads)
    block = Block(D, num_heads, hkv, d_ff=params["mlp.up.weight"].shape[0])
    check.load(block.to(device=x.device, dtype=x.dtype), params)
    return block.eval()(x)[0]
