"""One error tree: what arig raises on purpose is an ``ArigError`` (never a bare one, never a
built-in), and misuse (of memory, images, operations a device lacks) is also the matching
built-in."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path
from typing import Any

import pytest

import arig
import arig._errors
import arig.host
from arig._memory import Buffer, Image
from arig.cuda._resources import CudaBuffer
from arig.device import Backend

ARIG = Path(arig.__file__).resolve().parent

#: The modules whose raises this file checks (the device core, the host device, the CLI, nvrm).
CHECKED = [
    "_errors.py", "_memory.py", "host.py", "device.py", "_device_args.py", "_device_features.py", "_device_registry.py", "_hang_watch.py", "_timeline.py", "_submit.py", "queue.py", "_log.py",
    "__main__.py", "_cli/info.py", "_cli/demo.py", "_cli/saxpy.py", "_cli/pipeline.py",
    "nvrm/__init__.py", "nvrm/_rm.py", "nvrm/_rmobjects.py", "nvrm/_rmmem.py", "nvrm/_undo.py", "nvrm/_fd.py", "nvrm/_params.py", "nvrm/_sysfs.py", "nvrm/_top.py",
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


def test_wrong_loop_and_key_errors_are_public_and_in_the_tree() -> None:
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
    notes = False  # as its own lane: it shows no progress between signals

    def call_fill(self, qi: int, fill: Any, arg: Any, v: int) -> None:
        fill(None, arg, v)

    def lanes(self) -> list[_Bare]:
        return [self]  # its one queue is its own lane: done as soon as it is signalled

    def note(self, v: int) -> None:
        pass

    def signal(self, v: int) -> None:
        self.timeline.report(0, v)

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
