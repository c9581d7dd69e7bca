"""arig._dlpack on the CPU: DLPack export through numpy's own consumer, and
foreign() over numpy arrays, interface dicts and DLPack producers.

The count of exports still out is ``len(_export._live)``: the deleter is
what empties it, so "the deleter ran" is "the count went back"."""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
import weakref
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arig._dlpack import _abi, _export
from arig._dlpack import Foreign, buffer_dlpack, buffer_dlpack_device, check_request, dlpack_device, export, foreign, kDLCPU, kDLCUDA, kDLCUDAHost
from arig._errors import ArigTypeError, ArigValueError
from arig._memory import Buffer
from arig.cuda._resources import CudaBuffer

NUMPY_2 = int(np.__version__.split(".")[0]) >= 2


class Owner:
    """Stands for an arig Buffer: holds the memory, can be watched with a weakref."""

    def __init__(self, array: np.ndarray[Any, Any]) -> None:
        self.array = array


class Exporter:
    """A producer built on export(): what Buffer.__dlpack__ will look like."""

    def __init__(self, owner: Owner, *, legacy_only: bool = False, device: tuple[int, int] = (kDLCPU, 0), dtype: Any = np.uint8, shape: Any = None) -> None:
        self.owner = owner
        self.legacy_only = legacy_only
        self.device = device
        self.dtype = dtype
        self.shape = shape
        self.calls: list[dict[str, Any]] = []

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None) -> Any:
        self.calls.append({"stream": stream, "max_version": max_version, "dl_device": dl_device, "copy": copy})
        check_request(self.device, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
        a = self.owner.array
        return export(
            a.ctypes.data, a.nbytes, *self.device, self.owner, dtype=self.dtype, shape=self.shape, max_version=None if self.legacy_only else max_version
        )

    def __dlpack_device__(self) -> tuple[int, int]:
        return dlpack_device(*self.device)


class Producer:
    """Only __dlpack__/__dlpack_device__ of a numpy array: foreign() must take the DLPack path."""

    def __init__(self, array: np.ndarray[Any, Any], *, old: bool = False) -> None:
        self.array = array
        self.old = old

    def __dlpack__(self, **kwargs: Any) -> Any:
        if self.old and "max_version" in kwargs:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (kDLCPU, 0)


class CAI:
    """A device array known only by its __cuda_array_interface__."""

    def __init__(self, iface: dict[str, Any], dl: tuple[int, int] | None = None) -> None:
        self.__cuda_array_interface__ = iface
        if dl is not None:
            self.__dlpack_device__ = lambda: dl


def live() -> int:
    gc.collect()
    return len(_export._live)


def name_of(cap: Any) -> bytes:
    get = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
    value: bytes = get(cap)
    return value


def managed_of(cap: Any) -> Any:
    """The struct behind one of our capsules (read only; the capsule stays unconsumed)."""
    name = name_of(cap)
    ptr = _abi._PyCapsule_GetPointer(cap, name)
    kind = _abi.DLManagedTensorVersioned if name == b"dltensor_versioned" else _abi.DLManagedTensor
    return kind.from_address(ptr)


@pytest.fixture(autouse=True)
def _no_export_left() -> Any:
    before = live()
    yield
    assert live() == before, "an export was left without its deleter called"


# -- export, consumed by numpy --------------------------------------------------
def test_numpy_round_trip_versioned_writes_through() -> None:
    src = np.arange(16, dtype=np.uint8)
    exp = Exporter(Owner(src))
    view = np.from_dlpack(exp)
    if NUMPY_2:
        # numpy >= 2 asks for a versioned capsule and gets a writable one (flags 0).
        assert exp.calls[0]["max_version"] is not None and exp.calls[0]["max_version"][0] >= 1
        assert view.flags.writeable
        view[3] = 200
        assert src[3] == 200
    assert view.__array_interface__["data"][0] == src.ctypes.data
    assert view.tolist() == src.tolist()
    del view


def test_numpy_round_trip_legacy() -> None:
    src = np.arange(10, dtype=np.uint8)
    exp = Exporter(Owner(src), legacy_only=True)
    view = np.from_dlpack(exp)
    assert view.__array_interface__["data"][0] == src.ctypes.data
    assert view.tolist() == list(range(10))
    # A legacy capsule cannot say "writable": numpy imports it read-only (numpy >= 2).
    src[0] = 42
    assert view[0] == 42


@pytest.mark.parametrize("legacy_only", [False, True])
def test_owner_lives_until_the_consumer_releases(legacy_only: bool) -> None:
    src = np.arange(8, dtype=np.uint8)
    owner = Owner(src)
    ref = weakref.ref(owner)
    base = live()
    view = np.from_dlpack(Exporter(owner, legacy_only=legacy_only))
    del owner
    gc.collect()
    assert ref() is not None, "the consumer's array must keep the owner alive"
    assert live() == base + 1
    del view
    gc.collect()
    assert ref() is None
    assert live() == base


def test_unconsumed_capsule_calls_the_deleter() -> None:
    src = np.zeros(4, np.uint8)
    owner = Owner(src)
    ref = weakref.ref(owner)
    base = live()
    cap = export(src.ctypes.data, 4, kDLCPU, 0, owner)
    del owner
    assert ref() is not None and live() == base + 1
    del cap
    assert ref() is None and live() == base
    vcap = export(src.ctypes.data, 4, kDLCPU, 0, Owner(src), max_version=(1, 0))
    assert live() == base + 1
    del vcap
    assert live() == base


def test_typed_export() -> None:
    src = np.arange(12, dtype=np.float32)
    view = np.from_dlpack(Exporter(Owner(src), dtype=np.float32, shape=(3, 4)))
    assert view.dtype == np.float32 and view.shape == (3, 4)
    assert view.tolist() == src.reshape(3, 4).tolist()
    assert view.strides == (16, 4)
    del view
    view = np.from_dlpack(Exporter(Owner(src), dtype=np.int16))  # shape from nbytes
    assert view.shape == (24,) and view.dtype == np.int16
    del view
    view = np.from_dlpack(Exporter(Owner(np.array([7.5])), dtype=np.float64, shape=()))
    assert view.shape == () and float(view) == 7.5


def test_zero_bytes_export() -> None:
    empty = np.zeros(0, np.uint8)
    view = np.from_dlpack(Exporter(Owner(empty)))
    assert view.shape == (0,)
    cap = export(0, 0, kDLCPU, 0, None)
    assert managed_of(cap).dl_tensor.data is None
    del cap


@pytest.mark.parametrize(
    ("max_version", "name", "version"),
    [
        (None, b"dltensor", None),
        ((0, 8), b"dltensor", None),
        ((1, 0), b"dltensor_versioned", (1, 0)),
        ((1, 3), b"dltensor_versioned", (1, 1)),
        ((2, 0), b"dltensor_versioned", (1, 1)),
    ],
)
def test_capsule_kind_follows_max_version(max_version: Any, name: bytes, version: Any) -> None:
    src = np.zeros(6, np.uint8)
    cap = export(src.ctypes.data, 6, kDLCPU, 0, src, max_version=max_version)
    assert name_of(cap) == name
    m = managed_of(cap)
    t = m.dl_tensor
    if version is not None:
        assert (m.version.major, m.version.minor) == version and m.flags == 0
    assert t.data == src.ctypes.data and t.ndim == 1 and t.byte_offset == 0
    assert (t.device.device_type, t.device.device_id) == (kDLCPU, 0)
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (1, 8, 1)
    assert (ctypes.c_int64 * 1).from_address(t.shape)[0] == 6
    assert (ctypes.c_int64 * 1).from_address(t.strides)[0] == 1
    assert m.deleter == _export._DELETER_ADDR
    del cap


def test_device_recorded_for_cuda_memory() -> None:
    cap = export(0x7F0000000000, 256, kDLCUDA, 3, None)
    t = managed_of(cap).dl_tensor
    assert (t.device.device_type, t.device.device_id) == (kDLCUDA, 3)
    del cap


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"shape": (5,)}, ArigValueError),
        ({"dtype": np.float32}, ArigValueError),  # 6 bytes are not whole float32s
        ({"dtype": ">f4", "shape": (1,)}, BufferError),
        ({"dtype": object}, BufferError),
        ({"dtype": np.dtype([("a", "u1"), ("b", "u1")]), "shape": (3,)}, BufferError),
        ({"dtype": "not a dtype"}, ArigTypeError),
        ({"shape": (-1, -6)}, ArigValueError),
        ({"max_version": (1,)}, ArigTypeError),
        ({"max_version": ("1", "0")}, ArigTypeError),
    ],
)
def test_export_refuses(kwargs: dict[str, Any], error: type[BaseException]) -> None:
    src = np.zeros(6, np.uint8)
    with pytest.raises(error):
        export(src.ctypes.data, 6, kDLCPU, 0, src, **kwargs)


@pytest.mark.parametrize("args", [(-1, 4, 1, 0), (0, -4, 1, 0), (1.5, 4, 1, 0), (0, True, 1, 0), (0, 4, "cpu", 0)])
def test_export_refuses_bad_numbers(args: tuple[Any, ...]) -> None:
    with pytest.raises((ArigValueError, ArigTypeError)):
        export(*args, None)  # type: ignore[call-arg]


def test_export_of_longdouble_is_refused_where_it_is_not_ieee_double() -> None:
    if np.dtype(np.longdouble).itemsize == 8:
        pytest.skip("longdouble is double here")
    with pytest.raises(BufferError):
        export(0, np.dtype(np.longdouble).itemsize, kDLCPU, 0, None, dtype=np.longdouble)


def test_deleter_and_destructor_from_other_threads() -> None:
    src = np.zeros(32, np.uint8)
    owner = Owner(src)
    ref = weakref.ref(owner)
    base = live()
    f = foreign(Exporter(owner))  # consumes the capsule; the hold calls the deleter
    caps = [export(src.ctypes.data, 32, kDLCPU, 0, owner, max_version=(1, 0)) for _ in range(8)]
    del owner
    assert live() == base + 9
    box: list[Any] = [f, caps]
    del f, caps

    def drop() -> None:
        box.clear()

    t = threading.Thread(target=drop)
    t.start()
    t.join()
    gc.collect()
    assert ref() is None and live() == base


def test_disarm_nulls_the_deleters_it_is_given() -> None:
    src = np.zeros(4, np.uint8)
    cap = export(src.ctypes.data, 4, kDLCPU, 0, src)
    m = managed_of(cap)
    key = ctypes.addressof(m)
    _export._disarm({key: _export._live[key]})
    assert m.deleter is None
    del cap  # the destructor still releases the export: it does not go through the deleter
    assert key not in _export._live


def test_capsule_dying_while_an_exception_is_in_flight_still_releases() -> None:
    """The documented limit: the owner is released, the in-flight exception is reported as unraisable."""
    src = np.zeros(4, np.uint8)
    owner = Owner(src)
    ref = weakref.ref(owner)
    base = live()
    seen: list[Any] = []
    hook = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        with pytest.raises((IndexError, SystemError)):
            [export(src.ctypes.data, 4, kDLCPU, 0, owner)][1]  # the list dies with IndexError set
    finally:
        sys.unraisablehook = hook
    del owner
    gc.collect()
    assert ref() is None and live() == base
    assert all("IndexError" in repr(u.exc_value) or "IndexError" in repr(u.exc_value.__context__) for u in seen)


# -- the __dlpack__ convention ----------------------------------------------------
def test_check_request() -> None:
    cpu, cuda, pinned = (kDLCPU, 0), (kDLCUDA, 1), (kDLCUDAHost, 0)
    for stream in (None, -1, 0, 1, 2, 0x7F00_0000_1234):
        check_request(cuda, stream=stream)
        check_request(cpu, stream=stream)
    for bad in ("0", 1.0, True):
        with pytest.raises(ArigTypeError):
            check_request(cuda, stream=bad)
    check_request(cuda, dl_device=(kDLCUDA, 1), copy=False)
    check_request(cpu, dl_device=(kDLCPU, 0))
    check_request(pinned, dl_device=(kDLCPU, 0))
    with pytest.raises(BufferError):
        check_request(cuda, dl_device=(kDLCPU, 0))
    with pytest.raises(BufferError):
        check_request(cuda, dl_device=(kDLCUDA, 0))
    with pytest.raises(BufferError):
        check_request(cpu, dl_device=(kDLCUDA, 0))
    with pytest.raises(BufferError):
        check_request(cpu, copy=True)
    with pytest.raises(ArigTypeError):
        check_request(cpu, dl_device="cpu")
    with pytest.raises(ArigTypeError):
        check_request(cpu, max_version=1)
    assert dlpack_device(np.int32(2), 1) == (2, 1) and type(dlpack_device(np.int32(2), 1)[0]) is int


def test_numpy_device_request_and_copy_refusal() -> None:
    src = np.arange(4, dtype=np.uint8)
    view = np.from_dlpack(Exporter(Owner(src)), device="cpu")
    assert view.tolist() == [0, 1, 2, 3]
    del view
    with pytest.raises(BufferError):
        np.from_dlpack(Exporter(Owner(src)), copy=True)


def host_buffer(n: int) -> tuple[Buffer, list[int]]:
    mem = np.arange(n, dtype=np.uint8)
    released: list[int] = []
    return Buffer("host", "host", mem.ctypes.data, n, lambda: released.append(1), host=mem), released


class Wrapped:
    """What Buffer will do: __dlpack__/__dlpack_device__ forwarding to the module's functions."""

    def __init__(self, buf: Buffer) -> None:
        self.buf = buf

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None) -> Any:
        return buffer_dlpack(self.buf, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return buffer_dlpack_device(self.buf)


def test_buffer_functions_on_a_host_buffer() -> None:
    buf, released = host_buffer(8)
    assert buffer_dlpack_device(buf) == (kDLCPU, 0)
    view = np.from_dlpack(Wrapped(buf))
    assert view.tolist() == list(range(8))
    ref = weakref.ref(buf)
    del buf
    gc.collect()
    assert ref() is not None and released == [], "the capsule's consumer keeps the buffer, so its memory"
    if view.flags.writeable:
        view[0] = 9
    del view
    gc.collect()
    assert ref() is None and released == [1]


def test_buffer_functions_typed_view() -> None:
    buf, _ = host_buffer(16)
    cap = buffer_dlpack(buf, dtype=np.uint32, shape=(2, 2), max_version=(1, 0))
    t = managed_of(cap).dl_tensor
    assert (t.ndim, t.dtype.bits) == (2, 32)
    del cap


def test_memory_the_host_cannot_see_needs_its_drivers_dlpack_device() -> None:
    unknown = Buffer("NV", "device", 0x7F00_0000_0000, 64, lambda: None)  # the core knows no GPU's ordinal
    with pytest.raises(ArigTypeError, match="ordinal"):
        buffer_dlpack_device(unknown)
    with pytest.raises(ArigTypeError, match="ordinal"):
        unknown.__dlpack__()
    assert not hasattr(unknown, "__cuda_array_interface__")


def test_buffer_functions_on_cuda_memory() -> None:
    buf = CudaBuffer("CUDA:1", "device", 0x7F00_0000_0000, 64, lambda: None, 1)
    assert buffer_dlpack_device(buf) == (kDLCUDA, 1) and buf.__dlpack_device__() == (kDLCUDA, 1)
    with pytest.raises(BufferError):
        buffer_dlpack(buf, dl_device=(kDLCPU, 0))
    with pytest.raises(BufferError):
        buffer_dlpack(buf, copy=True)
    cap = buffer_dlpack(buf, stream=-1, max_version=(1, 1))
    t = managed_of(cap).dl_tensor
    assert (t.device.device_type, t.device.device_id, t.data) == (kDLCUDA, 1, 0x7F00_0000_0000)
    del cap
    buf.close()
    with pytest.raises(ArigValueError, match="closed"):
        buffer_dlpack(buf)


def test_buffer_pinned_memory_exports_as_cpu() -> None:
    mem = np.zeros(8, np.uint8)
    buf = Buffer("CUDA", "pinned", mem.ctypes.data, 8, lambda: None, host=mem)
    assert buffer_dlpack_device(buf) == (kDLCPU, 0)
    view = np.from_dlpack(Wrapped(buf))
    assert view.__array_interface__["data"][0] == mem.ctypes.data
    del view


# -- foreign() ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.float64, np.complex128, np.bool_])
def test_foreign_numpy(dtype: Any) -> None:
    a = np.ones((3, 5), dtype=dtype)
    f = foreign(a)
    assert f == Foreign(a.ctypes.data, a.nbytes, kDLCPU, 0, False, a)
    a.flags.writeable = False
    assert foreign(a).readonly


def test_foreign_refuses_non_contiguous_numpy() -> None:
    a = np.zeros((4, 4), np.float32)
    with pytest.raises(ArigValueError, match="strides"):
        foreign(a[:, ::2])
    with pytest.raises(ArigValueError, match="contiguous"):
        foreign(a.T)
    assert foreign(a[1:3]).address == a.ctypes.data + 16  # a contiguous slice is fine


def test_foreign_zero_size() -> None:
    for a in (np.zeros(0, np.uint8), np.zeros((3, 0), np.float64), np.zeros((0, 4), np.int32)[:, ::2]):
        assert foreign(a).nbytes == 0
        assert foreign(Producer(a)).nbytes == 0
    assert foreign(CAI({"data": (0, False), "shape": (0, 7), "typestr": "<f4", "version": 3})).nbytes == 0


def test_foreign_cuda_array_interface() -> None:
    iface = {"data": (0x7F00_0000_1000, False), "shape": (4, 8), "typestr": "<f4", "strides": None, "version": 2}
    f = foreign(CAI(iface))
    assert (f.address, f.nbytes, f.device_type, f.device_id, f.readonly, f.stream) == (0x7F00_0000_1000, 128, kDLCUDA, -1, False, None)
    f = foreign(CAI({**iface, "data": (0x1000, True), "strides": (32, 4), "version": 3, "stream": 1}, dl=(kDLCUDA, 2)))
    assert (f.readonly, f.stream, f.device_id) == (True, 1, 2)
    assert foreign(CAI({**iface, "shape": (4, 1), "strides": (4, 999)})).nbytes == 16  # a length-1 axis's stride does not matter
    with pytest.raises(ArigValueError, match="strides"):
        foreign(CAI({**iface, "strides": (64, 4)}))
    with pytest.raises(ArigValueError, match="strides"):
        foreign(CAI({**iface, "strides": (4, 16)}))
    with pytest.raises(ArigValueError, match="mask"):
        foreign(CAI({**iface, "mask": object()}))
    with pytest.raises(ArigValueError, match="typestr"):
        foreign(CAI({k: v for k, v in iface.items() if k != "typestr"}))
    with pytest.raises(ArigTypeError):
        foreign(CAI({**iface, "data": 0x1000}))
    with pytest.raises(ArigValueError):
        foreign(CAI({**iface, "typestr": "nonsense"}))


def test_foreign_prefers_cuda_array_interface_over_dlpack() -> None:
    class Both(CAI):
        def __dlpack__(self, **kwargs: Any) -> Any:
            raise AssertionError("a capsule was made although __cuda_array_interface__ is there")

    f = foreign(Both({"data": (0x2000, False), "shape": (3,), "typestr": "|u1"}, dl=(kDLCUDA, 0)))
    assert (f.address, f.nbytes, f.device_id) == (0x2000, 3, 0)


def test_foreign_dlpack_producer() -> None:
    a = np.arange(20, dtype=np.int32).reshape(4, 5)
    ref = weakref.ref(a)
    f = foreign(Producer(a))
    assert (f.address, f.nbytes, f.device_type, f.device_id, f.readonly) == (a.ctypes.data, 80, kDLCPU, 0, False)
    del a
    gc.collect()
    assert ref() is not None, "the consumed tensor keeps the producer's array until the hold is dropped"
    del f
    gc.collect()
    assert ref() is None


def test_foreign_dlpack_hold_release_is_idempotent() -> None:
    a = np.arange(4, dtype=np.uint8)
    ref = weakref.ref(a)
    f = foreign(Producer(a))
    del a
    hold: Any = f.keep
    hold.release()
    gc.collect()
    assert ref() is None and not hold.alive
    hold.release()


def test_foreign_dlpack_readonly_and_old_producer() -> None:
    a = np.arange(6, dtype=np.uint16)
    a.flags.writeable = False
    if NUMPY_2:
        assert foreign(Producer(a)).readonly  # the versioned capsule's READ_ONLY flag
    b = np.arange(6, dtype=np.uint16)
    f = foreign(Producer(b, old=True))  # no max_version: a legacy capsule
    assert (f.address, f.nbytes, f.readonly) == (b.ctypes.data, 12, False)


def test_foreign_dlpack_of_our_own_export() -> None:
    src = np.arange(8, dtype=np.uint8)
    owner = Owner(src)
    ref = weakref.ref(owner)
    base = live()
    f = foreign(Exporter(owner, dtype=np.float64, shape=(1,)))
    del owner
    assert (f.address, f.nbytes) == (src.ctypes.data, 8)
    assert live() == base + 1 and ref() is not None
    del f
    gc.collect()
    assert live() == base and ref() is None


def test_foreign_dlpack_refuses_non_contiguous_and_gives_the_capsule_back() -> None:
    a = np.zeros((6, 6), np.float32)
    view = a[::2, ::3]
    ref = weakref.ref(a)
    with pytest.raises(ArigValueError, match="strides"):
        foreign(Producer(view))
    del a, view
    gc.collect()
    assert ref() is None, "a refused capsule is left unconsumed, and its producer frees it"


def test_foreign_array_interface() -> None:
    a = np.arange(10, dtype=np.float32)

    class Host:
        __array_interface__ = a.__array_interface__

    f = foreign(Host())
    assert (f.address, f.nbytes, f.device_type, f.readonly) == (a.ctypes.data, 40, kDLCPU, False)

    class NoPointer(bytearray):
        @property
        def __array_interface__(self) -> dict[str, Any]:
            return {"data": None, "shape": (len(self),), "typestr": "|u1", "version": 3}

    buf = NoPointer(b"abcd")
    f = foreign(buf)
    assert f.nbytes == 4 and ctypes.string_at(f.address, 4) == b"abcd"

    class Strided:
        __array_interface__ = a[::2].__array_interface__

    with pytest.raises(ArigValueError, match="strides"):
        foreign(Strided())


def test_foreign_falls_back_to_array_interface_when_dlpack_refuses() -> None:
    a = np.arange(3, dtype=np.uint8)

    class Refuses:
        __array_interface__ = a.__array_interface__

        def __dlpack__(self, **kwargs: Any) -> Any:
            raise BufferError("read-only arrays cannot be exported")

    assert foreign(Refuses()).address == a.ctypes.data


def test_foreign_refuses_other_objects() -> None:
    for obj in (object(), b"bytes", 3, [1, 2]):
        with pytest.raises(ArigTypeError, match="__dlpack__"):
            foreign(obj)

    class Liar:
        def __dlpack__(self, **kwargs: Any) -> Any:
            return "not a capsule"

    with pytest.raises(ArigTypeError, match="capsule"):
        foreign(Liar())


def test_foreign_of_an_arig_cuda_buffer_reads_its_interface() -> None:
    buf = CudaBuffer("CUDA", "device", 0x7F00_0000_2000, 96, lambda: None, 0)
    f = foreign(buf)
    assert (f.address, f.nbytes, f.device_type, f.keep) == (0x7F00_0000_2000, 96, kDLCUDA, buf)


# -- properties -------------------------------------------------------------------
DTYPES = [
    np.bool_,
    np.int8,
    np.uint8,
    np.int16,
    np.uint16,
    np.int32,
    np.uint32,
    np.int64,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
]
shapes = st.lists(st.integers(0, 5), min_size=0, max_size=4).map(tuple)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=shapes, dtype=st.sampled_from(DTYPES), versioned=st.booleans())
def test_export_round_trips_any_shape_and_dtype(shape: tuple[int, ...], dtype: Any, versioned: bool) -> None:
    src = np.zeros(shape, dtype=dtype)
    if src.size:
        src.reshape(-1).view(np.uint8)[:] = np.arange(src.nbytes, dtype=np.uint64) % 251
    view = np.from_dlpack(Exporter(Owner(src), legacy_only=not versioned, dtype=dtype, shape=shape))
    assert view.shape == shape and view.dtype == np.dtype(dtype)
    assert view.tobytes() == src.tobytes()
    if src.size:
        assert view.__array_interface__["data"][0] == src.ctypes.data
    f = foreign(Exporter(Owner(src), dtype=dtype, shape=shape))
    assert f.nbytes == src.nbytes and (f.address == src.ctypes.data or not src.size)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=shapes, dtype=st.sampled_from(DTYPES))
def test_foreign_nbytes_is_the_arrays(shape: tuple[int, ...], dtype: Any) -> None:
    a = np.zeros(shape, dtype=dtype)
    for f in (foreign(a), foreign(Producer(a))):
        assert f.nbytes == a.nbytes and f.readonly is False
    iface = {"data": (0x10000, False), "shape": shape, "typestr": np.dtype(dtype).str, "version": 3}
    assert foreign(CAI(iface)).nbytes == a.nbytes
    assert foreign(CAI({**iface, "strides": a.strides})).nbytes == a.nbytes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.integers(2, 5), min_size=1, max_size=3).map(tuple), axis=st.integers(0, 2), step=st.integers(2, 3))
def test_foreign_refuses_every_strided_view(shape: tuple[int, ...], axis: int, step: int) -> None:
    a = np.zeros(shape, np.int16)
    index = [slice(None)] * len(shape)
    index[axis % len(shape)] = slice(None, None, step)
    view = a[tuple(index)]
    if view.flags.c_contiguous:
        assert foreign(view).nbytes == view.nbytes
        return
    for obj in (view, Producer(view), CAI({"data": (0x10000, False), "shape": view.shape, "typestr": "<i2", "strides": view.strides})):
        with pytest.raises(ArigValueError, match="strides"):
            foreign(obj)


def test_interpreter_exit_with_exports_and_holds_outstanding(tmp_path: Any) -> None:
    """Consumers, unconsumed capsules and holds still alive at exit: a clean exit, nothing reported."""
    import subprocess

    script = tmp_path / "exit.py"
    script.write_text(
        "import numpy as np, threading\n"
        "from arig._dlpack import export, foreign, kDLCPU\n"
        "src = np.arange(64, dtype=np.uint8)\n"
        "class E:\n"
        "    def __dlpack__(self, **k): return export(src.ctypes.data, 64, kDLCPU, 0, self, max_version=k.get('max_version'))\n"
        "    def __dlpack_device__(self): return (kDLCPU, 0)\n"
        "view = np.from_dlpack(E())\n"
        "cap = export(src.ctypes.data, 64, kDLCPU, 0, src)\n"
        "hold = foreign(E())\n"
        "cycle = [np.from_dlpack(E())]; cycle.append(cycle)\n"
        "t = threading.Thread(target=lambda: [np.from_dlpack(E()) for _ in range(100)], daemon=True); t.start()\n"
        "print('ok')\n"
    )
    for _ in range(3):
        run = subprocess.run([sys.executable, "-X", "dev", str(script)], capture_output=True, text=True, timeout=60)
        assert (run.returncode, run.stdout.strip(), run.stderr) == (0, "ok", "")


# -- torch, where it is installed ----------------------------------------------------
def test_torch_cpu_both_ways() -> None:
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    f = foreign(t)
    assert (f.address, f.nbytes, f.device_type, f.readonly) == (t.data_ptr(), 48, kDLCPU, False)
    with pytest.raises(ArigValueError, match="strides"):
        foreign(t.t())
    src = np.arange(8, dtype=np.float32)
    owner = Owner(src)
    ref = weakref.ref(owner)
    back = torch.from_dlpack(Exporter(owner, dtype=np.float32))
    del owner
    assert back.data_ptr() == src.ctypes.data and back.tolist() == src.tolist()
    back[0] = 5.0
    assert src[0] == 5.0
    gc.collect()
    assert ref() is not None
    del back, f
    gc.collect()
    assert ref() is None
