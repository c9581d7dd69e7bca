"""Properties of the host device that hold for any input (hypothesis where it fits):

* whatever a fill, its work or the driver raises (any type, printable or not),
  every waiter ends with ``DeviceLost`` and ``stop()`` returns;
* input that cannot be a fill, a queue, a value or a window is refused before a
  value is assigned, leaving the device healthy;
* a device used from a thread or event loop other than its own raises
  ``WrongLoopError`` before changing any state;
* no path (stop, stop timeout, loss, a device never stopped and collected, a
  failed open) leaks a thread, a file descriptor, a loop reader or a kept object.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import math
import os
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arig
import arig.host
from arig import nvrm
from arig.device import Backend
from arig.host import HostBackend, HostOpener


class Token:
    pass


def _noop(queue: Any, arg: Any, v: int) -> None:
    return None


def _arig_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("arig-")}


def _ended(threads: set[threading.Thread], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return not any(t.is_alive() for t in threads)


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else set()


def _run(main: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run ``main`` in a fresh loop; fail on anything left unhandled in that loop."""
    errors: list[dict[str, Any]] = []
    with asyncio.Runner() as runner:
        runner.get_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx))
        result = runner.run(main())
    assert errors == [], errors
    return result


# -- whatever is raised, every waiter ends with DeviceLost and stop returns ----------------------------

BASES: list[type[BaseException]] = [
    Exception, BaseException, ValueError, OSError, MemoryError, RecursionError, KeyboardInterrupt, SystemExit,
    GeneratorExit, StopIteration, StopAsyncIteration, asyncio.CancelledError, arig.ArigError, arig.DeviceLost,
]  # fmt: skip


def _broken_str(self: BaseException) -> str:
    raise RuntimeError("str() of this failure raises")


def _not_a_str(self: BaseException) -> Any:
    return 42


def _make_failure(base: type[BaseException], printing: str) -> BaseException:
    namespace: dict[str, Any] = {}
    if printing == "str raises":
        namespace["__str__"] = _broken_str
    elif printing == "repr raises":
        namespace["__repr__"] = _broken_str
    elif printing == "str is not a str":
        namespace["__str__"] = _not_a_str
    cls: Any = type(f"Odd{base.__name__}", (base,), namespace)
    exc: BaseException = cls.__new__(cls)  # no __init__: DeviceLost's takes other arguments
    exc.args = ("the failure",)
    return exc


class _RaisingBackend(HostBackend):
    """The host device whose driver calls raise ``failure`` at ``where``."""

    def __init__(self, failure: BaseException, where: str) -> None:
        super().__init__(2, 64, None)
        self._failure, self._where = failure, where

    def call_fill(self, qi: int, fill: Any, arg: Any, v: int) -> None:
        if self._where == "driver call_fill" and v == 2:
            raise self._failure
        super().call_fill(qi, fill, arg, v)

    def signal(self, qi: int, v: int) -> None:
        if self._where == "driver signal" and v >= 2:
            raise self._failure
        super().signal(qi, v)


class _RaisingOpener:
    name = "HOST"

    def __init__(self, failure: BaseException, where: str) -> None:
        self.failure, self.where = failure, where

    def make(self) -> Backend:
        return _RaisingBackend(self.failure, self.where)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(BASES),
    printing=st.sampled_from(["plain", "str raises", "repr raises", "str is not a str"]),
    where=st.sampled_from(["fill", "work", "driver call_fill", "driver signal"]),
)
def test_whatever_is_raised_every_waiter_ends_with_device_lost_and_stop_returns(base: type[BaseException], printing: str, where: str) -> None:
    failure = _make_failure(base, printing)
    before = _arig_threads()

    def failing(queue: Any, arg: Any, v: int) -> None:
        if where == "fill":
            raise failure
        if where == "work":
            def work() -> None:
                raise failure

            queue.enqueue(work)

    async def main() -> None:
        gate = threading.Event()
        dev = await arig.open(_RaisingOpener(failure, where))
        try:
            v1 = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0), queue=1)
            waiters = [asyncio.create_task(dev.wait(v1)) for _ in range(2)]
            await asyncio.sleep(0.01)
            v2 = await dev.submit(failing)
            waiters.append(asyncio.create_task(dev.wait(v2)))
            for w in waiters:
                with pytest.raises(arig.DeviceLost) as info:
                    await asyncio.wait_for(w, 5.0)
                assert info.value.cause is failure
                assert type(failure).__name__ in str(info.value)
        finally:
            gate.set()
            await asyncio.wait_for(dev.stop(), 10.0)
        assert dev.lost is failure

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _run(main)
    assert _ended(_arig_threads() - before)


# -- what cannot be a fill, a queue or a value is refused before a value is assigned --------------------


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
            await dev.submit(_noop, queue=queue)

    call(attempt)
    assert dev.submitted == submitted and dev.lost is None


def test_a_queue_of_another_device_is_refused(shared_device: Any) -> None:
    dev, call = shared_device

    async def attempt() -> None:
        async with await arig.open(arig.host.cpu(queues=2)) as other:
            with pytest.raises(arig.ArigValueError, match="not a queue of this device"):
                await other.submit(_noop, queue=dev.queues[1])

    _run(attempt)


@settings(max_examples=100, deadline=None)
@given(v=st.one_of(st.booleans(), st.floats(), st.text(max_size=3), st.none(), st.builds(object), st.just(np.int64(1)), st.integers(min_value=10**6)))
def test_what_cannot_be_a_value_is_refused(shared_device: Any, v: Any) -> None:
    dev, call = shared_device
    submitted = dev.submitted

    async def attempt() -> None:
        with pytest.raises((arig.ArigTypeError, arig.ArigValueError)):
            await dev.wait(v)
        if not isinstance(v, int) or isinstance(v, bool):
            with pytest.raises(arig.ArigTypeError):
                dev.reached_at(v)

    call(attempt)
    assert dev.submitted == submitted and dev.lost is None


@settings(max_examples=100, deadline=None)
@given(
    window=st.one_of(
        st.floats(max_value=0.0), st.just(math.nan), st.just(-math.inf), st.floats(min_value=1e300, allow_infinity=False),
        st.integers(max_value=0), st.integers(min_value=10**310), st.text(max_size=3), st.none(), st.booleans(), st.builds(object),
    )
)
def test_what_cannot_be_a_window_is_refused_before_the_driver(window: Any) -> None:
    original = nvrm._active_bus
    nvrm._active_bus = lambda i: pytest.fail("the GPU was asked")
    try:
        with pytest.raises(arig.ArigValueError):
            nvrm.usage(0, window)
    finally:
        nvrm._active_bus = original


# -- another loop, another thread ------------------------------------------------------------------------


def _calls(dev: arig.Device) -> dict[str, Callable[[], Coroutine[Any, Any, Any]]]:
    return {
        "submit": lambda: dev.submit(_noop),
        "run": lambda: dev.run(_noop),
        "wait": lambda: dev.wait(1),
        "stop": dev.stop,
        "alloc": lambda: dev.alloc(16),
        "upload": lambda: dev.upload(None, np.zeros(4, np.uint8)),  # type: ignore[arg-type]
        "download": lambda: dev.download(None, np.zeros(4, np.uint8)),  # type: ignore[arg-type]
        "load": lambda: dev.load(b"\0"),
    }


CALLS = ["submit", "run", "wait", "stop", "alloc", "upload", "download", "load"]


def _state(dev: arig.Device) -> tuple[Any, ...]:
    return (dev.submitted, dev.reached, dev.stopped, dev.lost, dev._stop_task)


@pytest.mark.asyncio
@pytest.mark.parametrize("call", CALLS)
async def test_a_device_used_from_another_loop_in_another_thread_is_refused_before_any_change(call: str) -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        await dev.run(_noop)
        before = _state(dev)
        seen: list[BaseException] = []

        def elsewhere() -> None:
            try:
                asyncio.run(_calls(dev)[call]())
            except BaseException as exc:  # noqa: BLE001 - examined below
                seen.append(exc)

        thread = threading.Thread(target=elsewhere)
        thread.start()
        await asyncio.to_thread(thread.join, 10)
        (err,) = seen
        assert isinstance(err, arig.WrongLoopError) and isinstance(err, RuntimeError), repr(err)
        assert "HOST" in str(err) and "another event loop" in str(err)
        assert _state(dev) == before
        await dev.run(_noop)  # still fine on its own loop


@pytest.mark.asyncio
async def test_a_device_used_from_a_thread_without_a_loop_is_refused() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        seen: list[BaseException] = []

        def elsewhere() -> None:
            coro = dev.submit(_noop)
            try:
                coro.send(None)
            except BaseException as exc:  # noqa: BLE001 - examined below
                seen.append(exc)
            finally:
                coro.close()

        thread = threading.Thread(target=elsewhere)
        thread.start()
        await asyncio.to_thread(thread.join, 10)
        (err,) = seen
        assert isinstance(err, arig.WrongLoopError)
        assert "no running event loop" in str(err)
        assert dev.submitted == 0


def test_a_device_used_after_its_loop_closed_is_refused_and_released_when_collected() -> None:
    before = _arig_threads()
    kept = [Token()]
    ref = weakref.ref(kept[0])

    async def first() -> arig.Device:
        dev = await arig.open(arig.host.cpu())
        await dev.run(_noop, keep=kept.pop())
        return dev

    dev = _run(first)
    for call in CALLS:
        with pytest.raises(arig.WrongLoopError, match="closed"):
            asyncio.run(_calls(dev)[call]())
    assert dev.submitted == 1 and not dev.stopped
    with pytest.warns(ResourceWarning, match="never stopped"):
        del dev
        gc.collect()
    assert _ended(_arig_threads() - before)
    gc.collect()
    assert ref() is None


def test_a_loop_that_moves_to_another_thread_keeps_its_device() -> None:
    """The device belongs to the loop, not to a thread: a loop run from another thread later still uses it."""
    loop = asyncio.new_event_loop()
    try:
        dev = loop.run_until_complete(arig.open(arig.host.cpu()))
        result: list[int] = []
        thread = threading.Thread(target=lambda: result.append(loop.run_until_complete(dev.run(_noop))))
        thread.start()
        thread.join(10)
        assert result == [1]
        loop.run_until_complete(dev.stop())
    finally:
        loop.close()


# -- nothing leaks -----------------------------------------------------------------------------------------


def _readers(loop: asyncio.AbstractEventLoop) -> int:
    selector = getattr(loop, "_selector", None)
    return len(selector.get_map()) if selector is not None else 0


async def _after_stop(dev: arig.Device, gate: threading.Event) -> None:
    await dev.run(lambda q, a, v: q.enqueue(time.sleep, 0.001))
    await dev.stop()


async def _after_stop_timeout(dev: arig.Device, gate: threading.Event) -> None:
    await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0))
    await dev.stop()
    gate.set()


async def _after_a_blocked_fill(dev: arig.Device, gate: threading.Event) -> None:
    await dev.submit(lambda q, a, v: gate.wait(5.0) and None)
    await dev.stop()
    gate.set()


async def _after_loss(dev: arig.Device, gate: threading.Event) -> None:
    with pytest.raises(arig.DeviceLost):
        await dev.run(lambda q, a, v: 3)
    await dev.stop()


async def _after_hang(dev: arig.Device, gate: threading.Event) -> None:
    v = await dev.submit(lambda q, a, v: q.enqueue(gate.wait, 5.0))
    with pytest.raises(arig.DeviceLost):
        await dev.wait(v)
    await dev.stop()
    gate.set()


PATHS = {
    "stop": _after_stop,
    "stop timeout": _after_stop_timeout,
    "blocked fill": _after_a_blocked_fill,
    "loss": _after_loss,
    "hang": _after_hang,
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_no_path_leaks_a_thread_fd_reader_or_kept_object(path: str) -> None:
    before, fds = _arig_threads(), _fds()
    refs: list[weakref.ref[Token]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        readers = _readers(loop)
        gate = threading.Event()
        dev = await arig.open(arig.host.cpu(hang_ms=100), stop_timeout=0.2)
        for _ in range(3):
            kept, arg = Token(), Token()
            refs.extend([weakref.ref(kept), weakref.ref(arg)])
            await dev.submit(_noop, arg, keep=kept)
        try:
            await PATHS[path](dev, gate)
        finally:
            gate.set()
        assert _readers(loop) == readers

    _run(main)
    assert _ended(_arig_threads() - before)
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)
    assert _fds() == fds


def test_a_device_never_stopped_and_collected_leaks_nothing() -> None:
    before, fds = _arig_threads(), _fds()
    refs: list[weakref.ref[Token]] = []

    async def main() -> None:
        dev = await arig.open(arig.host.cpu(queues=2))
        kept = Token()
        refs.append(weakref.ref(kept))
        await dev.submit(lambda q, a, v: q.enqueue(time.sleep, 0.05), keep=kept)
        del kept
        with pytest.warns(ResourceWarning, match="never stopped"):
            del dev
            gc.collect()

    _run(main)
    assert _ended(_arig_threads() - before)
    gc.collect()
    assert refs[0]() is None
    assert _fds() == fds


def test_a_device_collected_under_warnings_as_errors_still_ends_its_threads() -> None:
    before = _arig_threads()

    async def main() -> None:
        dev = await arig.open(arig.host.cpu())
        await dev.run(_noop)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            # The finalizer's warning raises; Python reports it as unraisable, and the threads end anyway.
            with _unraisable() as seen:
                del dev
                gc.collect()
        assert seen and isinstance(seen[0].exc_value, ResourceWarning)

    _run(main)
    assert _ended(_arig_threads() - before)


class _unraisable:
    """Collect what ``sys.unraisablehook`` receives while active."""

    def __enter__(self) -> list[Any]:
        import sys

        self._sys = sys
        self._old = sys.unraisablehook
        self.seen: list[Any] = []
        sys.unraisablehook = self.seen.append
        return self.seen

    def __exit__(self, *exc: Any) -> None:
        self._sys.unraisablehook = self._old


class _FailingBind(HostBackend):
    def bind(self, timeline: Any, post: Callable[..., None]) -> None:
        super().bind(timeline, post)  # the queues' workers start here ...
        raise OSError("cannot start a thread")  # ... and then the open fails


class _FailingBindOpener(HostOpener):
    def make(self) -> HostBackend:
        return _FailingBind(self.queues, self.depth, self.hang_ms)


class _FailingMake:
    name = "HOST"

    def make(self) -> Backend:
        raise MemoryError("no memory for the device")


@pytest.mark.parametrize("opener", [_FailingMake(), _FailingBindOpener(3, 16, None)], ids=["make", "bind"])
def test_a_failed_open_leaks_nothing(opener: Any) -> None:
    before, fds = _arig_threads(), _fds()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        readers = _readers(loop)
        with pytest.raises(arig.OpenError, match="cannot open HOST"):
            await arig.open(opener)
        assert _readers(loop) == readers

    _run(main)
    assert _ended(_arig_threads() - before)
    assert _fds() == fds
