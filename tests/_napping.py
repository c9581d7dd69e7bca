"""``napping_cuda``: a CUDA device on the native core over a fake GPU whose one kernel sleeps (long
work, for tests of how the core watches it)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import arig
from arig.cuda import Launch
from arig.testing import FakeCuda


@contextlib.asynccontextmanager
async def napping_cuda(seconds: float) -> AsyncIterator[tuple[arig.Device, Any, Any]]:
    """A CUDA device on the native core over a fresh fake GPU, a ``Launch`` of a kernel that sleeps
    ``seconds`` there, and the device's completion (its ``stats()``: the core's counters)."""
    fake = FakeCuda()
    with fake.installed(), arig._engine.using("native"):
        async with await arig.open(arig.cuda.gpu(0)) as dev:
            image = await dev.load(fake.image(nap=(lambda _: time.sleep(seconds), [])))
            backend: Any = dev._backend
            yield dev, Launch(image.function("nap"), 1, 1), backend.completion
    assert fake.violations == []
