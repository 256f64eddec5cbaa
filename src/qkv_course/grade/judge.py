"""Grade one submission: drive its sandbox through every test, judge here, in the trusted parent.

For each test of the instructor's plan, for each check call its cell makes: the inputs are
drawn here (:func:`.checks_api.calls`, from a seed only this process knows), sent to the
sandbox as data, the student's function is called there, its outputs come back as data and are
judged here (:func:`.checks_api.judge`: the reference and the mistake catalogue run in this
process). A test earns its points only when every one of its calls passes. A question's answer
is read from the sandbox as a JSON value and judged here. The sandbox never sees a seed, a
reference result or a verdict.
"""

from __future__ import annotations


import json
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

from . import checks_api
from .results import Failed, Missing, NotData
from ..calls import QUESTION, Call
from .plan import Plan, Test, seed_for

PASS, FAIL, ERROR, TIMEOUT = "pass", "fail", "error", "timeout"  # as qkv report counts them
NOT_WRITTEN = "not written yet"  # qkv report's label for an answer raising NotImplementedError
MESSAGE_LIMIT = 4000  # characters of a message kept (a mistake's name ends its first line)
#: Bytes of results one check call may bring back over all its inputs (the largest right
#: answer brings back well under 1 MiB): the grader holds them until it judges.
CALL_BYTES = 64 << 20


def _nbytes(x: Any) -> int:
    """The memory a returned value holds: its tensors' bytes, its strings' length."""
    import torch

    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (str, bytes)):
        return len(x)
    if isinstance(x, (tuple, list)):
        return sum(_nbytes(v) for v in x) + 8 * len(x)
    if isinstance(x, dict):
        return sum(_nbytes(k) + _nbytes(v) for k, v in x.items())
    return 8


@dataclass
class Timeouts:
    """Per call: seconds a check's call, and a question's value, may take in the sandbox."""

    call_s: float = 60.0
    value_s: float = 10.0


class GraderError(Exception):
    """The grader itself failed on a call (a bug in a check): no grade is recorded."""


@dataclass
class NotAnswered:
    """A verdict the parent gives without the checks: the answer is absent or not data."""

    what: str
    passed: bool = False
    mistake: str = ""
    notice: str = ""

    def message(self) -> str:
        return self.what

    def to_json(self) -> Dict[str, Any]:
        return {"passed": False, "what": self.what}


@dataclass
class TestResult:
    """One test's verdict, as the result file records it."""

    grade_id: str
    points: float
    status: str
    message: str = ""
    mistake: Optional[str] = None
    calls: List[Dict[str, Any]] = field(default_factory=list)
    notices: List[str] = field(default_factory=list)

    @property
    def earned(self) -> float:
        return self.points if self.status == PASS else 0.0

    def to_json(self) -> Dict[str, Any]:
        return {"grade_id": self.grade_id, "points": self.points, "earned": self.earned,
                "status": self.status, "message": self.message[:MESSAGE_LIMIT],
                "mistake": self.mistake, "calls": self.calls, "notices": self.notices}


def _failed_reason(outcome: Any) -> Optional[str]:
    """The sandbox's reason when a call did not complete (timeout, crash, flood), else None."""
    return outcome.reason if isinstance(outcome, Failed) else None


def _status_of_failure(reason: str) -> str:
    """``timeout`` for a limit of time (the sandbox's words), ``error`` for anything else."""
    words = ("did not finish", "time", "cpu")
    return TIMEOUT if any(w in reason.lower() for w in words) else ERROR


def _result_json(result: Any) -> Dict[str, Any]:
    """A verdict's fields (``CheckResult.to_json`` gives a JSON string)."""
    try:
        data = result.to_json()
        return dict(json.loads(data) if isinstance(data, str) else data)
    except Exception:  # noqa: BLE001 (a record we cannot serialise is recorded by its message)
        return {"passed": bool(getattr(result, "passed", False))}


def _read(sub: Any, name: str, limits: Timeouts, unset: str, not_data: str) -> Tuple[Any, Any]:
    """A variable of the student's notebook as data: ``(value, None)``; or ``(None, verdict)``
    when it cannot be read (the sandbox failed), is not set, or is not data (``not_data`` may
    name its ``{type}``)."""
    value = sub.value(name, limits.value_s)
    if isinstance(value, Failed):
        return None, (None, value.reason)
    if value is Missing:
        return None, (NotAnswered(unset), None)
    if isinstance(value, NotData):
        return None, (NotAnswered(not_data.format(type=value.type)), None)
    return value, None


def run_call(sub: Any, call: Call, seed: Optional[int], limits: Timeouts,
             recorded: Optional[Dict[str, Any]] = None) -> Any:
    """One check call on the student's code: ``(CheckResult or None, failure reason or None)``.

    ``recorded``: the first answers the submission's ``qkv_answers.json`` holds: a question
    it records is judged on that answer, as the notebook tells the student (and as under
    ``nbgrader autograde``, whose kernel reads the same file); an entry that is no answer (a
    record edited by hand) is passed over for the notebook's answer, as the kernel does."""
    if call.check == QUESTION and call.question in (recorded or {}) and \
            checks_api.is_answer(call.question, recorded[call.question]):
        result = checks_api.question(call.question, recorded[call.question])
        if not getattr(result, "passed", True):  # the notebook may hold another answer now
            first = recorded[call.question]
            shown = first.get("answer") if isinstance(first, dict) else first
            result = replace(result, what=(
                f"graded on your first answer, {str(shown)[:40]!r}, as qkv_answers.json "
                f"recorded it: {result.what}"))
        return result, None
    if call.check == QUESTION:
        value, verdict = _read(sub, call.answer, limits,
                               f"{call.answer} is not set: set it in its answer cell "
                               f"({call.answer} = ...)",
                               f"{call.answer} is a {{type}}: the question asks for a number or a "
                               "string")
        if verdict is not None:
            return verdict
        if call.options:  # a per-student question: judged with the student's parameters
            given = {"answer": value}
            for param, variable in call.options.items():
                unset = f"{variable} is not set: run the cell that computes it from your seed"
                given[param], verdict = _read(sub, variable, limits, unset, unset)
                if verdict is not None:
                    return verdict
            value = given
        return checks_api.question(call.question, value), None
    outcomes, size = [], 0
    for args, kwargs in checks_api.calls(call.check, seed, call.options):
        outcome = sub.call(call.check, call.answer, args, kwargs, call.options, limits.call_s)
        reason = _failed_reason(outcome)
        if reason is not None:
            return None, reason
        if isinstance(outcome, NotData):
            return NotAnswered(f"{call.answer} returned a {outcome.type}, which is not what "
                               f"{call.check[len('check_'):]} returns (a tensor, or a tuple "
                               "of them)"), None
        size += _nbytes(outcome)
        if size > CALL_BYTES:  # the grader keeps a call's outcomes until it judges them
            return NotAnswered(f"{call.answer} returned more than {CALL_BYTES >> 20} MiB over "
                               "this check's inputs, which are small: a right answer returns "
                               "results their size"), None
        outcomes.append(outcome)
    return checks_api.judge(call.check, seed, outcomes, call.options), None


def grade_test(sub: Any, test: Test, plan: Plan, key: bytes, student: str,
               limits: Timeouts, recorded: Optional[Dict[str, Any]] = None) -> TestResult:
    """Every call of one test cell; its points only when all of them pass."""
    calls, notices = [], []
    for index, call in enumerate(test.calls):
        seed = seed_for(call, key, student, plan, test.grade_id, index)
        record: Dict[str, Any] = {"call": call.describe(), "seed": seed}
        if getattr(sub, "failed", None):
            reason = f"not graded: the sandbox stopped earlier ({sub.failed})"
            return TestResult(test.grade_id, test.points, ERROR, reason, None, calls + [record],
                              notices)
        try:
            result, reason = run_call(sub, call, seed, limits, recorded)
        except Exception as e:
            # The checks judge every answer without raising: this is the grader's own fault,
            # never a grade. Nothing is recorded for the submission; the run says so.
            raise GraderError(f"{test.grade_id}: {call.describe()}: {type(e).__name__}: "
                              f"{e}") from e
        if result is not None:
            record.update(_result_json(result))
            notice = getattr(result, "notice", None)
            if notice:
                notices.append(str(notice))
        calls.append(record)
        if reason is not None:
            return TestResult(test.grade_id, test.points, _status_of_failure(reason),
                              f"{call.describe()}: {reason}", None, calls, notices)
        if not result.passed:
            kind = getattr(result, "kind", "")
            mistake = getattr(result, "mistake", "") or (NOT_WRITTEN if kind == "not written"
                                                         else None)
            return TestResult(test.grade_id, test.points, TIMEOUT if kind == "timeout" else FAIL,
                              result.message(), mistake, calls, notices)
    return TestResult(test.grade_id, test.points, PASS, "", None, calls, notices)


def grade(sub: Any, plan: Plan, key: bytes, student: str, limits: Timeouts,
          recorded: Optional[Dict[str, Any]] = None) -> List[TestResult]:
    """Every test of the plan, in order, against one submission's sandbox (``recorded``: the
    questions' first answers, see :func:`run_call`)."""
    return [grade_test(sub, test, plan, key, student, limits, recorded) for test in plan.tests]
