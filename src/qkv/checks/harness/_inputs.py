"""Input makers of the checks: seeded random tensors, bool masks and sizes.

Random numbers are drawn from a CPU generator and then moved, so every device
sees the same inputs for the same seed.
"""

from __future__ import annotations

import torch
from torch import Tensor


def randn(gen: torch.Generator, *shape: int, device=None, dtype=torch.float32) -> Tensor:
    """Seeded normal samples, drawn on the CPU so every device sees the same numbers."""
    return torch.randn(*shape, generator=gen, dtype=torch.float64).to(device=device, dtype=dtype)


def sizes(*args, here=False, **kwargs):
    """A case's ``build`` for a function of sizes: ``args`` and ``kwargs`` as they are, and
    with ``here`` the device to make the result on (``device=``)."""
    def build(gen, device, dtype):
        return args, dict(kwargs, device=device) if here else dict(kwargs)
    return build


def bool_mask(gen: torch.Generator, *shape: int, device=None) -> Tensor:
    """Random bool mask whose last-dim rows each hold at least one True and one False.

    Neither the mask nor its inverse leaves a query with nothing to attend to,
    so an inverted mask gives a finite (and recognisable) result.
    """
    n = shape[-1]
    if n < 2:
        raise ValueError("bool_mask needs at least 2 keys per row")
    m = torch.rand(*shape, generator=gen) < 0.5
    idx = torch.randint(0, n, (*shape[:-1], 1), generator=gen)
    m = m.scatter(-1, idx, True).scatter(-1, (idx + 1) % n, False)
    return m.to(device)
