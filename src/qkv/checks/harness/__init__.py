"""The machinery every check shares: what an exercise is made of, the three steps of a check
(its inputs, the student's call, the verdict) and running it in the student's kernel.

The check modules (:mod:`qkv.checks.scaling`, ...) and the catalogues of mistakes
(:mod:`qkv.checks.mistakes`) use only the names below; the modules behind them are private:

- :mod:`._exercise`: what an exercise is made of (cases, mistakes, forbidden calls);
  :mod:`._inputs`, :mod:`._half`, :mod:`._pairs`: input makers, half-precision cases, a pair's item;
- :mod:`._checks`: a check as test cells name it, and a module's table of them;
- :mod:`._harness`: the inputs and the student's call; :mod:`._verdict`: the verdict;
- :mod:`._kernel`: running a check in the student's kernel (``check_<name>`` itself);
- :mod:`._helpers`: the reference for an exercise's helpers while it runs;
- :mod:`._notice`: notices of calls the exercise asks not to make; :mod:`._draws`: what an
  experiment drew;
- :mod:`._compare`, :mod:`._kind`, :mod:`._match`, :mod:`._describe`, :mod:`._findings`,
  :mod:`._errors`: judging a result (close, of the right kind, a known mistake, what differs,
  what the student's error means).
"""

from ._checks import SECONDS, Check, ExerciseCheck, checks_of, pair_check, single
from ._compare import close, close_each, is_tensor
from ._draws import WORDS_PER_TWIST, drawn_count, twists
from ._exercise import NOTHING, Args, Case, Exercise, Forbidden, Mistake
from ._half import HALF, half_case, via_float32
from ._helpers import on_helpers
from ._harness import (ExerciseRule, InputsChanged, Noted, NotRepeatable, Raised, number_of,
                       plain, plain_number)
from ._inputs import bool_mask, randn, sizes
from ._kernel import check_now, make_check, one_thread, run_check
from ._kind import shown
from ._notice import notice_text, reference_names, whole_scores
from ._pairs import picked
from ._verdict import split_outcome

__all__ = [
    "Args", "bool_mask", "Case", "Check", "check_now", "checks_of", "close", "close_each",
    "drawn_count", "Exercise", "ExerciseCheck", "ExerciseRule", "Forbidden", "HALF",
    "half_case", "InputsChanged", "is_tensor", "make_check", "Mistake", "NOTHING", "notice_text",
    "Noted", "NotRepeatable", "number_of", "on_helpers", "one_thread", "pair_check", "picked", "plain",
    "plain_number", "Raised", "randn", "reference_names", "run_check", "SECONDS", "shown",
    "single", "sizes", "split_outcome", "twists", "via_float32", "whole_scores", "WORDS_PER_TWIST",
]
