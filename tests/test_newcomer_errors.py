"""One error tree: what arig raises on purpose is an ``ArigError``, misuse is also the
matching built-in, and every error pickles (a ``DeviceLost`` crosses a process boundary
keeping its message and its cause's text)."""

from __future__ import annotations

import ast
import asyncio
import builtins
import concurrent.futures
import multiprocessing
import pickle
from pathlib import Path
from typing import Any

import pytest

import arig
import arig._errors
import arig.host
from arig._errors import ForeignError, describe
from arig._memory import Buffer, Image
from arig.cuda._resources import CudaBuffer
from arig.device import Backend
from arig.nvrm import DriverError, NoGpuError, RmError

ARIG = Path(arig.__file__).resolve().parent

#: The modules whose raises this file checks (the device core, the host device, the CLI, nvrm).
CHECKED = [
    "_errors.py", "_memory.py", "host.py", "device.py", "_timeline.py", "_submit.py", "queue.py", "_log.py",
    "__main__.py", "_cli/info.py", "_cli/demo.py",
    "nvrm/__init__.py", "nvrm/_client.py", "nvrm/_fd.py", "nvrm/_params.py", "nvrm/_sysfs.py", "nvrm/_top.py",
]  # fmt: skip

#: What a protocol requires: ``__getattr__`` and ``__cuda_array_interface__`` raise AttributeError,
#: an argparse ``type=`` raises ArgumentTypeError (argparse turns it into exit status 2).
PROTOCOL = {"AttributeError", "ArgumentTypeError"}


def _raised_names(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every ``raise Name(...)`` / ``raise Name`` in a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(target, ast.Name):
                found.append((node.lineno, target.id))
            elif isinstance(target, ast.Attribute):
                found.append((node.lineno, target.attr))
    return found


def _error_classes() -> dict[str, type[BaseException]]:
    import arig._cli.demo
    import arig.cuda
    import arig.nvrm._params

    classes: dict[str, type[BaseException]] = {}
    for module in (arig, arig._errors, arig.nvrm, arig.nvrm._params, arig.cuda, arig._cli.demo):
        for name, obj in vars(module).items():
            if isinstance(obj, type) and issubclass(obj, BaseException):
                classes[name] = obj
    return classes


@pytest.mark.parametrize("module", CHECKED)
def test_every_raise_is_an_arig_error_and_never_a_bare_one(module: str) -> None:
    classes = _error_classes()
    for line, name in _raised_names(ARIG / module):
        if name in PROTOCOL or name in ("exc", "err", "error", "e"):  # re-raising a caught one
            continue
        where = f"{module}:{line} raises {name}"
        assert not hasattr(builtins, name), f"{where}: a built-in, outside arig's tree"
        cls = classes.get(name)
        assert cls is not None, f"{where}: not a known error class"
        assert issubclass(cls, arig.ArigError), where
        assert cls is not arig.ArigError, f"{where}: a bare ArigError cannot be caught apart from the others"


def test_the_new_errors_are_public_and_in_the_tree() -> None:
    assert issubclass(arig.WrongLoopError, arig.ArigError) and issubclass(arig.WrongLoopError, RuntimeError)
    assert issubclass(arig.ArigKeyError, arig.ArigValueError) and issubclass(arig.ArigKeyError, KeyError)
    assert str(arig.ArigKeyError("no function 'x'")) == "no function 'x'"  # not quoted as KeyError's str is
    assert "WrongLoopError" in arig.__all__ and "ArigKeyError" in arig.__all__


# -- memory, images, unsupported operations ----------------------------------------------------------


def test_buffer_misuse_raises_misuse_errors() -> None:
    device_memory = CudaBuffer("CUDA", "device", 0x1000, 16, lambda: None, 0)
    with pytest.raises(arig.ArigTypeError, match="not visible to the host"):
        device_memory.numpy()
    device_memory.close()
    with pytest.raises(arig.ArigValueError, match="closed"):
        device_memory.__cuda_array_interface__  # noqa: B018
    assert not hasattr(Buffer("HOST", "host", 0x1000, 16, lambda: None), "__cuda_array_interface__")


@pytest.mark.asyncio
async def test_a_closed_host_buffer_refuses_a_view() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        buf = await dev.alloc(16)
        buf.close()
        with pytest.raises(arig.ArigValueError, match="closed"):
            buf.numpy()


def test_image_lookups_raise_arig_key_error() -> None:
    image = Image("CUDA", 1, {"saxpy": 5}, lambda: None)
    assert image.function("saxpy") == 5
    with pytest.raises(KeyError, match="no function 'nope'") as info:
        image.function("nope")
    assert isinstance(info.value, arig.ArigKeyError) and isinstance(info.value, ValueError)
    with pytest.raises(arig.ArigKeyError):
        image.function([])  # type: ignore[arg-type]  # unhashable: still a lookup that failed
    image.unload()
    with pytest.raises(arig.ArigValueError, match="unloaded"):
        image.function("saxpy")


class _Bare(Backend):
    """A driver with queues and nothing else: no memory, no copies, no images."""

    name = "BARE"
    arch = "bare"
    facts: dict[str, Any] = {}
    queue_handles = [None]

    def call_fill(self, qi: int, fill: Any, arg: Any, v: int) -> None:
        fill(None, arg, v)

    def signal(self, qi: int, v: int) -> None:
        self.timeline.report(qi, v)

    def close(self) -> None:
        pass


class _BareOpener:
    name = "BARE"

    def make(self) -> Backend:
        return _Bare()


@pytest.mark.asyncio
async def test_an_operation_a_device_lacks_is_an_arig_type_error() -> None:
    import numpy as np

    async with await arig.open(_BareOpener()) as dev:
        with pytest.raises(arig.ArigTypeError, match="allocates no memory"):
            await dev.alloc(16)
        with pytest.raises(arig.ArigTypeError, match="loads no images"):
            await dev.load(b"\0")
        buf = Buffer("BARE", "host", 0, 16, lambda: None, host=np.zeros(16, np.uint8))
        with pytest.raises(arig.ArigTypeError, match="copies no memory"):
            await dev.upload(buf, np.zeros(4, np.uint8))
        assert dev.lost is None and dev.submitted == 0


def test_a_device_cannot_be_constructed() -> None:
    with pytest.raises(arig.ArigTypeError, match="arig.open"):
        arig.Device()


# -- describing and pickling ------------------------------------------------------------------------


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
