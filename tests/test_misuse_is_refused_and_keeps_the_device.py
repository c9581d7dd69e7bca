"""Misuse that once reached the device's thread (and lost the device, or crashed the process)
is refused at the call, before a value is assigned, by an error of arig's tree; the device
stays usable.  On the host device and on both GPUs over their fakes, on each engine."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import math
from collections.abc import AsyncIterator, Iterator
from typing import Any

import numpy as np
import pytest
from _lifetimes import noop

import arig
import arig._device_args
import arig.cuda
import arig.host
import arig.nvrm
from arig.testing import FakeCuda, FakeGpu, FakeNvrm

pytestmark = pytest.mark.asyncio

T = 10.0
KINDS = ["host", "cuda", "nv"]


@contextlib.contextmanager
def _driver(kind: str) -> Iterator[None]:
    """The fake driver ``kind`` needs, with two GPUs; it must have seen no misuse."""
    if kind == "host":
        yield
        return
    if kind == "nv" and not arig._engine.choose().native:
        pytest.skip(f"the NV device runs on the native core only: {arig._engine.choose().why}")
    fake: FakeCuda | FakeNvrm = FakeCuda(gpus=[FakeGpu(), FakeGpu(bus="0000:5E:00.0")]) if kind == "cuda" else FakeNvrm(gpus=2)
    with fake.installed():
        yield
    assert fake.violations == []


def _opener(kind: str, i: int) -> Any:
    return {"host": arig.host.cpu, "cuda": arig.cuda.gpu, "nv": arig.nvrm.gpu}[kind](*(() if kind == "host" else (i,)))


@contextlib.asynccontextmanager
async def _devices(kind: str, n: int = 1) -> AsyncIterator[list[arig.Device]]:
    """``n`` devices of ``kind`` open at once (GPUs 0, 1, ...: each device kind names them alike)."""
    with _driver(kind):
        devs: list[arig.Device] = []
        try:
            for i in range(n):
                devs.append(await asyncio.wait_for(arig.open(_opener(kind, i)), T))
            yield devs
        finally:
            for d in devs:
                await d.stop()


async def _still_works(dev: arig.Device, submitted: int) -> None:
    """Nothing was assigned by the refused call, and the device takes work."""
    assert dev.submitted == submitted and dev.lost is None
    assert await asyncio.wait_for(dev.run(noop), T) == submitted + 1


# -- fills that cannot be called as fill(queue, arg, v) ------------------------------------------


class _Callable:
    def __call__(self, queue: Any) -> None:
        pass

    def takes_none(self) -> None:
        pass

    def takes_three(self, queue: Any, arg: Any, v: int) -> None:
        pass


def _two(queue: Any, arg: Any) -> None:
    pass


def _kw_only(queue: Any, arg: Any, v: int, *, extra: Any) -> None:
    pass


WRONG_ARITY = {
    "lambda of none": lambda: None,
    "function of two": _two,
    "lambda of four": lambda q, a, v, w: None,
    "a required keyword": _kw_only,
    "a method of none": _Callable().takes_none,
    "an object of one": _Callable(),
    "a partial of none left": functools.partial(_two, 1, 2),
    "a partial with a keyword": functools.partial(_two, arg=1),
    "a partial of too many": functools.partial(_two, 1, 2, 3),
    "a class whose instances take one": _Callable,
    "a builtin of one": len,
}
RIGHT_ARITY = {
    "defaults": lambda q, a=None, v=0, w=1: None,
    "varargs": lambda *args: None,
    "a method": _Callable().takes_three,
    "a partial": functools.partial(lambda x, q, a, v: None, 1),
    "a partial with a keyword": functools.partial(lambda q, a, v, k: None, k=1),
    "an object with a def __call__ of *args": type("Star", (), {"__call__": lambda self, *a: None})(),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fill", list(WRONG_ARITY.values()), ids=list(WRONG_ARITY))
async def test_a_fill_of_the_wrong_arity_is_refused_at_submit(engine: str, kind: str, fill: Any) -> None:
    async with _devices(kind) as (dev,):
        with pytest.raises(arig.ArigTypeError, match=r"cannot be called as fill\(queue, arg, v\)"):
            await dev.run(fill)
        await _still_works(dev, 0)


@pytest.mark.parametrize("fill", list(RIGHT_ARITY.values()), ids=list(RIGHT_ARITY))
async def test_a_fill_that_takes_three_arguments_in_any_form_runs(fill: Any) -> None:
    async with _devices("host") as (dev,):
        assert await dev.run(fill, "name") == 1 and dev.lost is None


async def test_a_fill_whose_signature_cannot_be_read_is_left_to_the_call() -> None:
    with pytest.raises(ValueError):
        inspect.signature(max)
    assert arig._device_args.check_fill_args(max) is None


# -- buffers of another device of the same name ------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_a_buffer_of_another_open_device_is_refused(engine: str, kind: str) -> None:
    async with _devices(kind, 2) as (a, b):
        buf = await b.alloc(16)
        data = np.zeros(4, np.float32)
        with pytest.raises(arig.ArigTypeError, match=f"expected a buffer of {a.name}"):
            await a.upload(buf, data)
        with pytest.raises(arig.ArigTypeError, match=f"expected a buffer of {a.name}"):
            await a.download(buf, data)
        await _still_works(a, 0)
        assert await b.upload(buf, data) == 1  # its own device takes it
        buf.close()


# -- numbers -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_numpy_integers_are_taken_where_an_int_is(engine: str, kind: str) -> None:
    async with _devices(kind) as (dev,):
        buf = await dev.alloc(np.int64(16))
        assert buf.nbytes == 16 and type(buf.nbytes) is int
        v = await dev.submit(noop, queue=np.int32(0))
        await asyncio.wait_for(dev.wait(np.uint64(v)), T)
        await asyncio.wait_for(dev.wait(np.int64(0)), T)
        assert dev.reached_at(np.int64(v)) is not None
        buf.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_negative_values_and_huge_sizes_are_refused_by_name(engine: str, kind: str) -> None:
    async with _devices(kind) as (dev,):
        for v in (-1, -5, np.int64(-1)):
            with pytest.raises(arig.ArigValueError, match=r"v must be a value the device handed out \(1, 2, ...\) or 0"):
                await dev.wait(v)
            with pytest.raises(arig.ArigValueError, match="v must be a value"):
                dev.reached_at(v)
        for n in (2**63, 2**70, np.uint64(2**63)):
            with pytest.raises(arig.ArigValueError, match="nbytes is too large"):
                await dev.alloc(n)
        await _still_works(dev, 0)


OBJECT_ARRAYS = {
    "object": lambda: np.empty(4, object),
    "structured with an object": lambda: np.zeros(2, dtype=[("a", np.float64), ("b", object)]),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("make", list(OBJECT_ARRAYS.values()), ids=list(OBJECT_ARRAYS))
async def test_arrays_of_python_objects_are_neither_uploaded_nor_downloaded(engine: str, kind: str, make: Any) -> None:
    async with _devices(kind) as (dev,):
        buf = await dev.alloc(64)
        with pytest.raises(arig.ArigTypeError, match="holds Python objects"):
            await dev.upload(buf, make())
        out = make()
        with pytest.raises(arig.ArigTypeError, match="holds Python objects"):
            await dev.download(buf, out)
        assert all(x is None or x == 0 for x in out.tolist()) or out.dtype.names  # untouched
        repr(out)  # its object pointers are still objects
        await _still_works(dev, 0)
        buf.close()


# -- an int that is no compiled fill ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["cuda", "nv"])
@pytest.mark.parametrize("address", [1, 4096, 0x7FFF_0000, (1 << 64) - 4096])
async def test_an_int_that_points_at_no_code_is_no_compiled_fill(engine: str, kind: str, address: int) -> None:
    async with _devices(kind) as (dev,):
        with pytest.raises(arig.ArigValueError, match="is in no executable mapping"):
            await dev.submit(address)
        await _still_works(dev, 0)


# -- timeouts --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("timeout", "error", "words"),
    [(10**400, arig.ArigValueError, "stop_timeout is too large"), ("1", arig.ArigTypeError, "stop_timeout must be a number of seconds, got str"),
     (None, arig.ArigTypeError, "stop_timeout must be a number of seconds, got NoneType"), (True, arig.ArigTypeError, "got bool"),
     (math.nan, arig.ArigValueError, "stop_timeout must be positive"), (0, arig.ArigValueError, "stop_timeout must be positive")],
)  # fmt: skip
async def test_a_stop_timeout_that_is_no_positive_number_is_refused_before_the_open(timeout: Any, error: type[Exception], words: str) -> None:
    made = []
    opener = arig.host.cpu()

    class Counting:
        name = opener.name

        def make(self) -> Any:
            made.append(1)
            return opener.make()

    with pytest.raises(error, match=words):
        await arig.open(Counting(), stop_timeout=timeout)
    assert made == []  # refused before any driver work


async def test_a_stop_timeout_may_be_any_real_number() -> None:
    for timeout in (np.float32(5), np.int64(5), 5, 0.5, math.inf):
        async with await arig.open(arig.host.cpu(), stop_timeout=timeout) as dev:
            assert await dev.run(noop) == 1


# -- the NV fake's GPUs ---------------------------------------------------------------------------


async def test_each_fake_nv_gpu_has_its_own_uuid_and_two_open_at_once_are_clean() -> None:
    async with _devices("nv", 2) as (a, b):
        assert a.facts["uuid"] != b.facts["uuid"]
        assert arig.nvrm.describe(0)["uuid"] == a.facts["uuid"] and arig.nvrm.describe(1)["uuid"] == b.facts["uuid"]
        assert await a.run(noop) == 1 and await b.run(noop) == 1
    # _driver asserted the fake saw no violation (no "registered twice")


async def test_a_dma_region_takes_numpy_integers_and_refuses_a_negative_offset() -> None:
    async with _devices("host") as (dev,):
        buf = await dev.alloc(64)
        assert arig._device_args.dma_region(buf, np.int64(16), np.uint8(8)) == (16, 8)
        assert arig._device_args.dma_region(buf, np.int32(60), None) == (60, 4)
        for offset, nbytes in ((-4, None), (-4, 8), (0, 0), (60, 8)):
            with pytest.raises(arig.ArigValueError, match="is not inside the buffer of 64 bytes"):
                arig._device_args.dma_region(buf, offset, nbytes)
        buf.close()
