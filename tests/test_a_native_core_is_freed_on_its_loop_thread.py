"""A device's native core is freed on its event loop's thread, never under a spin of that loop.

The loop spins on the core's words (for up to a couple of hundred microseconds, the GIL
released) and reads them in every delivery; the submit thread closes the device.  Were the core
freed there, a spin under way would read freed memory.  So ``close`` stops the core's thread
there and has the loop free the core after what it runs now; where the loop is closed already,
nothing can read the core any more, and it is freed at once.  On the CUDA device over
``FakeCuda`` and the NV device over ``FakeNvrm``, native core only.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from _kinds import installed

import arig
import arig._engine
from arig._native import Core

pytestmark = pytest.mark.skipif(arig._engine.unavailable("native") is not None, reason="the native core is not built here")


@pytest.fixture
def freed_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The name of the thread of each core's free, in order."""
    names: list[str] = []
    destroy = Core.destroy

    def recording(self: Core) -> None:
        if self.ptr:
            names.append(threading.current_thread().name)
        destroy(self)

    monkeypatch.setattr(Core, "destroy", recording)
    with arig._engine.using("native"):
        yield names


def _noop(queue: Any, arg: Any, v: int) -> None:
    return None


@pytest.mark.parametrize("kind", ["cuda", "nv"])
def test_a_stopped_devices_core_is_freed_on_the_loop_thread(kind: str, freed_on: list[str]) -> None:
    async def main() -> None:
        with installed(kind) as opener:
            async with await arig.open(opener) as dev:
                await dev.run(_noop)
                assert freed_on == []
            assert freed_on == [threading.current_thread().name], "freed on the loop, before the stop returned"

    asyncio.run(main())
    assert freed_on == ["MainThread"]


@pytest.mark.parametrize("kind", ["cuda", "nv"])
def test_a_core_whose_loop_closed_is_freed_at_once(kind: str, freed_on: list[str]) -> None:
    """A device never stopped, collected after its loop closed: its submit thread closes it, and
    frees the core itself (no loop is left to read it, or to run a free)."""
    with installed(kind) as opener:
        loop = asyncio.new_event_loop()
        kept: list[arig.Device] = []

        async def main() -> None:
            kept.append(await arig.open(opener))
            await kept[0].run(_noop)

        try:
            loop.run_until_complete(main())
        finally:
            loop.close()
        assert freed_on == []
        with pytest.warns(ResourceWarning, match="never stopped"):
            kept.clear()
            gc.collect()
        for t in [t for t in threading.enumerate() if t.name.startswith("arig-submit")]:
            t.join(5)
        assert len(freed_on) == 1 and freed_on[0].startswith("arig-submit"), freed_on
