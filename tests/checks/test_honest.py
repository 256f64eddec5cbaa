"""Honest answers pass, with no notice: the catalogue of ``answers_honest.py``.

Each wrapper (a decorator, a dataclass printed, a thread, tqdm...) is tried on a right answer
of several checks; each answer written otherwise (recursion, a float bias, a slow loop) on
its own check. Both through the kernel's check and through the grader's API.
"""

import pytest
import torch

from answers_honest import BASES, CPU_ONLY, ONE_TENSOR, OTHERWISE, WRAPPERS
from qkv.checks import grading
from qkv.checks.harness import check_now

CASES = [(w, c) for w in WRAPPERS for c in BASES
         if w != "NumPy round trip" or c in ONE_TENSOR]


def _grade(check, student, **options):
    outcomes = []
    for args, kwargs in grading.calls(check, 1, **options):
        try:
            outcomes.append(grading.run_student(check, student, args, kwargs, **options))
        except Exception as e:  # noqa: BLE001
            outcomes.append(grading.Raised.of(e))
            break
    return grading.judge(check, 1, outcomes, **options)


@pytest.mark.filterwarnings("ignore:a note from the student's code")
@pytest.mark.parametrize("wrapper,check", CASES, ids=lambda x: x)
def test_a_wrapped_right_answer_passes_without_a_notice(wrapper, check):
    answer = WRAPPERS[wrapper](BASES[check])
    result = check_now(grading.CHECKS[check], answer, 0)
    assert result.passed and not result.notice, result.message()


@pytest.mark.parametrize("name", OTHERWISE)
def test_a_right_answer_written_otherwise_passes(name):
    check, answer, options = OTHERWISE[name]
    if name in CPU_ONLY and torch.cuda.is_available():
        pytest.skip("right on the CPU only: on a GPU the check runs CUDA inputs too, and names it")
    result = check_now(grading.CHECKS[check], answer, 0, **options)
    assert result.passed and not result.notice, result.message()
    graded = _grade(check, answer, **options)
    assert graded.passed and not graded.notice, graded.message()


def test_a_thread_left_running_costs_nothing_later():
    """A pool the answer leaves running does not fail the checks after it (issue 23)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1)
    stop = threading.Event()
    pool.submit(stop.wait, 30)
    try:
        base = BASES["check_softmax"]
        assert check_now(grading.CHECKS["check_softmax"], base, 0).passed
        assert check_now(grading.CHECKS["check_split_heads"], BASES["check_split_heads"], 0).passed
    finally:
        stop.set()
        pool.shutdown()
