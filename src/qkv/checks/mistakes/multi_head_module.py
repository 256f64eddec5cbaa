"""How :func:`check_MultiHeadAttention` builds, runs and compares a student's module.

The check builds the student's class with the reference's arguments, copies the same
weights into its four ``nn.Linear`` layers and calls ``forward`` with each case's inputs
and keyword arguments, twice (in eval mode the two must agree: dropout left on would make
them differ); with ``need_weights=True`` it compares the output and the weights one by one,
so that a message can say which of the two is wrong.

The module's arguments and weights cross as data, a tuple ``(embed_dim, num_heads, kdim,
vdim, dropout or None, (four weights), (four biases, or four None for ``bias=False``))`` first
among the case's arguments (:func:`spec_dict` turns it into the dict the code below reads).
"""

from __future__ import annotations

import math
from typing import Any, List

import torch
from torch import Tensor, nn

import qkv

from ..harness import (bool_mask, Case, close, ExerciseRule, half_case, Mistake, NotRepeatable,
                       randn)

_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


def spec_dict(spec: Any) -> dict:
    """The module's arguments and weights as a dict, from the tuple that crosses as data."""
    if isinstance(spec, dict):
        return spec
    embed_dim, num_heads, kdim, vdim, dropout, weights, biases = spec
    out = {"embed_dim": embed_dim, "num_heads": num_heads, "kdim": kdim, "vdim": vdim,
           "device": weights[0].device, "dtype": weights[0].dtype,
           "weights": dict(zip(_PROJECTIONS, weights)), "biases": dict(zip(_PROJECTIONS, biases))}
    if dropout is not None:
        out["dropout"] = dropout
    return out


def _spec_tuple(spec: dict) -> tuple:
    return (spec["embed_dim"], spec["num_heads"], spec["kdim"], spec["vdim"],
            spec.get("dropout"), tuple(spec["weights"][n] for n in _PROJECTIONS),
            tuple(spec["biases"][n] for n in _PROJECTIONS))


def with_spec_dict(mistake: Mistake) -> Mistake:
    """A mistake written for the dict form, taking the tuple that crosses as data."""
    def fn(spec, *args, **kwargs):
        return mistake.fn(spec_dict(spec), *args, **kwargs)
    return Mistake(mistake.name, mistake.hint, fn)


# What each layer's shape should come from (the hint of a wrong weight shape).
_WIDTHS = {
    "q_proj": "q_proj = nn.Linear(embed_dim, embed_dim): it maps a query (embed_dim) to "
              "embed_dim features",
    "k_proj": "k_proj = nn.Linear(kdim, embed_dim): keys are kdim wide (kdim defaults to "
              "embed_dim when None)",
    "v_proj": "v_proj = nn.Linear(vdim, embed_dim): values are vdim wide (vdim defaults to "
              "embed_dim when None)",
    "out_proj": "out_proj = nn.Linear(embed_dim, embed_dim): it maps the merged heads "
                "(num_heads * head_dim = embed_dim) back to embed_dim",
}


def _give_weights(module: Any, spec: dict) -> dict:
    """Copy the spec's weights into the module's four layers; return each layer and its
    weight (as the layer holds it) by name."""
    __tracebackhide__ = True
    layers = {}
    for name in _PROJECTIONS:
        layer = getattr(module, name, None)
        if not isinstance(layer, nn.Linear):
            has = "has none" if layer is None else f"has a {type(layer).__name__}"
            raise ExerciseRule(
                f"the module needs an nn.Linear attribute {name} (q_proj, k_proj, v_proj, "
                f"out_proj, as qkv.MultiHeadAttention); it {has}",
                f"name the four layers as the text does: self.{name} = nn.Linear(...)")
        wants_bias = spec["biases"][name] is not None
        if layer.bias is None and wants_bias:  # else the copy below fails with a NoneType error
            raise ExerciseRule(
                f"{name} has no bias: create it with nn.Linear(..., bias=bias) (bias defaults "
                f"to True, as in qkv.MultiHeadAttention)")
        if layer.bias is not None and not wants_bias:
            raise ExerciseRule(
                f"built with bias=False, {name} has a bias all the same: pass bias=bias to each "
                f"nn.Linear")
        want = tuple(spec["weights"][name].shape)
        if tuple(layer.weight.shape) != want:
            raise ExerciseRule(
                f"self.{name}.weight has shape {tuple(layer.weight.shape)}, expected {want} = "
                f"(out_features, in_features)", _WIDTHS[name])
        with torch.no_grad():
            layer.weight.copy_(spec["weights"][name])
            if wants_bias:
                layer.bias.copy_(spec["biases"][name])
        layers[name] = (layer, layer.weight.detach().clone())
    return layers


def _check_returned(out: Any, need_weights: bool, embed_dim: int) -> None:
    """Refuse what is not ``(output, weights)``, saying when the two are swapped."""
    __tracebackhide__ = True
    if not isinstance(out, tuple) or len(out) != 2:
        raise ExerciseRule("forward must return a tuple (output, weights), as "
                             "nn.MultiheadAttention does (weights None unless need_weights=True)")
    first, second = out
    swapped = (first is None and isinstance(second, Tensor)) if not need_weights else (
        isinstance(first, Tensor) and isinstance(second, Tensor) and first.dim() > 0
        and second.dim() > 0 and second.shape[-1] == embed_dim != first.shape[-1])
    if swapped:
        raise ExerciseRule("forward returned (weights, output): return (output, weights), "
                             "the output first, as nn.MultiheadAttention does")
    if not need_weights and second is not None:
        raise ExerciseRule("with need_weights=False forward must return (output, None), as "
                           "nn.MultiheadAttention does: the weights are asked for only with "
                           "need_weights=True (they take L x S memory per head)")


def _forward(cls: Any, spec: Any, *inputs: Any, **kwargs: Any) -> Tensor:
    """Build ``cls`` as the spec says, give it the spec's weights, run it (twice: in eval
    mode both runs must agree), return what to compare."""
    spec = spec_dict(spec)
    extra = {"dropout": spec["dropout"]} if "dropout" in spec else {}
    if spec["biases"]["q_proj"] is None:  # bias=False; passed only then: the default is True
        extra["bias"] = False
    module = cls(spec["embed_dim"], spec["num_heads"], kdim=spec["kdim"], vdim=spec["vdim"],
                 device=spec["device"], dtype=spec["dtype"], **extra)
    layers = _give_weights(module, spec)
    module.eval()
    out = module(*inputs, **kwargs)
    again = module(*inputs, **kwargs)
    for name, (layer, weight) in layers.items():
        # A layer made anew in forward has fresh random weights: the check's are lost.
        if getattr(module, name, None) is not layer or not torch.equal(layer.weight.detach(),
                                                                       weight):
            raise ExerciseRule(
                f"forward replaced or changed self.{name} (the check's weights are gone): "
                f"create the four nn.Linear layers once, in __init__, and only call them in "
                f"forward (a new nn.Linear has fresh random weights at every call)")
    _check_returned(out, bool(kwargs.get("need_weights")), spec["embed_dim"])
    if not all(_same_output(a, b) for a, b in zip(out, again)):
        raise NotRepeatable("two calls of forward on the same input in eval mode gave "
                            "different outputs: dropout is still on (or something else "
                            "random runs in forward)")
    if kwargs.get("need_weights"):
        return out  # compared item by item, so that a message can say which one is wrong
    return out[0]


def close_pair(got: Any, expected: Any, rtol: float, atol: float) -> bool:
    """The output alone, or ``(output, weights)`` when the case asks for the weights."""
    if isinstance(expected, tuple):
        return (isinstance(got, tuple) and len(got) == 2
                and all(close(g, e, rtol, atol) for g, e in zip(got, expected)))
    return close(got, expected, rtol, atol)


def reference(spec, *inputs, **kwargs):
    return _forward(qkv.MultiHeadAttention, spec, *inputs, **kwargs)


def _same_output(a: Any, b: Any) -> bool:
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return a.shape == b.shape and bool(torch.equal(a.detach().nan_to_num(),
                                                       b.detach().nan_to_num()))
    return True


def run_student(student, spec, *inputs, **kwargs):
    return _forward(student, spec, *inputs, **kwargs)


def mha_cases() -> List[Case]:
    def make(batch, L, S, D, H, kdim=None, vdim=None, self_attention=False, **options):
        def build(gen, device, dtype):
            kd, vd = kdim or D, vdim or D
            widths = {"q_proj": D, "k_proj": kd, "v_proj": vd, "out_proj": D}
            spec = {
                "embed_dim": D, "num_heads": H, "kdim": kd, "vdim": vd,
                "device": device, "dtype": dtype,
                **({"dropout": options["dropout"]} if "dropout" in options else {}),
                "weights": {n: randn(gen, D, w, device=device, dtype=dtype) / math.sqrt(w)
                            for n, w in widths.items()},
                "biases": {n: (randn(gen, D, device=device, dtype=dtype) * 0.1
                               if options.get("bias", True) else None) for n in widths},
            }
            query = randn(gen, *batch, L, D, device=device, dtype=dtype)
            kwargs = {}
            if options.get("padding"):  # (B, S), or (S,) for an unbatched query
                lengths = torch.randint(1, S, (batch[0] if batch else 1,), generator=gen)
                key_mask = torch.arange(S)[None, :] < lengths[:, None]
                kwargs["key_mask"] = (key_mask if batch else key_mask[0]).to(device)
            if options.get("mask"):
                kwargs["mask"] = bool_mask(gen, L, S, device=device)
            for name in ("is_causal", "need_weights", "average_attn_weights"):
                if name in options:
                    kwargs[name] = options[name]
            spec = _spec_tuple(spec)
            if self_attention:
                return (spec, query), kwargs
            key = randn(gen, *batch, S, kd, device=device, dtype=dtype)
            if options.get("value_omitted"):
                return (spec, query, key), kwargs
            value = randn(gen, *batch, S, vd, device=device, dtype=dtype)
            return (spec, query, key, value), kwargs
        return build

    f32, f64 = torch.float32, torch.float64
    return [
        Case("self-attention (key and value omitted), B=2, L=5, embed_dim=8, num_heads=2",
             make((2,), 5, 5, 8, 2, self_attention=True), f32),
        Case("cross-attention, B=2, L=4, S=6, embed_dim=12, num_heads=3, kdim=5, vdim=7",
             make((2,), 4, 6, 12, 3, kdim=5, vdim=7), f64),
        Case("batch B=3, L=S=5, embed_dim=8, num_heads=4 with key_mask (B, S)",
             make((3,), 5, 5, 8, 4, padding=True), f32),
        Case("B=2, L=4, S=6, embed_dim=6, num_heads=2 with a bool mask (L, S)",
             make((2,), 4, 6, 6, 2, mask=True), f64),
        Case("B=2, L=S=5, embed_dim=8, num_heads=2 with is_causal=True",
             make((2,), 5, 5, 8, 2, is_causal=True), f32),
        Case("B=2, L=3, S=5, embed_dim=8, num_heads=2 with is_causal=True (L < S: top left, "
             "query i sees keys 0..i)", make((2,), 3, 5, 8, 2, is_causal=True), f64),
        Case("unbatched input, L=3, S=4, embed_dim=6, num_heads=3", make((), 3, 4, 6, 3), f64),
        Case("B=2, L=3, S=5, embed_dim=8, num_heads=2 with need_weights=True "
             "(the averaged weights are compared too)",
             make((2,), 3, 5, 8, 2, need_weights=True), f64),
        Case("B=2, L=3, S=5, embed_dim=8, num_heads=2, key given and value omitted (value "
             "defaults to key)", make((2,), 3, 5, 8, 2, value_omitted=True), f32),
        Case("B=2, L=S=4, embed_dim=8, num_heads=4 with key_mask, need_weights=True and "
             "average_attn_weights=False (the per-head weights are compared too)",
             make((2,), 4, 4, 8, 4, padding=True, need_weights=True,
                  average_attn_weights=False), f64),
        Case("B=2, L=S=4, embed_dim=8, num_heads=2, built with dropout=1.0 and put in eval mode "
             "(no dropout in eval)", make((2,), 4, 4, 8, 2, dropout=1.0), f32),
        Case("B=2, L=3, S=5, embed_dim=8, num_heads=2, built with bias=False (no layer has a "
             "bias)", make((2,), 3, 5, 8, 2, bias=False), f64),
        # After the batched ones: a mistake over the batch is named there first.
        Case("unbatched input, L=3, S=4, embed_dim=6, num_heads=3 with need_weights=True "
             "(weights (L, S))", make((), 3, 4, 6, 3, need_weights=True), f32),
        Case("unbatched input, L=3, S=5, embed_dim=6, num_heads=2 with key_mask (S,)",
             make((), 3, 5, 6, 2, padding=True), f64),
        half_case("B=2, L=S=5, embed_dim=8, num_heads=2 with key_mask and is_causal=True",
                  make((2,), 5, 5, 8, 2, padding=True, is_causal=True)),
    ]
