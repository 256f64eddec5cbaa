"""What chunked attention may hold at once: :class:`KeySpanWatch`.

Chunked attention exists to use memory proportional to ``chunk_size``, not to the number of
keys S; its answer gives the same numbers as full attention, so only what it builds on the
way tells them apart. The watch sees every tensor the answer creates at the level of
torch's operators (views, in-place updates and tensors built from Python numbers included).
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from torch import Tensor

from ._guard import harness

_SPAN_HINT = ("visit the keys chunk_size at a time: keep only a running maximum, sum and output "
              "per query, so that no tensor made from the queries spans all S keys (no (..., L, S) "
              "scores, and no full row (..., 1, S) per query either)")


class KeySpanWatch:
    """Notices a floating tensor that spans all S keys and is not made from the keys,
    values or mask alone: a full row (or matrix) of scores or weights.

    It follows every tensor the answer creates, at the level of torch's operators (so
    nothing escapes it: views, in-place updates, tensors built from Python numbers), with
    the inputs it derives from. Chunking holds at most ``chunk_size`` keys' scores at a
    time, so any tensor with an axis of length S that derives from the queries (or from
    fresh numbers) means the softmax saw every key at once, whether the answer builds the
    full ``(L, S)`` matrix or one row of it per query. It only looks where S is told apart
    from every other size (S longer than ``chunk_size`` and equal to no other axis).
    """

    def __init__(self, args: tuple, kwargs: dict) -> None:
        query, key, value = args[:3]
        chunk = kwargs.get("chunk_size", args[6] if len(args) > 6 else 256)
        mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
        self.S = key.shape[-2]
        others = {query.shape[-2], query.shape[-1], value.shape[-1], *query.shape[:-2],
                  *key.shape[:-2], *value.shape[:-2]}
        self.active = chunk < self.S and self.S not in others
        self.problem: Optional[Tuple[str, str]] = None
        self._labels: dict = {}
        self._keep: list = []  # holds followed tensors so that their ids are not reused
        for t, label in ((query, "q"), (key, "k"), (value, "v"), (mask, "m")):
            if type(t) is Tensor:
                self._labels[id(t)] = frozenset(label)
                self._keep.append(t)

    @harness
    def observe_op(self, op: Any, args: tuple, kwargs: dict, out: Any) -> None:
        if self.problem is not None or not self.active:
            return
        labels, known = _NONE, self._labels
        for a in (*args, *kwargs.values()):
            for t in (a if type(a) in (list, tuple) else (a,)):
                if type(t) is Tensor:
                    # A tensor never seen: fresh numbers, unless it is a number (0-dim).
                    labels = labels | known.get(id(t), _NONE if t.dim() == 0 else _FRESH)
        labels = labels or _FRESH
        for t in (out if type(out) in (list, tuple) else (out,)):
            if type(t) is not Tensor:
                continue
            labels_t = known[id(t)] = known.get(id(t), _NONE) | labels
            self._keep.append(t)
            if (not labels_t <= _INPUTS and t.is_floating_point()
                    and self.S in tuple(t.shape)):
                self.problem = (f"it makes a tensor of shape {tuple(t.shape)} that spans all "
                                f"S={self.S} keys (a full row of scores or weights)", _SPAN_HINT)
                return


_NONE, _FRESH, _INPUTS = frozenset(), frozenset("n"), frozenset("kvm")
