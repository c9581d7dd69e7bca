"""Both GPUs take a launch, its sizes, its arguments and a compiled fill by one rule."""

from __future__ import annotations

import ctypes
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arig.cuda
import arig.nvrm
from arig import _launchspec
from arig._errors import ArigTypeError, ArigValueError
from arig.cuda import _launch as cuda_launch
from arig.cuda_abi import FILL
from arig.nvrm import _cubin, _images
from arig.nvrm import abi as nv_abi

CUBIN = (Path(__file__).resolve().parent / "data" / "nv" / "probe.sm_90.cubin").read_bytes()
AXPY = _cubin.parse(CUBIN).kernels["axpy"]  # axpy(float a, const float *x, float *y, int n)
GOOD_ARGS = struct.pack("<f4xQQi", 2.0, 0x10_0000, 0x20_0000, 64)
LAUNCHES = (arig.cuda.Launch, arig.nvrm.Launch)


@pytest.fixture
def func(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """One kernel known to both devices by one handle, with the cubin's layout on each."""
    fid = _images.register(_images.LoadedKernel(AXPY, 0x10_0020_0000, owner=1))
    monkeypatch.setitem(cuda_launch._LAYOUTS, fid, AXPY.params)
    yield fid
    _images.unregister(fid)


def refusal(launch: Any, *a: Any, **kw: Any) -> tuple[type[BaseException], str]:
    """The error type and message, less the kernel's name: how a device names a kernel (the cubin's
    name, a CUfunction's handle) is its own; the rule and the words are shared."""
    with pytest.raises((ArigValueError, ArigTypeError)) as e:
        launch(*a, **kw)
    return type(e.value), re.sub(r"for kernel \S+ ", "for kernel K ", str(e.value))


def test_both_gpus_use_one_dims_rule() -> None:
    assert cuda_launch.dims is _launchspec.dims
    assert all(issubclass(launch, _launchspec.LaunchSpec) for launch in LAUNCHES)


BAD = {
    "func a str": (("axpy", 1, 32, GOOD_ARGS), {}),
    "func a bool": ((True, 1, 32, GOOD_ARGS), {}),
    "func 0": ((0, 1, 32, GOOD_ARGS), {}),
    "func negative": ((-5, 1, 32, GOOD_ARGS), {}),
    "func past 64 bits": ((1 << 64, 1, 32, GOOD_ARGS), {}),
    "grid of two": ((None, (4, 2), 32, GOOD_ARGS), {}),
    "grid 0": ((None, 0, 32, GOOD_ARGS), {}),
    "grid past 32 bits": ((None, 1 << 32, 32, GOOD_ARGS), {}),
    "func a float": ((1.0, 1, 32, GOOD_ARGS), {}),
    "block past 32 bits": ((None, 1, (1, 1, 1 << 32), GOOD_ARGS), {}),
    "block a float": ((None, 1, 1.5, GOOD_ARGS), {}),
    "args a list": ((None, 1, 32, [1, 2]), {}),
    "args an int": ((None, 1, 32, 28), {}),
    "args a str": ((None, 1, 32, "abc"), {}),
    "args short": ((None, 1, 32, GOOD_ARGS[:24]), {}),
    "args long": ((None, 1, 32, GOOD_ARGS + bytes(4)), {}),
    "shared negative": ((None, 1, 32, GOOD_ARGS), {"shared": -1}),
    "shared past 32 bits": ((None, 1, 32, GOOD_ARGS), {"shared": 1 << 32}),
    "shared a float": ((None, 1, 32, GOOD_ARGS), {"shared": 1.5}),
    "shared a bool": ((None, 1, 32, GOOD_ARGS), {"shared": True}),
}


@pytest.mark.parametrize("case", list(BAD))
def test_both_launches_refuse_the_same_things_with_the_same_error(func: int, case: str) -> None:
    a, kw = BAD[case]
    a = (func if a[0] is None else a[0], *a[1:])
    cuda, nv = (refusal(launch, *a, **kw) for launch in LAUNCHES)
    assert cuda == nv


def test_a_wrong_argument_buffer_is_refused_naming_the_layout(func: int) -> None:
    for launch in LAUNCHES:
        with pytest.raises(ArigValueError, match=r"argument buffer of 24 bytes .* 28 bytes.*\(0, 4\), \(8, 8\), \(16, 8\), \(24, 4\)"):
            launch(func, 1, 32, GOOD_ARGS[:24])
    assert _launchspec.args_size(AXPY.params) == 28 == len(GOOD_ARGS)
    assert _launchspec.args_size(()) == 0


@pytest.mark.parametrize(
    ("grid", "block", "args", "shared"),
    [(4, 32, GOOD_ARGS, 0), (np.int64(4), [32, 1, 1], bytearray(GOOD_ARGS), np.int32(64)), ((1, 2, 3), (8, 4, 1), memoryview(GOOD_ARGS), 1024)],
)
def test_both_launches_accept_the_same_things_as_the_same_launch(func: int, grid: Any, block: Any, args: Any, shared: Any) -> None:
    made = [launch(func, grid, block, args, shared=shared) for launch in LAUNCHES]
    fields = {(m.func, m.grid, m.block, m.args, m.shared) for m in made}
    assert len(fields) == 1
    ((f, g, b, data, sh),) = fields
    assert f == func and type(data) is bytes and data == bytes(args) and type(sh) is int and sh == int(shared)
    assert all(type(d) is int for d in g + b) and g == _launchspec.dims(grid, "grid")


def test_a_kernel_only_the_cuda_driver_knows_is_left_to_the_driver(func: int) -> None:
    """A CUDA handle without a recorded layout is launched unchecked (the driver checks); an NV launch
    needs the kernel's cubin facts, so it refuses a handle no NV image loaded."""
    unknown = func + 1000
    assert arig.cuda.Launch(unknown, 1, 1, b"\0" * 3).args == b"\0" * 3
    with pytest.raises(ArigValueError, match="no kernel of an image loaded"):
        arig.nvrm.Launch(unknown, 1, 1, b"\0" * 3)


def test_cuda_set_args_takes_args_by_the_same_rule(func: int) -> None:
    launch = arig.cuda.Launch(func, 1, 32, GOOD_ARGS)
    for bad in (GOOD_ARGS[:24], [1, 2]):
        cuda = refusal(launch.set_args, bad)
        assert cuda == refusal(arig.nvrm.Launch, func, 1, 32, bad)
    assert launch.args == GOOD_ARGS  # a refused buffer leaves the launch as it was
    other = struct.pack("<f4xQQi", 3.0, 1, 2, 3)
    launch.set_args(bytearray(other))
    assert launch.args == other
    extra = (ctypes.c_void_p * 5).from_address(launch._rec.extra)  # what the native core hands cuLaunchKernel
    assert ctypes.string_at(extra[1], ctypes.c_size_t.from_address(extra[3] or 0).value) == other


class _Mem:
    va = 0x10_0000_0000

    def __init__(self) -> None:
        self.freed = False
        self.code = bytearray()

    def write(self, at: int, data: bytes) -> None:
        self.code[at : at + len(data)] = data

    def free(self) -> None:
        self.freed = True


class _Gpu:
    def vram(self, what: str, nbytes: int) -> _Mem:
        return _Mem()


def test_the_nv_loader_fills_each_kernels_layout_from_the_cubin() -> None:
    freed: list[Any] = []
    images = _images.Images("NV", owner=7, free=freed.append)
    image = images.load(_Gpu(), CUBIN, post=lambda fn, *a: fn(*a))  # type: ignore[arg-type]
    assert isinstance(image, _launchspec.KernelImage)
    assert image.layouts == {name: k.params for name, k in _cubin.parse(CUBIN).kernels.items()}
    assert image.layouts["axpy"] == ((0, 4), (8, 8), (16, 8), (24, 4))
    fid = image.function("axpy")
    assert arig.nvrm.Launch(fid, 1, 32, GOOD_ARGS).owner == 7
    with pytest.raises(ArigValueError, match="argument buffer of 4 bytes"):
        arig.nvrm.Launch(fid, 1, 32, b"\0" * 4)
    image.unload()
    assert _images.kernel_of(fid) is None and len(freed) == 1


@pytest.mark.parametrize("size", [(4, 2), (4,), (1, 1, 1, 1), 0, (0, 1, 1), (1, 1, 1 << 32), "abc", 1.5, True])
def test_sizes_other_than_an_int_or_three_ints_in_range_are_refused(size: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        _launchspec.dims(size, "grid")


def test_an_int_means_x_1_1_and_numpy_ints_are_ints() -> None:
    assert _launchspec.dims(np.int64(7), "grid") == (7, 1, 1)
    out = _launchspec.dims([2, np.int32(3), 4], "block")
    assert out == (2, 3, 4) and all(type(d) is int for d in out)


def test_a_compiled_fill_is_checked_once_for_both_gpus() -> None:
    assert nv_abi.fill_address is _launchspec.fill_address

    @FILL
    def good(q: Any, a: Any, v: int) -> int:
        return 0

    assert _launchspec.fill_address(good) == ctypes.cast(good, ctypes.c_void_p).value
    bad = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(lambda q: 0)
    with pytest.raises(TypeError, match="prototype"):
        _launchspec.fill_address(bad)
    with pytest.raises(ValueError, match="must not be 0"):
        _launchspec.fill_address(0)
    assert _launchspec.c_arg(None) == 0 and _launchspec.c_arg(0x1000) == 0x1000
    with pytest.raises(ValueError):
        _launchspec.c_arg(-1)


class _Index:
    """Not an int, but an integer by ``__index__`` (as numpy's integers are)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __index__(self) -> int:
        return self.n


def test_anything_with_index_is_an_int_for_func_sizes_and_shared(func: int) -> None:
    for launch in LAUNCHES:
        made = launch(np.uint64(func), _Index(4), (np.int16(32), _Index(1), 1), GOOD_ARGS, shared=_Index(64))
        assert (made.func, made.grid, made.block, made.shared) == (func, (4, 1, 1), (32, 1, 1), 64)
        assert all(type(x) is int for x in (made.func, made.shared, *made.grid, *made.block))
        with pytest.raises(ArigTypeError, match="grid sizes must be ints"):
            launch(func, (np.bool_(True), 1, 1), 32, GOOD_ARGS)


@pytest.mark.parametrize("address", [1, 4096, 0x7FFF_FFFF_0000, (1 << 64) - 1])
def test_an_address_in_no_executable_mapping_is_no_compiled_fill(address: int) -> None:
    with pytest.raises(ArigValueError, match=f"{address:#x} is in no executable mapping"):
        _launchspec.fill_address(address)
    with pytest.raises(ArigValueError, match="no executable mapping"):
        _launchspec.fill_address(ctypes.cast(address, FILL))  # a prototype alone does not make code


def test_an_address_of_compiled_code_is_a_compiled_fill_even_one_mapped_after_the_first_check() -> None:
    libc = ctypes.CDLL(None)
    assert _launchspec.fill_address(ctypes.cast(libc.abs, ctypes.c_void_p).value or 0) > 0
    later = FILL(lambda q, a, v: 0)  # a callback made now: its code page may be new since the maps were read
    address = ctypes.cast(later, ctypes.c_void_p).value or 0
    assert _launchspec.fill_address(later) == address == _launchspec.fill_address(address)
