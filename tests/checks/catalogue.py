"""The two tests every catalogue of answers gets: each wrong answer named, each right one passing."""

from __future__ import annotations

from typing import Callable, Dict, Tuple

import pytest

from qkv.checks.result import CheckFailed

# group -> (check, {name: (wrong answer, words its message must contain)}, {name: right answer})
Groups = Dict[str, Tuple[Callable, dict, dict]]


def catalogue_tests(groups: Groups) -> Tuple[Callable, Callable]:
    """Build ``test_wrong_answer_is_named`` and ``test_right_answer_passes`` for ``groups``.

    Assign the pair to those names at module level so that pytest collects them.
    """
    wrong = [(g, n) for g, (_, w, _) in groups.items() for n in w]
    right = [(g, n) for g, (_, _, r) in groups.items() for n in r]

    @pytest.mark.parametrize("group,name", wrong)
    def test_wrong_answer_is_named(group: str, name: str, capsys) -> None:
        check, answers, _ = groups[group]
        answer, words = answers[name]
        called = words.replace("calls ", "")
        try:
            check(answer)
        except CheckFailed as e:
            assert str(e).startswith(f"{group}: wrong on"), str(e)
            # A wrong answer that also calls what the exercise forbids: its notice names it.
            assert words in str(e) or called in e.result.notice, str(e)
            return
        # A call the exercise asks the student not to make is a notice, not a failure.
        out = capsys.readouterr().out
        assert f"{group}: note: you called" in out and called in out, (name, out)

    @pytest.mark.parametrize("group,name", right)
    def test_right_answer_passes(group: str, name: str) -> None:
        check, _, answers = groups[group]
        check(answers[name])
        check(answers[name], seed=3)

    return test_wrong_answer_is_named, test_right_answer_passes
