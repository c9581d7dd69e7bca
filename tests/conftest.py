"""A strict harness: any exception left unhandled in the event loop fails the
test (asyncpg's _testbase does the same); pytest's own plugins turn
unraisable and thread exceptions into warnings, which pyproject makes errors."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import pytest

import arig._env

_loop_errors: list[dict[str, Any]] = []


class _StrictPolicy(asyncio.DefaultEventLoopPolicy):
    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = super().new_event_loop()
        loop.set_exception_handler(lambda _loop, ctx: _loop_errors.append(ctx))
        return loop


@pytest.fixture(scope="session")
def event_loop_policy() -> asyncio.AbstractEventLoopPolicy:
    return _StrictPolicy()


@pytest.fixture(autouse=True)
def _no_unhandled_loop_errors() -> Iterator[None]:
    _loop_errors.clear()
    yield
    if _loop_errors:
        errors = list(_loop_errors)
        _loop_errors.clear()
        pytest.fail(f"unhandled exception(s) in the event loop: {errors}")


def _have_cuda_gpu() -> bool:
    try:
        import arig.cuda

        return arig.cuda.count() > 0
    except Exception:  # noqa: BLE001 - no libcuda, no driver: no GPU
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if arig._env.GPU_REQUIRED:
        return  # the GPU script: a missing GPU must fail, not skip
    skip = None
    for item in items:
        if "gpu" in item.keywords:
            if skip is None:
                skip = pytest.mark.skip(reason="no NVIDIA GPU here") if not (_have_cuda_gpu() or os.path.exists("/dev/nvidiactl")) else False
            if skip:
                item.add_marker(skip)
