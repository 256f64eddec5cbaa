"""What the checks do around a student's answer: nothing installed in the process, the
answer's own output left to it, warnings shown on stdout, a slow call named as slow."""

import logging
import os
import subprocess
import sys
import time
import warnings

import pytest
import torch
from tqdm.auto import tqdm  # imported in a cell before the answer, as a student would

from qkv.checks import check_softmax
from qkv.checks.result import CheckFailed


def _softmax(x, dim=-1):
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)


def _tqdm(x, dim=-1):
    for _ in tqdm(range(3), desc="student bar"):
        pass
    return _softmax(x, dim)


def _logged(x, dim=-1):
    logging.getLogger("student").warning("student log line")
    return _softmax(x, dim)


def _noisy(write):
    def softmax(x, dim=-1):
        write()
        return _softmax(x, dim)
    return softmax


NOISY = {
    "print to sys.stderr": _noisy(lambda: print("student print", file=sys.stderr)),
    "os.write(2, ...)": _noisy(lambda: os.write(2, b"student fd write\n")),
    "warnings.warn": _noisy(lambda: warnings.warn("student warning", UserWarning)),
    "tqdm.auto": _tqdm,
    "logging": _logged,
}


@pytest.mark.parametrize("name", NOISY)
def test_a_right_answer_that_writes_passes(name, capfd):
    check_softmax(NOISY[name])
    out, err = capfd.readouterr()
    assert "softmax" not in err  # the check itself says nothing on stderr


def test_warnings_of_the_answer_are_shown_on_stdout(capfd):
    check_softmax(NOISY["warnings.warn"])
    out, err = capfd.readouterr()
    assert "UserWarning: student warning" in out and "student warning" not in err


def test_a_slow_call_is_named_as_slow_after_it_returns(monkeypatch):
    monkeypatch.setenv("QKV_CHECK_SECONDS", "0.05")

    def slow(x, dim=-1):
        time.sleep(0.1)
        return _softmax(x, dim)

    with pytest.raises(CheckFailed, match=r"your softmax took more than 0\.05 s on float32 "
                                          r"1-D input of 5 logits") as info:
        check_softmax(slow)
    assert info.value.result.kind == "timeout"


def test_an_endless_loop_is_interrupted_soon_after_the_limit(monkeypatch):
    """It held the cell until the student pressed stop: the limit the intro states (10 s a
    call) was measured only once a call returned. The alarm is the check's for one call only."""
    import signal

    monkeypatch.setenv("QKV_CHECK_SECONDS", "0.2")

    def endless(x, dim=-1):
        while True:
            pass

    start = time.perf_counter()
    with pytest.raises(CheckFailed, match="took more than 0.2 s and was interrupted") as info:
        check_softmax(endless)
    assert time.perf_counter() - start < 5 and info.value.result.kind == "timeout"
    assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    check_softmax(_softmax)  # and the next check runs as before


def test_a_slow_but_finite_answer_within_the_limit_passes():
    def slow(x, dim=-1):
        time.sleep(0.01)
        return _softmax(x, dim)

    check_softmax(slow)


def test_importing_the_checks_installs_nothing_in_the_process():
    code = """
import sys, threading, warnings, torch, torch.nn.functional as F
from torch.overrides import _get_current_function_mode_stack
before = (sys.getprofile(), sys.gettrace(), warnings.showwarning, sys.stderr, sys.stdout,
          torch.softmax, torch.Tensor.softmax, F.softmax, threading.active_count(),
          len(_get_current_function_mode_stack()), torch.get_num_threads())
import qkv.checks
from qkv.checks import check_softmax
check_softmax(lambda x, dim=-1: (x - x.amax(dim, keepdim=True)).exp()
              / (x - x.amax(dim, keepdim=True)).exp().sum(dim, keepdim=True))
after = (sys.getprofile(), sys.gettrace(), warnings.showwarning, sys.stderr, sys.stdout,
         torch.softmax, torch.Tensor.softmax, F.softmax, threading.active_count(),
         len(_get_current_function_mode_stack()), torch.get_num_threads())
assert all(a is b or a == b for a, b in zip(before, after)), (before, after)
print("same")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "same", done.stderr
    assert done.stderr == ""


def test_the_students_random_state_is_theirs():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    check_softmax(_softmax)
    assert torch.equal(torch.rand(3), expected)


def test_names_are_matched_as_words_not_across_camel_case():
    from qkv.checks.lookup import SOFTMAX

    forbid = SOFTMAX.forbid
    assert forbid.matches("TransformerEncoderLayer") and forbid.matches("LogSoftmax")
    assert forbid.matches("_softmax") and forbid.matches("_transformer_encoder_layer_fwd")
    assert not forbid.matches("IntegralTransformError")
