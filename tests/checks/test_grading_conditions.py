"""Grading conditions (issue 13, item 4): what a right answer writes to stderr costs nothing,
and each call of an answer has a time budget that ends an endless loop with a message.

nbgrader scores a test cell zero when it writes to stderr; these tests read the real file
descriptors (``capfd``), so a write to fd 2 that escaped the check would show in ``err``.
"""

import logging
import os
import signal
import sys
import time
import warnings

import pytest
import torch
from tqdm import tqdm  # imported in a cell before the answer, as a student would

from answers_masking import causal_ok
from answers_scaling import SDPA_WRONG, make_sdpa
from qkv.checks import (check_causal_mask, check_dot_product_variance,
                        check_scaled_dot_product_attention, check_softmax)


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
    "print to sys.stderr": (_noisy(lambda: print("student print", file=sys.stderr)), "student print"),
    "os.write(2, ...)": (_noisy(lambda: os.write(2, b"student fd write\n")), "student fd write"),
    "warnings.warn": (_noisy(lambda: warnings.warn("student warning", UserWarning)), "student warning"),
    "tqdm": (_tqdm, "student bar"),
    "logging (last resort)": (_logged, "student log line"),
}


@pytest.mark.parametrize("name", NOISY)
def test_stderr_of_a_right_answer_is_shown_on_stdout_and_costs_nothing(name, capfd, monkeypatch):
    # No handler of pytest's on the root logger: a log line goes to logging's last resort,
    # sys.stderr, as in a notebook where nothing configured logging.
    monkeypatch.setattr(logging.root, "handlers", [])
    answer, words = NOISY[name]
    check_softmax(answer)
    check_softmax(answer, seed=None)
    out, err = capfd.readouterr()
    assert err == "", err
    assert words in out and "wrote to stderr" in out, out


def test_a_log_handler_on_stderr_is_caught_and_put_back(capfd):
    handler = logging.StreamHandler(sys.stderr)  # as logging.basicConfig() leaves it
    logger = logging.getLogger("student")
    logger.addHandler(handler)
    try:
        check_softmax(_logged)
    finally:
        logger.removeHandler(handler)
    out, err = capfd.readouterr()
    assert err == "" and out.count("student log line") >= 1, (out, err)
    assert handler.stream is sys.stderr  # the notebook's handler as it was


def test_stderr_of_a_wrong_answer_is_shown_too_and_fd_2_is_restored(capfd):
    noisy_wrong = SDPA_WRONG["no scaling"][0]

    def sdpa(*args, **kwargs):
        os.write(2, b"wrong answer writes\n")
        return noisy_wrong(*args, **kwargs)

    before = os.fstat(2)
    with pytest.raises(AssertionError, match="no scaling"):
        check_scaled_dot_product_attention(sdpa)
    out, err = capfd.readouterr()
    assert err == "" and "wrong answer writes" in out
    assert os.fstat(2).st_ino == before.st_ino  # fd 2 points where it pointed before
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"


def test_a_quiet_answer_prints_nothing(capfd):
    check_scaled_dot_product_attention(make_sdpa())
    check_causal_mask(causal_ok)
    assert capfd.readouterr() == ("", "")


# --------------------------------------------------------------------------- time budget


@pytest.fixture
def short_budget(monkeypatch):
    monkeypatch.setenv("QKV_CHECK_SECONDS", "0.5")
    monkeypatch.setenv("QKV_CHECK_FACTOR", "1")


def _endless(x, dim=-1):
    while True:
        pass


def _stubborn(x, dim=-1):
    """Catches the interruption (twice) and then answers right: still over its budget."""
    for _ in range(2):
        try:
            while True:
                pass
        except BaseException:  # noqa: BLE001 (what a student might write)
            pass
    return _softmax(x, dim)


def _sleeps(x, dim=-1):
    time.sleep(60)


@pytest.mark.parametrize("answer", [_endless, _stubborn, _sleeps], ids=lambda f: f.__name__)
def test_a_call_past_its_budget_fails_with_the_input_named(answer, short_budget):
    start = time.perf_counter()
    with pytest.raises(AssertionError) as info:
        check_softmax(answer)
    assert time.perf_counter() - start < 10
    message = str(info.value)
    assert message.startswith("softmax: your softmax took more than 0.5 s on float32 1-D input "
                              "of 5 logits"), message
    # The guard is off again, torch as it was, the timer stopped and its handler put back.
    assert sys.getprofile() is None
    assert torch._C._len_torch_function_stack() == 0 == torch._C._len_torch_dispatch_stack()
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL
    check_softmax(_softmax)  # and the next check runs as usual


def test_the_budget_covers_the_measurement_check(short_budget):
    with pytest.raises(AssertionError, match="dot_product_variance took more than 0.5 s"):
        check_dot_product_variance(lambda d, n, g: _endless(None))


def test_a_slow_but_finite_answer_within_the_budget_passes():
    def slow(x, dim=-1):
        time.sleep(0.05)
        return _softmax(x, dim)

    check_softmax(slow)


def test_the_budget_is_generous_by_default():
    from qkv.checks._budget import FACTOR, FLOOR, budget_for

    assert FLOOR >= 5 and FACTOR >= 10
    assert budget_for(lambda: time.sleep(0.01)) >= FLOOR + FACTOR * 0.01


def test_a_right_answer_may_read_installed_libraries_files():
    """Lazy imports read library metadata and archives; only the course's files are refused."""
    def softmax(x, dim=-1):
        import importlib.metadata

        assert importlib.metadata.version("torch")  # opens dist-info files in site-packages
        return _softmax(x, dim)

    check_softmax(softmax)


def test_names_are_matched_as_words_not_across_camel_case():
    from qkv.checks.lookup import SOFTMAX

    forbid = SOFTMAX.forbid
    assert forbid.matches("TransformerEncoderLayer") and forbid.matches("LogSoftmax")
    assert forbid.matches("aten::_softmax") and forbid.matches("_transformer_encoder_layer_fwd")
    assert not forbid.matches("IntegralTransformError")  # sympy's, reached by a lazy import
