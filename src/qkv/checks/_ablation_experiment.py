"""Assignment 10's experiment: how much the loss on the repeat rises when one head of a trained
model is removed, by zero or by mean ablation, judged as a measurement (see :mod:`._experiment`).

The student's ``ablation_rise(model, layer, head, how, generator)`` needs a trained model. The
trusted side (the grader's parent, or the student's kernel) trains it once per process: the
chapter's two-layer attention-only model on the induction task, from a fixed seed, on one CPU
thread (a few seconds), its global random state left as it was. A model is not data, so its
weights cross the sandbox's boundary as tensors, with every call, and the sandbox builds a
fresh model from them for each call: an answer that leaves a head removed spoils nothing after
it, and the sandbox trains nothing.
"""

from __future__ import annotations

import functools
from functools import partial
from typing import Any, Dict, List, Sequence, Tuple

import torch
from torch import Tensor

import qkv

from ._experiment import Experiment, ExperimentCheck
from .harness import Mistake, one_thread
from .mistakes.heads import mean_ablate as _mean_ablate, repeat_loss as _repeat_loss

#: The model every call measures: the chapter's, trained from this seed for this many steps.
TRAIN_SEED, TRAIN_STEPS = 2, 300
#: Sequences in the batch each measurement draws.
PROBE = 64


@functools.lru_cache(maxsize=1)
def _trained_state() -> Dict[str, Tensor]:
    # One thread: the same sums in every process, whatever its thread count.
    with torch.random.fork_rng(devices=[]), one_thread():
        torch.manual_seed(TRAIN_SEED)
        task = qkv.InductionTask()
        model = qkv.AttentionOnlyTransformer(task.vocab_size, task.length)
        probe = task.sample(8, torch.Generator().manual_seed(TRAIN_SEED))
        qkv.train_induction(model, task, TRAIN_STEPS, probe, seed=TRAIN_SEED, every=TRAIN_STEPS)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _model_from(values: Sequence[Tensor]) -> qkv.AttentionOnlyTransformer:
    """The chapter's model with these weights, in its ``state_dict``'s order."""
    task = qkv.InductionTask()
    with torch.random.fork_rng(devices=[]):
        model = qkv.AttentionOnlyTransformer(task.vocab_size, task.length)
    model.load_state_dict(dict(zip(model.state_dict(), values)))
    return model.eval()


def trained_model() -> qkv.AttentionOnlyTransformer:
    """A fresh copy of the experiment's trained model (trained on the first call)."""
    return _model_from(list(_trained_state().values()))


def _mean_ablated_logits(model: Any, layer: int, head: int, tokens: Tensor,
                         dims: Tuple[int, ...] = (0, 1)) -> Tensor:
    attention = model.layers[layer]
    hook = attention.out_proj.register_forward_pre_hook(
        lambda module, inputs: (_mean_ablate(inputs[0], [head], attention.num_heads, dims=dims),))
    try:
        return model(tokens)[0]
    finally:
        hook.remove()


@torch.no_grad()
def ablation_rise(model: Any, layer: int, head: int, how: str, generator: torch.Generator,
                  dims: Tuple[int, ...] = (0, 1), probe: int = PROBE, unpaired: str = "") -> float:
    """The rise of the loss on the repeat (:func:`._repeat_loss`) on ``PROBE`` sequences of
    :class:`qkv.InductionTask` drawn from ``generator`` when head ``(layer, head)`` is removed,
    by zeroing (``how="zero"``) or by its mean over the batch and positions (``"mean"``;
    ``dims=(1,)``: the mistake of each sequence's own mean, as one sequence at a time gives);
    ``probe``: the sequences drawn; ``unpaired``: the two losses measured on two batches drawn
    one after the other, ``"ablated"`` (the ablated loss on the second) or ``"intact"``."""
    first = qkv.InductionTask().sample(probe, generator)
    second = qkv.InductionTask().sample(probe, generator) if unpaired else first
    intact, batch = (second, first) if unpaired == "intact" else (first, second)
    base = _repeat_loss(model(intact.tokens)[0], intact.tokens, intact.repeat)
    if how == "zero":
        with qkv.ablate_heads(model, [(layer, head)]):
            logits = model(batch.tokens)[0]
    else:
        logits = _mean_ablated_logits(model, layer, head, batch.tokens, dims)
    return (_repeat_loss(logits, batch.tokens, batch.repeat) - base).item()


def _rise(layer: int, head: int, how: str, generator: torch.Generator, **slip: Any) -> float:
    """:func:`ablation_rise` of the trained model with a slip (its keywords)."""
    return ablation_rise(trained_model(), layer, head, how, generator, **slip)


ABLATION_RISE = Experiment(
    name="ablation_rise", seeds=12,
    reference=lambda layer, head, how, generator: ablation_rise(trained_model(), layer, head,
                                                                how, generator),
    # Layer 1's head 0 is nearly constant: its mean over the batch leaves the loss almost as it
    # is (0.025), its mean over each sequence alone does not (0.068).
    settings=((1, 0, "zero"), (0, 1, "mean"), (1, 0, "mean")),
    # Zero and mean ablation of these heads raise the loss alike on average (2.57 and 2.57,
    # 2.51 and 2.53): only the numbers seed for seed tell an answer that ignores how apart.
    mistakes=(Mistake("how ignored: the head always zeroed (qkv.ablate_heads)",
                      "how='mean' replaces the head's output by its mean over the batch and the "
                      "positions (mean_ablated_logits), how='zero' by zeros",
                      lambda layer, head, how, generator: ablation_rise(
                          trained_model(), layer, head, "zero", generator)),
              Mistake("how ignored: the head always replaced by its mean",
                      "how='zero' zeroes the head's output (qkv.ablate_heads), how='mean' "
                      "replaces it by its mean over the batch and the positions",
                      lambda layer, head, how, generator: ablation_rise(
                          trained_model(), layer, head, "mean", generator)),
              Mistake("the mean taken over each sequence alone (one sequence at a time)",
                      "mean ablation replaces the head's output by its mean over the whole batch "
                      "and the positions: run the 64 sequences as one batch (mean_ablated_logits)",
                      lambda layer, head, how, generator: ablation_rise(
                          trained_model(), layer, head, how, generator,
                          (1,) if how == "mean" else (0, 1))),
              # Both settings' heads raise the loss alike on average: only the numbers seed
              # for seed tell a swap apart.
              Mistake("layer and head swapped (head `layer` of layer `head` removed)",
                      "remove head `head` of layer `layer`: model.layers[layer], "
                      "and qkv.ablate_heads(model, [(layer, head)])",
                      lambda layer, head, how, generator: ablation_rise(
                          trained_model(), head, layer, how, generator)),
              # A rise is a paired difference: on two batches the intact loss's own noise
              # (as large as the rise of layer 1's head 0) joins it; the mean stays right.
              *(Mistake(f"the intact and the ablated loss measured on two different batches "
                        f"(the {which} loss on the second)", "draw ONE batch and measure both "
                        "losses on it: the rise is the difference on the same sequences",
                        partial(_rise, unpaired=which)) for which in ("ablated", "intact")),
              Mistake("32 sequences drawn instead of 64", "draw InductionTask().sample(64, "
                      "generator): the experiment measures on 64 sequences",
                      partial(_rise, probe=32))),
    helpers={"mean_ablate": _mean_ablate, "repeat_loss": _repeat_loss},
    quantity="rise of the loss on the repeat",
    hint="draw InductionTask().sample(64, generator); return repeat_loss with the head removed "
         "(how='zero': qkv.ablate_heads; how='mean': mean_ablated_logits) minus repeat_loss with "
         "nothing removed, as a float")


class AblationCheck(ExperimentCheck):
    """An :class:`ExperimentCheck` whose student's function gets the trained model first:
    ``ablation_rise(model, *setting, generator)``; each input is ``(weights, *setting, seed)``
    and the model is built from the weights where the student's code runs."""

    def prepare(self) -> None:
        _trained_state()

    def starting(self) -> str:
        if _trained_state.cache_info().currsize:
            return ""
        return (f"check_{self.exercise}: training the chapter's model for the check first "
                f"({TRAIN_STEPS} steps, once per kernel: about 10 s)...")

    def calls(self, seed: int, **options: Any) -> List[Tuple[tuple, dict]]:
        # Trained here, on the trusted side, outside a call's time limit; the weights are data.
        weights = tuple(_trained_state().values())
        return [((weights, *args), kwargs) for args, kwargs in super().calls(seed, **options)]

    def run_student(self, student: Any, args: tuple, kwargs: dict, **options: Any) -> Any:
        weights, *setting, seeds = args
        return self.measure(student, setting, seeds, _model_from(weights))


ABLATION_CHECK = AblationCheck(ABLATION_RISE)
