"""Every error pickles with its message and attributes, without asking a driver; a
``DeviceLost`` crosses a process boundary keeping its message and its cause (the cause's
text where the cause itself cannot be pickled), and a cause whose ``str()`` raises is still
described."""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import pickle
from typing import Any

import pytest

import arig
import arig.host
from arig._errors import ForeignError, describe
from arig.nvrm import DriverError, NoGpuError, RmError


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


def test_describe_and_device_lost_survive_a_cause_whose_str_raises() -> None:
    assert describe(Unprintable()) == "Unprintable: <str() of this exception raised>"
    lost = arig.DeviceLost("HOST", Unprintable())
    assert "device HOST lost: Unprintable" in str(lost)
    assert isinstance(lost.cause, Unprintable)


def _round_trip(exc: BaseException) -> Any:
    return pickle.loads(pickle.dumps(exc, pickle.HIGHEST_PROTOCOL))


@pytest.mark.parametrize(
    "exc",
    [
        arig.ArigError("root"),
        arig.OpenError("cannot open X"),
        arig.DeviceStopped("stopped"),
        arig.DeviceHang("no progress"),
        arig.ArigValueError("bad value"),
        arig.ArigTypeError("bad type"),
        arig.ArigKeyError("no name"),
        arig.WrongLoopError("wrong loop"),
        arig.FillError(7, "why"),
        RmError("op", 0x51),
        DriverError("cannot open /dev/nvidiactl", 2),
        NoGpuError("no GPU 3"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_every_error_pickles_with_its_message_and_attributes(exc: BaseException) -> None:
    back = _round_trip(exc)
    assert type(back) is type(exc)
    assert str(back) == str(exc)
    assert back.args == exc.args
    assert vars(back) == vars(exc)


def test_a_cuda_error_pickles_without_asking_the_driver() -> None:
    import arig.cuda

    for exc in (arig.cuda.CudaError(700, "launch"), arig.cuda.CudaOutOfMemory(2, "alloc")):
        back = _round_trip(exc)
        assert type(back) is type(exc) and str(back) == str(exc) and back.code == exc.code
    assert isinstance(_round_trip(arig.cuda.CudaOutOfMemory(2)), MemoryError)


def test_device_lost_pickles_with_a_picklable_cause() -> None:
    lost = arig.DeviceLost("CUDA:1", arig.FillError(700, "illegal address"))
    back = _round_trip(lost)
    assert str(back) == str(lost) and back.device == "CUDA:1"
    assert isinstance(back.cause, arig.FillError) and back.cause.code == 700
    assert back.__cause__ is back.cause


def test_device_lost_pickles_a_cause_that_cannot_be_pickled_as_its_text() -> None:
    class Local(Exception):  # a class pickle cannot find by name
        pass

    class LocalUnprintable(Unprintable):
        pass

    for cause, text in ((Local("the work failed"), "the work failed"), (LocalUnprintable(), "<str() of this exception raised>")):
        lost = arig.DeviceLost("HOST", cause)
        back = _round_trip(lost)
        assert str(back) == str(lost)
        assert isinstance(back.cause, ForeignError)
        assert back.cause.type_name == type(cause).__name__
        assert str(back.cause) == text
        assert describe(back.cause) == describe(cause)
    assert _round_trip(_round_trip(arig.DeviceLost("HOST", Local("x")))).cause.type_name == "Local"
    assert isinstance(_round_trip(arig.DeviceLost("HOST", Unprintable())).cause, Unprintable)  # found by name: itself


def _lose_a_device() -> arig.DeviceLost:
    """In a worker process: a device lost by a failure only that process knows."""

    class WorkerOnly(Exception):
        pass

    async def main() -> arig.DeviceLost:
        def fill(q: Any, a: Any, v: int) -> None:
            raise WorkerOnly("the fill failed in the worker")

        async with await arig.open(arig.host.cpu()) as dev:
            try:
                await dev.run(fill)
            except arig.DeviceLost as exc:
                return exc
        raise AssertionError("not lost")

    return asyncio.run(main())


def _raise_device_lost() -> None:
    raise _lose_a_device()


def test_device_lost_crosses_a_process_boundary() -> None:
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        lost = pool.submit(_lose_a_device).result(timeout=120)
        assert isinstance(lost, arig.DeviceLost)
        assert str(lost) == "device HOST lost: WorkerOnly: the fill failed in the worker"
        assert lost.device == "HOST"
        assert isinstance(lost.cause, ForeignError) and lost.cause.type_name == "WorkerOnly"
        # Raised there, raised here (the pool chains its own remote traceback as the cause).
        with pytest.raises(arig.DeviceLost, match="WorkerOnly: the fill failed in the worker"):
            pool.submit(_raise_device_lost).result(timeout=120)
