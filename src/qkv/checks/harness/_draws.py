"""How much a function drew from the CPU generator it was given, told from the generator's state.

An experiment measures on samples it draws; an answer that measures on 16 rows where the
experiment asks for 256, or returns a formula plus one draw of noise, can have the right mean
and a plausible spread, but it draws far fewer numbers. torch's CPU generator is a Mersenne
Twister (mt19937): it makes its numbers 624 32-bit words at a time (a *twist* of its state),
one word for a float32 normal or uniform, two for a float64. Its state after a call is the
state it was seeded with, twisted once per 624 words drawn (rounded up); replaying the
twists from the seed until the states agree counts them.

This is a teaching signal, not a boundary: the count is made where the student's code runs,
and code that wants to can draw numbers it never uses.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

#: Words a twist makes (mt19937's state).
WORDS_PER_TWIST = 624
#: The most twists replayed (about 1.3 million words; a few tenths of a second): a function
#: that drew more, or reseeded its generator, is counted as having drawn this many.
MOST = 2048
_STATE_BYTES = 5056  # torch's CPU generator state: seed, counters, then the 624 words as uint64
_WORDS_AT = 24
_UPPER, _LOWER, _MATRIX = np.uint32(0x80000000), np.uint32(0x7FFFFFFF), np.uint32(0x9908B0DF)


def _words(generator: torch.Generator) -> Optional[np.ndarray]:
    state = generator.get_state().numpy()
    if state.size != _STATE_BYTES:  # another layout (a torch release that changed it)
        return None
    words = state[_WORDS_AT:_WORDS_AT + 8 * WORDS_PER_TWIST]
    return words.view(np.uint64).astype(np.uint32)


def _twist(mt: np.ndarray) -> np.ndarray:
    """mt19937's next state: word i mixes words i and i+1 with word i+397, each taken after
    it was itself renewed when it comes earlier in the array (hence four slices)."""
    mt, n = mt.copy(), WORDS_PER_TWIST
    for lo, hi in ((0, 227), (227, 454), (454, 623), (623, 624)):
        following = mt[lo + 1:hi + 1] if hi < n else mt[0:1]
        far = (lo + 397) % n
        y = (mt[lo:hi] & _UPPER) | (following & _LOWER)
        mt[lo:hi] = (mt[far:far + hi - lo] ^ (y >> np.uint32(1))
                     ^ np.where(y & np.uint32(1), _MATRIX, np.uint32(0)))
    return mt


def drawn_count(value: object) -> Optional[int]:
    """A count :func:`twists` made where the student's code runs, as it crossed back: an int
    from 0 to :data:`MOST`; ``None`` for anything else (what crosses is the student's to
    choose: a bool, a negative count or one of 5,000 digits must not reach the verdict's text,
    where formatting it would stop the judge)."""
    return value if type(value) is int and 0 <= value <= MOST else None


def twists(seed: int, generator: torch.Generator, most: int = MOST) -> Optional[int]:
    """How many times ``generator`` (made as ``torch.Generator().manual_seed(seed)``) has
    twisted since: the words it gave out, divided by 624 and rounded up; ``most`` when that is
    more, or its state is not one a draw from that seed reaches (reseeded). ``None`` for a
    generator whose state this cannot read (not a CPU one)."""
    if not isinstance(generator, torch.Generator) or generator.device.type != "cpu":
        return None
    after = _words(generator)
    mt = _words(torch.Generator().manual_seed(seed))
    if after is None or mt is None:
        return None
    for k in range(most):
        if np.array_equal(mt, after):
            return k
        mt = _twist(mt)
    return most
