"""What every catalogue of named wrong answers asserts (the ``test_wrong_answers_named*`` files):
the check refuses the answer, on the default seed and on a drawn one, and names the slip."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from qkv import checks
from qkv.checks import CheckFailed


def assert_named(check: str, answer: Callable[..., Any], words: str, not_words: str = "") -> None:
    """``checks.<check>(answer)`` fails with ``words`` in its message (and not ``not_words``),
    on seed 0 and on ``seed=None``."""
    for seed in (0, None):
        with pytest.raises(CheckFailed) as info:
            getattr(checks, check)(answer, seed=seed)
        message = str(info.value)
        assert words in message, message
        assert not not_words or not_words not in message, message
