"""Input that cannot be a fill, a queue or a value is refused before a value is assigned,
leaving the device healthy (hypothesis draws the input)."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import numpy as np
import pytest
from _lifetimes import Token, noop, run
from hypothesis import given, settings
from hypothesis import strategies as st

import arig
import arig.host


async def _async_fill(queue: Any, arg: Any, v: int) -> None:
    pass


def _generator_fill(queue: Any, arg: Any, v: int) -> Any:
    yield


async def _async_generator_fill(queue: Any, arg: Any, v: int) -> Any:
    yield


class _AsyncCall:
    async def __call__(self, queue: Any, arg: Any, v: int) -> None:
        pass


class _Methods:
    async def fill(self, queue: Any, arg: Any, v: int) -> None:
        pass


NOT_FILLS = st.one_of(
    st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=5), st.binary(max_size=5),
    st.lists(st.integers(), max_size=3), st.builds(object), st.builds(Token),
    st.sampled_from([
        _async_fill, _generator_fill, _async_generator_fill, _AsyncCall(), _Methods().fill,
        functools.partial(_async_fill, None), np.int64(7), np.zeros(2),
    ]),
)  # fmt: skip


@pytest.fixture(scope="module")
def shared_device() -> Any:
    """One host device, on a loop of its own thread, for many hypothesis examples (opening one per example is slow)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="test-loop", daemon=True)
    thread.start()
    dev = asyncio.run_coroutine_threadsafe(arig.open(arig.host.cpu(queues=2)), loop).result(10)

    def call(coro_fn: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro_fn(), loop).result(10)

    yield dev, call
    call(dev.stop)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


@settings(max_examples=150, deadline=None)
@given(fill=NOT_FILLS)
def test_what_cannot_be_a_fill_is_refused_before_a_value(shared_device: Any, fill: Any) -> None:
    dev, call = shared_device
    submitted = dev.submitted

    async def attempt() -> None:
        with pytest.raises(arig.ArigTypeError):
            await dev.submit(fill)

    call(attempt)
    assert dev.submitted == submitted and dev.lost is None


@settings(max_examples=100, deadline=None)
@given(queue=st.one_of(st.integers().filter(lambda q: q not in (0, 1)), st.booleans(), st.floats(), st.text(max_size=3), st.none(), st.builds(object)))
def test_what_cannot_be_a_queue_is_refused_before_a_value(shared_device: Any, queue: Any) -> None:
    dev, call = shared_device
    submitted = dev.submitted

    async def attempt() -> None:
        with pytest.raises((arig.ArigTypeError, arig.ArigValueError)):
            await dev.submit(noop, queue=queue)

    call(attempt)
    assert dev.submitted == submitted and dev.lost is None


def test_a_queue_of_another_device_is_refused(shared_device: Any) -> None:
    dev, call = shared_device

    async def attempt() -> None:
        async with await arig.open(arig.host.cpu(queues=2)) as other:
            with pytest.raises(arig.ArigValueError, match="not a queue of this device"):
                await other.submit(noop, queue=dev.queues[1])

    run(attempt)


@settings(max_examples=100, deadline=None)
@given(v=st.one_of(st.booleans(), st.floats(), st.text(max_size=3), st.none(), st.builds(object), st.just(np.bool_(True)),
                   st.integers(min_value=10**6), st.integers(max_value=-1), st.integers(-(2**63), -1).map(np.int64)))
def test_what_cannot_be_a_value_is_refused(shared_device: Any, v: Any) -> None:
    dev, call = shared_device
    submitted = dev.submitted

    async def attempt() -> None:
        with pytest.raises((arig.ArigTypeError, arig.ArigValueError)):
            await dev.wait(v)
        if not hasattr(v, "__index__") or isinstance(v, (bool, np.bool_)):
            with pytest.raises(arig.ArigTypeError):
                dev.reached_at(v)
        elif v < 0:
            with pytest.raises(arig.ArigValueError, match="v must be a value the device handed out"):
                dev.reached_at(v)

    call(attempt)
    assert dev.submitted == submitted and dev.lost is None
