"""``kv_cache_step``'s check (assignment 8): one decoding step with a key/value cache.

The new keys and values are appended to the caches along the sequence axis, and the L new
queries attend to every cached key up to their own position (the mask aligned to the bottom
right); each :class:`Mistake` is :func:`.mistakes.efficient.kv_step_variant` with one switch
turned.
"""

from __future__ import annotations

from functools import partial
from typing import Any, List

import torch

import qkv

from .harness import Case, close, Exercise, half_case, Mistake, via_float32
from .mistakes.attention import FILL_HINT, OVERFLOW, TORCH_ATTENTION, qkv_inputs
from .mistakes.efficient import kv_step_variant

__all__: list = []


def _kv_close(got: Any, expected: Any, rtol: float, atol: float) -> bool:
    if not isinstance(got, (tuple, list)) or len(got) != 3:
        return False
    for g, e in zip(got, expected):
        if e is None or g is None:
            if not (e is None and g is None):
                return False
        elif not close(g, e, rtol, atol):
            return False
    return True


def _kv_cases() -> List[Case]:
    def make(batch, P, L, E, Ev, big=0.0, **kw):
        def build(gen, device, dtype):
            q, k, v = qkv_inputs(gen, device, dtype, batch, L, L, E, Ev, big=big)
            kwargs = dict(kw)
            if P:
                _, kc, vc = qkv_inputs(gen, device, dtype, batch, 1, P, E, Ev, big=big)
                kwargs.update(k_cache=kc, v_cache=vc)
            return (q, k, v), kwargs
        return build

    f32, f64 = torch.float32, torch.float64
    # Several new tokens first: with one, a mask hiding the new token's own key and
    # attending only to the old cache give the same result, and would be confused.
    return [
        Case("L=3 new tokens at once after P=4 cached ones (B=2, H=1)",
             make((2, 1), 4, 3, 4, 3), f64),
        Case("one new token (L=1) after P=5 cached ones, B=2, H=2, E=4, Ev=3",
             make((2, 2), 5, 1, 4, 3), f32),
        Case("the first token: empty cache (k_cache=v_cache=None), L=1",
             make((2, 2), 0, 1, 4, 3), f32),
        Case("a prompt of L=5 tokens into an empty cache (B=1, H=2)",
             make((1, 2), 0, 5, 6, 2), f64),
        Case("one new token after P=7 cached ones with scale=0.3",
             make((2, 1), 7, 1, 4, 4, scale=0.3), f64),
        Case("a prompt of L=4 tokens into an empty cache with scale=0.3 (B=2, H=1)",
             make((2, 1), 0, 4, 4, 3, scale=0.3), f64),
        Case("L=2 new tokens after P=4 cached ones with large logits (scores near 800)",
             make((2, 1), 4, 2, 4, 3, big=40.0), f64),
        Case("L=3 new tokens after P=2 cached ones, every score very negative (near -800): a "
             "finite fill outweighs the real keys", make((2, 1), 2, 3, 4, 3, big=-40.0), f64),
        half_case("L=3 new tokens at once after P=4 cached ones (B=2, H=2)", make((2, 2), 4, 3, 4, 3)),
    ]


_CAT_DIM = "the cache appended on the wrong dim"
# The mask of the new tokens, as the assignment writes it (device= taken from the query).
_KV_MASK = "torch.ones(L, S, dtype=torch.bool, device=query.device).tril(S - L)"
_CAT_DIM_HINT = ("the cache grows along the sequence axis: torch.cat([k_cache, key], dim=-2) "
                 "(B, H, P, E) + (B, H, L, E) -> (B, H, P + L, E)")
_KV_SCALE_HINT = ("scale by 1/sqrt(E), E = query.shape[-1] the width of queries and keys (or by "
                  "scale when it is given), not by the number of keys")


KV_CACHE_STEP = Exercise(
    name="kv_cache_step", reference=via_float32(qkv.kv_cache_step), cases=_kv_cases(),
    mistakes=[
        Mistake("the causal mask aligned to the upper left (is_causal=True)",
                "the L new tokens are the LAST L of the S keys: new token i sits at position "
                f"S - L + i and may see keys 0 .. S - L + i, i.e. {_KV_MASK} (is_causal "
                "aligns to the top-left)",
                partial(kv_step_variant, mask="upper_left")),
        Mistake("no causal mask among several new tokens",
                "with L > 1 new tokens, each may not see the new tokens after it: use the mask "
                f"{_KV_MASK}", partial(kv_step_variant, mask=None)),
        Mistake("the new queries attend only to the old cache, not to the new keys",
                "append the new key and value to the cache first, then attend to all of it",
                partial(kv_step_variant, attend_new=False)),
        Mistake("the new keys and values put before the cache instead of after it",
                "torch.cat([k_cache, key], dim=-2): the newest token goes last",
                partial(kv_step_variant, new_first=True)),
        Mistake("the key cache put after the new keys (torch.cat([key, k_cache])) while the "
                "value cache is appended", "torch.cat([k_cache, key], dim=-2), as for the "
                "values: the newest token goes last in both caches, so key j matches value j",
                partial(kv_step_variant, new_first="key")),
        Mistake("the old caches returned instead of the appended ones",
                "return (output, new_k_cache, new_v_cache), the caches with the new rows added",
                partial(kv_step_variant, return_old=True)),
        *(Mistake(f"{_CAT_DIM} (dim={d} instead of dim=-2)", _CAT_DIM_HINT,
                  partial(kv_step_variant, cat_dim=d)) for d in (-1, -3, -4)),
        Mistake("scaled by 1/sqrt(S), the number of keys, instead of 1/sqrt(E)", _KV_SCALE_HINT,
                partial(kv_step_variant, scale_by="S")),
        Mistake("no scaling", _KV_SCALE_HINT, partial(kv_step_variant, scale_by="none")),
        Mistake("the scale argument ignored (1/sqrt(E) even when scale is given)",
                "when scale is given, multiply the scores by it; 1/sqrt(E) is only its default",
                partial(kv_step_variant, scale_given=False)),
        Mistake("scaled by 1/sqrt(Ev), the width of the values, instead of 1/sqrt(E)",
                _KV_SCALE_HINT, partial(kv_step_variant, scale_by="Ev")),
        Mistake("the causal mask off by one (each new token's own key is masked)",
                f"new token i sits at position S - L + i and sees itself: {_KV_MASK}, not "
                "tril(S - L - 1)",
                partial(kv_step_variant, diag=-1)),
        Mistake("the causal mask off by one (one future key is allowed)",
                "new token i may see keys 0 .. S - L + i only: tril(S - L), not tril(S - L + 1)",
                partial(kv_step_variant, diag=1)),
        Mistake("the causal mask inverted (the allowed keys hidden, the future ones kept)",
                f"masked_fill fills where its mask is True: with allowed = {_KV_MASK} (True = "
                "may attend), fill ~allowed", partial(kv_step_variant, invert=True)),
        Mistake("softmax over the queries (dim=-2) instead of the keys",
                "each new query's weights over the S keys sum to one: softmax over the last "
                "dim (-1)", partial(kv_step_variant, dim=-2)),
        Mistake("a finite fill like -1e9 (it overflows in float16)", FILL_HINT,
                partial(kv_step_variant, fill=-1e9)),
        Mistake(*OVERFLOW, partial(kv_step_variant, stable=False)),
        Mistake("the new keys appended to the value cache (torch.cat([v_cache, key]))",
                "the value cache grows with the values: torch.cat([v_cache, value], dim=-2)",
                partial(kv_step_variant, v_from_key=True)),
    ],
    error_hints=[("Sizes of tensors must match except in dimension", f"{_CAT_DIM}? {_CAT_DIM_HINT}"),
                 ("without overflow", FILL_HINT)],
    forbid=TORCH_ATTENTION,
    compare=_kv_close,
    legend="(output (B, H, L, Ev), k_cache (B, H, P + L, E), v_cache (B, H, P + L, Ev))",
)
