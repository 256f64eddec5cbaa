"""The capstone's ablation as a check: ``ablation(seed, steps) -> (options, loss)``, judged by
training the same short run again (:func:`.capstone.check_ablation`)."""

from __future__ import annotations

import math
from functools import partial
from typing import Any, List, Sequence, Tuple

from torch import Tensor

import qkv

from .harness import Check, Raised, shown, split_outcome
from .result import CheckResult

__all__: list = []

#: Steps of the short run the check trains (the student's function, then the reference).
CHECK_STEPS = 5
#: How far the student's loss may land from the reference's on the same short run. Both run
#: on one machine's CPU, where the run is repeatable (equal to the last digit with 1 thread
#: or 2); another seed lands a few 1e-3 away (4.2133, 4.2432, 4.2398, 4.2520 for seeds 4-7),
#: which a tolerance of 0.01 took for the same run.
TOLERANCE = 1e-4
_ABLATION = "ablation"


def _options_problem(options: Any) -> str:
    """Why ``options`` is no change of the baseline (``""`` when it is one)."""
    baseline = qkv.ablation_baseline()
    if not isinstance(options, dict) or not options:
        return (f"the options must be a non-empty dict of settings to change, such as "
                f"{{'window': 16}}; got {options!r}")
    unknown = sorted(set(options) - set(baseline))
    if unknown:
        return (f"the options have settings the model does not have: {unknown}; choose among "
                f"{sorted(baseline)}")
    changed = {k: val for k, val in options.items() if baseline[k] != val}
    if not changed:
        return f"the options {options} change nothing: every value is the baseline's"
    chapter = qkv.chapter_ablations()
    made = [label for label, its in chapter.items() if its == changed]
    if made:
        return (f"the options {options} are the chapter's own ablation \"{made[0]}\"; choose "
                "a change the chapter did not make (it made "
                f"{', '.join(map(str, chapter.values()))})")
    return ""


class _AblationCheck(Check):
    """``ablation(seed, steps) -> (options, loss)``: a measurement, judged by measuring again.

    Its input is ``(seed, steps)`` for one short run (never the chapter's seed 0);
    :meth:`run_student` sends back the options as sorted ``(name, value)`` pairs and the
    loss, data only. The verdict: the options change the baseline, and
    :func:`qkv.ablation_loss` trained on the same options, seed and steps measures the same
    loss within :data:`TOLERANCE`.
    """

    def __init__(self) -> None:
        # A right answer trains a small model: allow a minute, not the usual 10 s.
        super().__init__("check_ablation", every_device=False, seconds=60.0)

    def calls(self, seed: int, **options: Any) -> List[Tuple[tuple, dict]]:
        self.resolve(options)
        return [((1 + seed % 10_000, CHECK_STEPS), {})]

    def run_student(self, student: Any, args: tuple, kwargs: dict, **options: Any) -> Any:
        got = student(*args, **kwargs)
        if isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], dict):
            pairs = tuple(sorted((str(k), v) for k, v in got[0].items()))
            loss = got[1].item() if isinstance(got[1], Tensor) and got[1].numel() == 1 else got[1]
            got = (("options",) + pairs, loss)
        return got, ()

    def judge(self, seed: int, outcomes: Sequence[Any], **options: Any) -> CheckResult:
        (run, steps), _ = self.calls(seed)[0]
        where = f"seed={run}, steps={steps}"
        fail = partial(CheckResult, _ABLATION, False, seed, where)
        if not outcomes:
            return fail(what=f"your {_ABLATION} did not finish on {where}", kind="timeout")
        out = outcomes[0]
        if isinstance(out, Raised):
            return out.failure(fail)
        got, _ = split_outcome(out)
        if not (isinstance(got, (tuple, list)) and len(got) == 2 and isinstance(got[0], (tuple, list))
                and got[0][:1] == ("options",)):
            return fail(what=f"it returned {shown(got)}", hint="return (options, loss): the dict of "
                        "settings you changed and the loss qkv.ablation_loss returned")
        settings, loss = dict(got[0][1:]), got[1]
        problem = _options_problem(settings)
        if problem:
            return fail(what=problem, hint="change one or more settings of qkv.ablation_baseline()")
        if isinstance(loss, bool) or not isinstance(loss, (int, float)) or not math.isfinite(loss):
            return fail(what=f"the loss must be a number, got {loss!r}")
        want = qkv.ablation_loss(settings, run, steps, progress=False)
        if abs(want - loss) > TOLERANCE:
            return fail(what=f"it returned a loss of {loss:.5f}, but training {settings} from "
                        f"seed {run} for {steps} steps measures {want:.5f}",
                        hint="return what qkv.ablation_loss(options, seed, steps) returns for the "
                             "seed and steps you are given")
        return CheckResult(_ABLATION, True, seed)


ABLATION_CHECK = _AblationCheck()
