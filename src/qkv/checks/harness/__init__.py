"""The machinery every check shares: what an exercise is made of, the three steps of a check
(its inputs, the student's call, the verdict) and running it in the student's kernel.

The check modules (:mod:`qkv.checks.scaling`, ...) and the catalogues of mistakes
(:mod:`qkv.checks.mistakes`) use only the names below; the modules behind them are private.
"""

from ._checks import (SECONDS, Check, ExerciseCheck, check_now, checks_of, make_check,
                      pair_check, run_check, single)
from ._compare import close, close_each, is_tensor
from ._draws import WORDS_PER_TWIST, drawn_count, twists
from ._exercise import NOTHING, Args, Case, Exercise, Forbidden, Mistake
from ._half import HALF, half_case, via_float32
from ._helpers import on_helpers
from ._harness import (ExerciseRule, InputsChanged, NotRepeatable, Raised, number_of,
                       plain, plain_number)
from ._inputs import bool_mask, devices, randn
from ._kind import shown
from ._notice import notice_text, reference_names, whole_scores
from ._pairs import picked
from ._verdict import split_outcome

__all__ = [
    "Args", "Case", "Check", "Exercise", "ExerciseCheck", "ExerciseRule", "Forbidden", "HALF",
    "InputsChanged", "Mistake", "NOTHING", "NotRepeatable", "Raised", "SECONDS", "WORDS_PER_TWIST", "bool_mask", "check_now",
    "checks_of", "close", "drawn_count", "close_each", "make_check", "pair_check", "devices", "half_case", "is_tensor", "notice_text", "picked", "plain",
    "number_of", "on_helpers", "plain_number", "shown",
    "randn", "reference_names", "run_check", "single", "split_outcome", "twists", "via_float32",
    "whole_scores",
]
