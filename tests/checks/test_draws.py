"""Counting what a function drew from a CPU generator (qkv.checks.harness.twists)."""

import math

import pytest
import torch

from qkv.checks.harness import WORDS_PER_TWIST, twists


@pytest.mark.parametrize("draw,words", [
    (lambda g: None, 0),
    (lambda g: torch.randn(1, generator=g), 1),
    (lambda g: torch.randn(WORDS_PER_TWIST, generator=g), WORDS_PER_TWIST),
    (lambda g: torch.rand(WORDS_PER_TWIST + 1, generator=g), WORDS_PER_TWIST + 1),
    (lambda g: torch.randn(20_000, 4, generator=g), 80_000),
    (lambda g: torch.randn(10_000, 4, dtype=torch.float64, generator=g), 80_000),
    # a tensor of fewer than 16 normals takes two words a number (drawn as float64)
    (lambda g: [torch.randn(4, generator=g) for _ in range(20_000)], 160_000),
])
def test_the_twists_are_the_words_drawn_over_624_rounded_up(draw, words):
    generator = torch.Generator().manual_seed(11)
    draw(generator)
    assert twists(11, generator) == math.ceil(words / WORDS_PER_TWIST)


def test_a_reseeded_generator_counts_as_the_most_and_a_non_generator_as_unknown():
    generator = torch.Generator().manual_seed(11)
    generator.manual_seed(12)
    torch.randn(3, generator=generator)
    assert twists(11, generator, most=50) == 50
    assert twists(11, "not a generator") is None
