"""The two tests every catalogue of answers gets: each wrong answer named, each right one passing."""

from __future__ import annotations

from typing import Callable, Dict, Tuple

import pytest

# group -> (check, {name: (wrong answer, words its message must contain)}, {name: right answer})
Groups = Dict[str, Tuple[Callable, dict, dict]]


def catalogue_tests(groups: Groups) -> Tuple[Callable, Callable]:
    """Build ``test_wrong_answer_is_named`` and ``test_right_answer_passes`` for ``groups``.

    Assign the pair to those names at module level so that pytest collects them.
    """
    wrong = [(g, n) for g, (_, w, _) in groups.items() for n in w]
    right = [(g, n) for g, (_, _, r) in groups.items() for n in r]

    @pytest.mark.parametrize("group,name", wrong)
    def test_wrong_answer_is_named(group: str, name: str) -> None:
        check, answers, _ = groups[group]
        answer, words = answers[name]
        with pytest.raises(AssertionError, match=f"{group}: wrong on") as info:
            check(answer)
        assert words in str(info.value), str(info.value)

    @pytest.mark.parametrize("group,name", right)
    def test_right_answer_passes(group: str, name: str) -> None:
        check, _, answers = groups[group]
        check(answers[name])
        check(answers[name], seed=3)

    return test_wrong_answer_is_named, test_right_answer_passes
