"""A strict harness: any exception left unhandled in the event loop fails the
test (asyncpg's _testbase does the same); pytest's own plugins turn
unraisable and thread exceptions into warnings, which pyproject makes errors.

The ``engine`` fixture runs a test once per completion engine (the native
core, the pure-Python threads), as aiohttp runs its parser tests over its C
and pure parsers: every device the test opens gets that engine
(``arig._engine.using``).  The native param skips where the native core is
not here, and so under ``ARIG_PURE=1``: that run tests the pure engine only.
``memops`` is the second axis of a CUDA device's path: stream memory
operations allowed (where the driver has them) or never."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import pytest

import arig._engine
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


@pytest.fixture(params=[arig._engine.NATIVE, arig._engine.PURE])
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each completion engine in turn: devices opened by the test get it."""
    name: str = request.param
    why = arig._engine.unavailable(name)
    if why is not None:
        pytest.skip(f"the {name} engine is not here: {why}")
    with arig._engine.using(name):
        yield name


@pytest.fixture(params=[True, False], ids=["memops", "nomemops"])
def memops(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Stream memory operations allowed where the driver has them, or never (whatever
    ``ARIG_NO_MEMOPS`` says: a memops param must not silently become a no-memops one)."""
    allowed: bool = request.param
    with arig._engine.using(stream_memops=allowed):
        yield allowed


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
        if "arig_gpu" in item.keywords:
            if skip is None:
                skip = pytest.mark.skip(reason="no NVIDIA GPU here") if not (_have_cuda_gpu() or os.path.exists("/dev/nvidiactl")) else False
            if skip:
                item.add_marker(skip)
