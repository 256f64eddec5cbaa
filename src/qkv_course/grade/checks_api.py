"""The one place the grader meets the checks' grading API (:mod:`qkv.checks.grading`).

Everything :mod:`.judge` needs from the checks passes through here, so a change in that API is
a change in this module only: the inputs of a check's calls (drawn here, in the trusted
process, from a seed the student never sees), the judgement of the student's outputs (the
reference and the catalogue of mistakes run here too) and the answer to a question.
"""

from __future__ import annotations

import contextlib
import io
import threading
from typing import Any, Dict, List, Optional, Tuple

Args = Tuple[tuple, Dict[str, Any]]
OUTPUT = threading.Lock()  # held while sys.stdout is swapped, and while the run prints
#: Held while a check draws inputs, prepares or judges: the references of some checks use
#: torch's global random state (the ablation's training seeds it with torch.manual_seed,
#: the dropout block's reference is run on a seed), which one process's grading threads
#: share. Judged two at a time, one thread's seed moved the other's draws: a right ablation
#: measured against a corrupted reference, or the dropout reference said to drop "the same
#: entries whatever torch's random state was".
JUDGE = threading.Lock()


def _grading() -> Any:
    """The checks' grading module, imported on first use (torch: seconds, which a run spends
    while its sandboxes start)."""
    from qkv.checks import grading

    return grading


def calls(check: str, seed: Optional[int], options: Dict[str, Any]) -> List[Args]:
    """The ``(args, kwargs)`` of each call of the student's code a check makes with this seed."""
    with JUDGE:
        return list(_grading().calls(check, seed, **options))


def prepare(check: str) -> None:
    """The check's trusted work done once, before any submission's wall clock runs (the
    ablation experiment of assignment 10 trains the model it measures)."""
    if check != "check_question":
        with JUDGE:
            _grading().prepare(check)


def _as_check_outcome(outcome: Any) -> Any:
    """The sandbox's ``Raised`` (its line a number) as the checks' (its line in words)."""
    raised = _grading().Raised
    if type(outcome).__name__ == "Raised" and not isinstance(outcome, raised):
        line = getattr(outcome, "line", None)
        return raised(str(outcome.type), str(outcome.message),
                      f"line {line} of your cell" if isinstance(line, int) else "")
    return outcome


def judge(check: str, seed: Optional[int], outcomes: List[Any], options: Dict[str, Any]) -> Any:
    """The check's verdict (a ``CheckResult``) on the student's outcomes, one per call: what
    ``run_student`` returned in the sandbox, or what the student's code raised."""
    with JUDGE:
        return _grading().judge(check, seed, [_as_check_outcome(o) for o in outcomes],
                                **options)


def question(name: str, answer: Any) -> Any:
    """The verdict on a question's answer (a ``CheckResult``)."""
    # Its praise is for a kernel, not this run. sys.stdout is one for all threads: hold
    # OUTPUT while it is swapped (the run's lines are printed under the same lock).
    with OUTPUT, contextlib.redirect_stdout(io.StringIO()):
        return _grading().question(name, answer)


def is_answer(name: str, answer: Any) -> bool:
    """Whether a question's recorded first answer is an answer (not "64" for a number)."""
    with OUTPUT, contextlib.redirect_stdout(io.StringIO()):
        return bool(_grading().is_answer(name, answer))


def known(check: str) -> bool:
    """Whether the checks have a check of this name, e.g. ``check_softmax`` (or
    ``check_question``)."""
    return check == "check_question" or check in _grading().CHECKS


def seconds(check: str) -> float:
    """How long one call of the check may take in the student's kernel (its own limit: 10 s,
    a minute for the checks that train or sample); a question takes no time of its own."""
    if check == "check_question":
        return 0.0
    return float(_grading().CHECKS[check].seconds)


def usual_seconds() -> float:
    """A check's usual limit per call (the checks' default, 10 s)."""
    return float(_grading().SECONDS)
