"""Shared fixtures: the devices and dtypes every comparison runs on."""

from __future__ import annotations

import pytest
import torch

CUDA = torch.cuda.is_available()

requires_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")


def devices() -> list[str]:
    """Every device available here: always the CPU, plus CUDA and MPS when present."""
    found = ["cpu"]
    if CUDA:
        found.append("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        found.append("mps")
    return found


@pytest.fixture(params=devices())
def device(request: pytest.FixtureRequest) -> str:
    return request.param
