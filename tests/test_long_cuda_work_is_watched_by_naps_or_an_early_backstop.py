"""How the native core watches long CUDA work (``ARIG_CUDA_BACKSTOP``): with ``event`` a
blocking-sync event is recorded behind it before the native thread sleeps, and a waiter thread of
the lane sits on it in ``cuEventSynchronize`` (the loop hears of the end even where the prediction
is late, and nothing holds the stream); with ``early`` a host function is enqueued instead (it holds
the stream until libcuda's callback thread runs it, which delays the next work); with ``poll`` no
backstop is asked before the sleep, which is cut into naps that each look at the words.  Over the
fake GPU: which one happened, by the core's counters, and that either way every wait completes;
bad values are refused by name.
"""

from __future__ import annotations

import pytest

import arig
from arig.cuda._completion import POLL_NS, Watch, _backstop_of

from _napping import napping_cuda

needs_core = pytest.mark.skipif(arig._engine.unavailable("native") is not None, reason="the native core did not load")


@pytest.mark.parametrize(
    ("how", "want"),
    [("event", Watch(True, True, 0)), ("early", Watch(False, True, 0)), ("poll", Watch(False, False, POLL_NS)), ("poll:200", Watch(False, False, 200_000))],
)
def test_the_setting_reads(how: str, want: Watch) -> None:
    assert _backstop_of(how) == want


@pytest.mark.parametrize("how", ["", "Poll", "poll:", "poll:0", "poll:-5", "poll:1ms", "late", "events", "event:1"])
def test_a_bad_setting_is_refused_by_name(how: str) -> None:
    with pytest.raises(ValueError, match="ARIG_CUDA_BACKSTOP"):
        _backstop_of(how)


@needs_core
@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["event", "early", "poll:300"])
async def test_long_work_is_watched_as_set(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arig._env, "CUDA_BACKSTOP", how)
    async with napping_cuda(0.003) as (dev, nap, comp):
        for _ in range(5):  # learn its length: long work
            await dev.wait(await dev.submit(nap))
        before = comp.stats()
        for _ in range(10):
            await dev.wait(await dev.submit(nap))
        after = comp.stats()
        host_functions = after["host_functions"] - before["host_functions"]
        events = after["event_waits"] - before["event_waits"]
        assert comp.waiter == (how == "event")
        if how == "event":
            assert events >= 10 and host_functions == 0, "an event behind each long work before the sleep, no host function"
        elif how == "early":
            assert host_functions >= 10 and events == 0, "a host function behind each long work before the sleep"
        else:  # only where a spin gave up on a value (its backstop), never before a sleep
            assert host_functions <= after["spin_misses"] - before["spin_misses"], "naps look at the words"
            assert events == 0
        assert dev.reached == dev.submitted and dev.lost is None
