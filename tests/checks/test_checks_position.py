"""The position checks (sinusoidal_encoding, apply_rope, alibi_bias) on catalogues of wrong and right answers."""

import answers_position as A
from catalogue import catalogue_tests
from qkv import checks

GROUPS = {
    "sinusoidal_encoding": (checks.check_sinusoidal_encoding, A.SINUSOID_WRONG, A.SINUSOID_RIGHT),
    "apply_rope": (checks.check_apply_rope, A.ROPE_WRONG, A.ROPE_RIGHT),
    "alibi_bias": (checks.check_alibi_bias, A.ALIBI_WRONG, A.ALIBI_RIGHT),
}
test_wrong_answer_is_named, test_right_answer_passes = catalogue_tests(GROUPS)


def test_every_named_mistake_has_a_wrong_answer_in_the_catalogue():
    """Each Mistake of the three exercises is made by some answer of the catalogue."""
    from qkv.checks import position

    for exercise, wrong in ((position.SINUSOIDAL_ENCODING, A.SINUSOID_WRONG),
                            (position.APPLY_ROPE, A.ROPE_WRONG), (position.ALIBI_BIAS, A.ALIBI_WRONG)):
        assert len(exercise.mistakes) >= 3, exercise.name
        named = set()
        for answer, _ in wrong.values():
            try:
                getattr(checks, f"check_{exercise.name}")(answer)
            except AssertionError as e:
                named |= {m.name for m in exercise.mistakes if m.name in str(e)}
        assert named == {m.name for m in exercise.mistakes}, (exercise.name, named)
