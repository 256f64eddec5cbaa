"""ablation_rise measured unpaired (the intact loss on one batch, the ablated loss on a second)
or on 32 sequences passed (wrong14 A1): their means are right, only the numbers seed for seed
tell them apart. Each is written as a student would; it must now fail, named."""

import pytest
import torch
import torch.nn.functional as F

from qkv import InductionTask, ablate_heads
from qkv.checks import CheckFailed, check_ablation_rise


def _repeat_loss(logits, tokens, repeat):
    loss = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
    return loss[repeat[:, :-1]].mean()


def _ablated_logits(model, layer, head, how, tokens):
    if how == "zero":
        with ablate_heads(model, [(layer, head)]):
            return model(tokens)[0]
    attn = model.layers[layer]
    d = attn.out_proj.in_features // attn.num_heads

    def hook(module, inputs):
        o = inputs[0].clone()
        o[..., head * d:(head + 1) * d] = o[..., head * d:(head + 1) * d].mean((0, 1), keepdim=True)
        return (o,)
    handle = attn.out_proj.register_forward_pre_hook(hook)
    try:
        return model(tokens)[0]
    finally:
        handle.remove()


def rise(kind=""):
    def ablation_rise(model, layer, head, how, generator):
        with torch.no_grad():
            first = InductionTask().sample(32 if kind == "32" else 64, generator)
            intact = _repeat_loss(model(first.tokens)[0], first.tokens, first.repeat)
            b = InductionTask().sample(64, generator) if kind == "two batches" else first
            logits = _ablated_logits(model, layer, head, how, b.tokens)
            return (_repeat_loss(logits, b.tokens, b.repeat) - intact).item()
    return ablation_rise


@pytest.mark.parametrize("kind,words", [("two batches", "two different batches"),
                                        ("32", "32 sequences drawn instead of 64")])
def test_the_slip_is_named(kind, words):
    with pytest.raises(CheckFailed) as info:
        check_ablation_rise(rise(kind))
    assert words in str(info.value), str(info.value)


def test_the_right_answer_written_so_passes():
    check_ablation_rise(rise())
