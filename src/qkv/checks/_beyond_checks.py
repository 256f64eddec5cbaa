"""The checks of the exercises beyond the page (:mod:`._beyond`, :mod:`._beyond_early`,
:mod:`._beyond_mid`, :mod:`._beyond_late`, :mod:`._beyond_capstone`), by the name test cells
call them: each public module adds its assignment's to its ``CHECKS`` (for
:mod:`.grading`) with :func:`checks`, and its ``check_<name>`` runs them with ``run_check``."""

from __future__ import annotations

from typing import Dict

from . import _beyond as b
from . import _beyond_early as e
from . import _beyond_late as v
from . import _beyond_capstone as c
from . import _beyond_mid as m
from ._experiment import ExperimentCheck
from .harness import Check, single

__all__: list = []

CHECKS: Dict[str, Check] = {
    **{f"check_{x.name}": single(x) for x in (
        b.ATTENTION_WITH_TEMPERATURE, b.PADDED_CAUSAL_ATTENTION, b.STREAMING_ATTENTION,
        v.LINEAR_ATTENTION, v.DILATED_WINDOW_MASK_MOD, e.PADDED_BAHDANAU_WEIGHTS, e.TOP_K_LOOKUP,
        e.SELF_ATTENTION_NO_SELF, e.MULTI_HEAD_SELF_ATTENTION, e.APPLY_ROPE_SCALED,
        c.DROPOUT_BLOCK_FORWARD, c.SWIGLU_MLP, m.TALKING_HEADS_ATTENTION, m.APPLY_PARTIAL_ROPE)},
    **{f"check_{x.name}": ExperimentCheck(x) for x in (
        b.MAX_WEIGHT, b.PADDING_LEAK, b.FP16_OVERFLOW_RATE, v.LINEAR_GAP, e.LOOKUP_ENTROPY,
        e.SELF_WEIGHT, e.ALIBI_FAR_WEIGHT, c.ORDER_SENSITIVITY, m.HEAD_DIFFERENCE)},
}


def checks(*names: str) -> Dict[str, Check]:
    """The checks called ``names`` (``"check_max_weight"``...)."""
    return {name: CHECKS[name] for name in names}
