"""Assignment 11: exercises that copying a page cannot answer (see :mod:`._beyond`).

- **Debugging**: a colleague's pre-norm block for a model without RoPE, with dropout, printed
  with three bugs (the stream replaced by its normalised copy, the causal mask inverted,
  dropout left on in eval). Each wrong version below is the fixed block with some of those
  bugs put back, every combination of them, so that the check names each bug still present.
- **Variation**: SwiGLU's gated MLP, which the course's block (a GELU MLP) does not contain.
- **Experiment**: how much the last position's output changes when the positions before it
  are shuffled, through a stack of blocks with RoPE and without positions at all.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Dict

import torch
import torch.nn.functional as F
from torch import Tensor

import qkv

from ._experiment import Experiment
from .harness import Case, Exercise, half_case, Mistake, randn, via_float32
from .mistakes.capstone import dropout_view, swiglu_variant, viewed_block_variant

__all__: list = []

# --------------------------------------------------------------- debugging: a block with dropout


def block_without_positions(x: Tensor, params: Dict[str, Tensor], num_heads: int,
                            dropout: float = 0.1, training: bool = False) -> Tensor:
    """:class:`qkv.transformer.Block` without positions (``position="none"``), multi-head,
    with dropout on each sublayer's output in training, as a function of its weights."""
    block = qkv.Block(x.shape[-1], num_heads, d_ff=params["mlp.up.weight"].shape[0], dropout=dropout,
                  position="none")
    block.to(device=x.device, dtype=x.dtype).train(training)
    block.load_state_dict(params)  # after .to: float64 weights stay float64
    with torch.no_grad():
        return block(x)[0]


def _dropout_case(B: int, L: int, D: int, H: int, mlp: bool = True, attn: bool = True,
                  **kwargs):
    def build(gen, device, dtype):
        drawn = qkv.random_block_params(D, H, generator=gen)
        params = {n: t.to(device=device, dtype=dtype) for n, t in drawn.items()}
        for n in ("norm1.weight", "norm2.weight"):  # gains away from 1: a norm's place shows
            params[n] = 1 + 0.5 * randn(gen, D, device=device, dtype=dtype)
        if not mlp:  # the block then adds the attention's output only (see dropout_view)
            params["mlp.down.weight"] = torch.zeros_like(params["mlp.down.weight"])
        if not attn:  # the block then adds the MLP's output only
            params["attn.out_proj.weight"] = torch.zeros_like(params["attn.out_proj.weight"])
        return (3 * randn(gen, B, L, D, device=device, dtype=dtype), params, H), kwargs
    return build


#: The printed block's bugs: (name, hint, the variant's switch).
_BUGS = (
    ("the stream replaced by its normalised copy (x = rms_norm(x, ...)), so the residual adds "
     "to the normalised input", "keep the stream: h = rms_norm(x, norm1.weight), attend from h, "
     "then x = x + (the attention's output)", {"residual": "normed"}),
    ("the causal mask inverted (triu: each position sees itself and the positions AFTER it)",
     "position i may see keys 0 .. i: torch.ones(L, L, dtype=torch.bool).tril()",
     {"mask": "inverted"}),
    ("dropout left on in eval after the attention (F.dropout's training defaults to True)",
     "F.dropout(a, dropout, training=training): in eval (training=False) nothing is dropped",
     {"eval_dropout": ("attn",)}),
)


def _variant(**switches):
    return partial(viewed_block_variant, **switches)


DROPOUT_BLOCK_FORWARD = Exercise(
    name="dropout_block_forward", reference=partial(dropout_view, block_without_positions),
    run_student=dropout_view,
    cases=[
        Case("B=2, L=5, D=16, 4 heads, dropout=0.1, in eval (training=False)",
             _dropout_case(2, 5, 16, 4, dropout=0.1, training=False), torch.float64),
        Case("B=1, L=7, D=8, 2 heads, dropout and training left out (0.1, eval)",
             _dropout_case(1, 7, 8, 2), torch.float32),
        Case("B=2, L=8, D=16, 4 heads, dropout=0.25 in training, the MLP's output matrix at zero "
             "(compared: the factor the attention's kept outputs are scaled by, against eval)",
             _dropout_case(2, 8, 16, 4, mlp=False, dropout=0.25, training=True), torch.float64),
        Case("B=2, L=6, D=16, 4 heads, dropout=0.25 in training, the attention's output matrix "
             "at zero (compared: the factor the MLP's kept outputs are scaled by, against eval)",
             _dropout_case(2, 6, 16, 4, attn=False, dropout=0.25, training=True), torch.float64),
    ],
    # The printed block's bugs one by one; the exercise also tries them together
    # (harness.printed_combinations, most bugs first).
    mistakes=[Mistake(f"{name} (a bug of the printed block)", hint, _variant(**switches))
              for name, hint, switches in _BUGS] + [
        Mistake("dropout's kept entries not divided by 1 - dropout",
                "in training, dropout zeroes each entry with probability p and divides the "
                "others by 1 - p, so that the expected output is the eval output: F.dropout "
                "does both", _variant(rescale=False)),
        Mistake("each entry kept with probability dropout instead of dropped with it",
                "dropout=p is the probability of dropping an entry: keep it where "
                "torch.rand_like(t) >= p (or use F.dropout(t, p, training=training))",
                _variant(keep_with_p=True)),
        Mistake("dropout left on in eval after both sublayers",
                "F.dropout(t, dropout, training=training) after the attention and the MLP",
                _variant(eval_dropout=("attn", "mlp"))),
        Mistake("no dropout after the MLP (in training only the attention's output is dropped)",
                "apply F.dropout(m, dropout, training=training) to the MLP's output too",
                _variant(no_dropout=("mlp",))),
        Mistake("dropout left on in eval after the MLP", "F.dropout(m, dropout, "
                "training=training): in eval nothing is dropped", _variant(eval_dropout=("mlp",))),
        Mistake("dropout removed instead of switched off in eval (in training it must drop)",
                "keep F.dropout(t, dropout, training=training) on each sublayer's output",
                _variant(no_dropout=("attn", "mlp"))),
        Mistake("post-norm (the norm after the residual addition) instead of pre-norm",
                "normalise the sublayer's INPUT and leave the stream alone: "
                "x = x + attention(norm1(x)), not x = norm1(x + attention(x))",
                _variant(residual="post")),
        *(Mistake(f"dropout {where}, not on {whose} output", f"drop what {whose} adds to the "
                  "stream, nothing else: x = x + F.dropout(a, dropout, training=training), "
                  "likewise for the MLP's m", _variant(drop_at=at))
          for where, whose, at in (
              ("on the attention weights", "the attention's", ("weights", "mlp")),
              ("on the stream after the attention's residual addition", "the attention's",
               ("attn stream", "mlp")),
              ("on the stream after each residual addition", "each sublayer's",
               ("attn stream", "mlp stream")),
              ("on the MLP's hidden layer", "the MLP's", ("attn", "hidden")))),
        Mistake("no causal mask (each position sees the positions after it)",
                "position i may see keys 0 .. i: mask with torch.ones(L, L, dtype=torch.bool).tril()",
                _variant(mask="none")),
        Mistake("no scaling", "divide the scores by sqrt(E), E = D // num_heads",
                _variant(scale=False)),
        Mistake("the dropout rate ignored (a fixed rate)", "pass the rate on: "
                "F.dropout(t, dropout, training=training); a number written in (0.1) is right "
                "only when dropout is 0.1", _variant(fixed_rate=0.1)),
        Mistake("GELU's tanh approximation (GPT-2's) in the MLP instead of exact GELU",
                "the block uses exact GELU: F.gelu(x), without approximate=\"tanh\"",
                _variant(act="gelu_tanh")),
    ],
    legend="(B, L, D)",
    helpers={"rms_norm": qkv.rms_norm, "split_heads": qkv.split_heads,
             "merge_heads": qkv.merge_heads},
)

# --------------------------------------------------------------- variation: SwiGLU


def swiglu_mlp(h: Tensor, params: Dict[str, Tensor]) -> Tensor:
    """SwiGLU's MLP (Shazeer, 2020): ``(silu(h W_gate^T) * (h W_up^T)) W_down^T``."""
    return (F.silu(h @ params["gate.weight"].T) * (h @ params["up.weight"].T)) @ params["down.weight"].T


def _swiglu_case(batch: tuple, D: int, F_: int, spread: float = 1.0):
    def build(gen, device, dtype):
        params = {"gate.weight": randn(gen, F_, D, device=device, dtype=dtype) / math.sqrt(D),
                  "up.weight": randn(gen, F_, D, device=device, dtype=dtype) / math.sqrt(D),
                  "down.weight": randn(gen, D, F_, device=device, dtype=dtype) / math.sqrt(F_)}
        return (spread * randn(gen, *batch, D, device=device, dtype=dtype), params), {}
    return build


_SWIGLU_HINT = "the hidden layer is silu(h @ gate.weight.T) * (h @ up.weight.T)"

SWIGLU_MLP = Exercise(
    name="swiglu_mlp", reference=via_float32(swiglu_mlp),
    cases=[
        Case("h of shape (B=2, L=5, D=16), hidden width 40", _swiglu_case((2, 5), 16, 40),
             torch.float64),
        Case("h of shape (L=7, D=8) (no batch), hidden width 24", _swiglu_case((7,), 8, 24),
             torch.float32),
        Case("h of shape (B=1, L=3, D=12) with large entries (std 4), hidden width 32",
             _swiglu_case((1, 3), 12, 32, spread=4.0), torch.float64),
        half_case("h of shape (B=2, L=4, D=16), hidden width 40", _swiglu_case((2, 4), 16, 40)),
    ],
    mistakes=[
        Mistake("the activation on the up projection, not the gate (gate and up swapped)",
                _SWIGLU_HINT + ": SiLU acts on the gate's projection only",
                partial(swiglu_variant, gated="up")),
        Mistake("no gate: silu(h W_up^T) W_down^T (the usual MLP with SiLU)",
                _SWIGLU_HINT + ": two projections of h, multiplied feature by feature",
                partial(swiglu_variant, gated="none")),
        Mistake("GELU instead of SiLU (that is GEGLU)", "silu(z) = z * sigmoid(z): F.silu",
                partial(swiglu_variant, act="gelu")),
        Mistake("sigmoid instead of SiLU (that is the original GLU)",
                "silu(z) = z * sigmoid(z), not sigmoid(z) alone", partial(swiglu_variant,
                                                                          act="sigmoid")),
        Mistake("ReLU instead of SiLU (that is ReGLU)", "silu(z) = z * sigmoid(z): F.silu",
                partial(swiglu_variant, act="relu")),
        Mistake("the gate added instead of multiplied", _SWIGLU_HINT + " (a product, feature "
                "by feature)", partial(swiglu_variant, combine="sum")),
        Mistake("SiLU applied to the product of the two projections", _SWIGLU_HINT + ": the "
                "activation acts on the gate before the product", partial(swiglu_variant,
                                                                          combine="inside")),
    ],
    legend="(..., D)",
)

# --------------------------------------------------------------- experiment: does order show?
#: The experiment's sizes: positions, model width, heads.
ORDER_L, ORDER_D, ORDER_H = 16, 32, 4


def order_sensitivity(num_layers: int, rope: bool, generator: torch.Generator, *,
                      relative_to: str = "before", reuse: str = "") -> float:
    """How much the last position's output of a stack of ``num_layers`` random blocks (with
    RoPE, or without positions) changes, relative to its size, when the positions before it
    are shuffled; or with a slip (``relative_to="after"``: divided by the shuffled output's
    norm; ``"l1"``: mean absolute values, not norms; ``reuse``: the first block's weights for
    every layer, drawn ``"once"``, or the ``"first"`` of the layers drawn)."""
    L, D, H = ORDER_L, ORDER_D, ORDER_H
    x = torch.randn(1, L, D, generator=generator)
    layers = [qkv.random_block_params(D, H, generator=generator)
              for _ in range(1 if reuse == "once" else num_layers)]
    layers = layers[:1] * num_layers if reuse else layers
    order = torch.cat([torch.randperm(L - 1, generator=generator), torch.tensor([L - 1])])

    def last(h: Tensor) -> Tensor:
        for p in layers:
            h = qkv.block_forward(h, p, H, H) if rope else block_without_positions(h, p, H, 0.0)
        return h[0, -1]

    before, after = last(x), last(x[:, order])
    if relative_to == "l1":
        return ((after - before).abs().mean() / before.abs().mean()).item()
    return ((after - before).norm() / (after if relative_to == "after" else before).norm()).item()


ORDER_SENSITIVITY = Experiment(
    # (1, False): one block without positions cannot see the order (0, but for rounding): an
    # answer that ignores rope or num_layers is told apart there, not at the other two.
    name="order_sensitivity", seeds=12, reference=order_sensitivity,
    settings=((1, True), (2, False), (1, False)), floor=1e-4,
    mistakes=(
        Mistake("rope ignored (the blocks with RoPE every time)", "rope=False runs the blocks "
                "without positions: dropout_block_forward(h, params, 4, 0.0)",
                lambda num_layers, rope, generator: order_sensitivity(num_layers, True, generator)),
        Mistake("num_layers ignored (two blocks every time)", "stack num_layers blocks, each "
                "with its own random_block_params drawn in turn",
                lambda num_layers, rope, generator: order_sensitivity(2, rope, generator)),
        Mistake("the change divided by the shuffled output's norm", "divide by the norm of the "
                "last position's output before the shuffle",
                partial(order_sensitivity, relative_to="after")),
        Mistake("mean absolute values instead of norms", "the size of a vector here is its "
                "norm: (after - before).norm() / before.norm()",
                partial(order_sensitivity, relative_to="l1")),
        *(Mistake("the first block's weights for every layer", "draw random_block_params once "
                  "per layer, in turn, and run each layer with its own",
                  partial(order_sensitivity, reuse=reuse)) for reuse in ("once", "first")),
    ),
    helpers={"block_forward": qkv.block_forward, "dropout_block_forward": block_without_positions},
    quantity="relative change of the last position's output",
    hint="draw x (1, 16, 32), then each layer's random_block_params(32, 4, generator=generator), "
         "then torch.randperm(15, generator=generator) from the generator, in that order; keep "
         "the last position last; run the stack (block_forward with RoPE, dropout_block_forward "
         "with dropout 0.0 without) on x and on the shuffled x; return the norm of the change of "
         "the last position's output divided by the norm of that output")
