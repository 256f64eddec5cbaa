"""The one place the grader meets the checks' grading API (:mod:`qkv.checks.grading`).

Everything :mod:`.judge` needs from the checks passes through here, so a change in that API is
a change in this module only: the inputs of a check's calls (drawn here, in the trusted
process, from a seed the student never sees), the judgement of the student's outputs (the
reference and the catalogue of mistakes run here too) and the answer to a question.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any, Dict, List, Optional, Tuple

from qkv.checks import grading

Args = Tuple[tuple, Dict[str, Any]]
Raised = grading.Raised


def calls(check: str, seed: Optional[int], options: Dict[str, Any]) -> List[Args]:
    """The ``(args, kwargs)`` of each call of the student's code a check makes with this seed."""
    return list(grading.calls(check, seed, **options))


def judge(check: str, seed: Optional[int], outcomes: List[Any], options: Dict[str, Any]) -> Any:
    """The check's verdict (a ``CheckResult``) on the student's outcomes, one per call."""
    return grading.judge(check, seed, outcomes, **options)


def question(name: str, answer: Any) -> Any:
    """The verdict on a question's answer (a ``CheckResult``)."""
    with contextlib.redirect_stdout(io.StringIO()):  # its praise is for a kernel, not this run
        return grading.question(name, answer)


def known(check: str) -> bool:
    """Whether the checks have a check of this name, e.g. ``check_softmax`` (or
    ``check_question``)."""
    return check == "check_question" or check in grading.CHECKS
