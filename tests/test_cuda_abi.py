"""The CUDA ABI record (``arig.cuda_abi``) and stream capture (``arig.cuda.capture``)
without a GPU: validation, the record's graph bookkeeping,
the GPU state's destruction order, and the capture module's lifetimes, with
libcuda replaced by a fake that records every call."""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import gc
import inspect
import itertools
import json
import os
import threading
import time
import types
import warnings
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import arig
import arig._env
import arig.cuda._abi
import arig.cuda
import arig.cuda._device
import arig.cuda._gpu
import arig.cuda._lib
import arig.cuda_abi as abi
import arig.host
from arig._stall import StallMeter
from arig.cuda import _capture_ctx, _graph_handles, _graph_launches, capture

U32 = (1 << 32) - 1
CTX = 0xC0
_libc = ctypes.CDLL(None)
_libc.sem_post.argtypes = (ctypes.c_void_p,)


# -- a fake libcuda ------------------------------------------------------------------------


def _plain(a: Any) -> Any:
    if isinstance(a, ctypes._SimpleCData):
        return a.value
    if type(a).__name__ == "CArgObject":
        return "&"
    return a


class FakeLib:
    """Records ``(name, args)`` of every libcuda call and answers like libcuda would.

    ``fail[name] = rc`` makes ``name`` return ``rc``; ``block[name]`` (an
    Event) makes it wait first; host functions are kept in ``host_funcs`` until
    ``run_host_funcs()`` plays CUDA's host thread.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.current = 0
        self.fail: dict[str, int] = {}
        self.block: dict[str, threading.Event] = {}
        self.entered: dict[str, threading.Event] = {}
        self.capturing: dict[int, int] = {}
        self.host_funcs: list[tuple[int, int]] = []
        self.mode = 0
        self.node_params: list[tuple[Any, ...]] = []
        self._ids = itertools.count(0x1000, 0x10)

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("cu"):
            raise AttributeError(name)

        def call(*args: Any) -> int:
            self.calls.append((name, tuple(_plain(a) for a in args)))
            if name in self.entered:
                self.entered[name].set()
            if name in self.block:
                assert self.block[name].wait(10)
            rc = self.fail.get(name, 0)
            if rc:
                return rc
            impl = getattr(self, "_" + name, None)
            return (impl(*args) or 0) if impl is not None else 0

        return call

    def names(self) -> list[str]:
        return [n for n, _ in self.calls]

    def called(self, name: str) -> list[tuple[Any, ...]]:
        return [a for n, a in self.calls if n == name]

    def new(self) -> int:
        return next(self._ids)

    def run_host_funcs(self) -> None:
        for fn, arg in self.host_funcs:
            assert fn == capture.SEM_POST
            _libc.sem_post(arg)
        self.host_funcs.clear()

    # answers
    def _cuCtxGetCurrent(self, ref: Any) -> None:
        ref._obj.value = self.current or None

    def _cuCtxSetCurrent(self, ctx: Any) -> None:
        self.current = _plain(ctx) or 0

    def _cuStreamGetCtx(self, s: Any, ref: Any) -> None:
        ref._obj.value = CTX

    def _cuCtxGetDevice(self, ref: Any) -> None:
        ref._obj.value = 0

    def _cuDevicePrimaryCtxRetain(self, ref: Any, dev: Any) -> None:
        ref._obj.value = CTX

    def _cuThreadExchangeStreamCaptureMode(self, ref: Any) -> None:
        ref._obj.value, self.mode = self.mode, ref._obj.value

    def _cuStreamBeginCapture_v2(self, s: Any, mode: Any) -> None:
        self.capturing[_plain(s)] = _plain(mode)

    def _cuStreamEndCapture(self, s: Any, ref: Any) -> int:
        if self.capturing.pop(_plain(s), None) is None:
            return 401  # CUDA_ERROR_ILLEGAL_STATE
        ref._obj.value = self.new()
        return 0

    def _cuGraphCreate(self, ref: Any, flags: Any) -> None:
        ref._obj.value = self.new()

    def _cuGraphAddKernelNode_v2(self, ref: Any, g: Any, deps: Any, n: Any, params: Any) -> None:
        p = params._obj
        extra = ctypes.cast(p.extra, ctypes.POINTER(ctypes.c_void_p)) if p.extra else None
        args = b""
        if extra is not None:
            assert extra[0] == 1 and extra[2] == 2 and extra[4] is None  # BUFFER_POINTER, BUFFER_SIZE, END
            size = ctypes.c_size_t.from_address(extra[3]).value
            args = ctypes.string_at(extra[1], size)
        self.node_params.append((p.func, (p.gridDimX, p.gridDimY, p.gridDimZ), (p.blockDimX, p.blockDimY, p.blockDimZ), p.sharedMemBytes, args, _plain(n)))
        ref._obj.value = self.new()

    def _cuGraphExecKernelNodeSetParams_v2(self, exec_: Any, node: Any, params: Any) -> None:
        p = params._obj
        extra = ctypes.cast(p.extra, ctypes.POINTER(ctypes.c_void_p))
        size = ctypes.c_size_t.from_address(extra[3]).value
        self.node_params.append((p.func, (p.gridDimX, p.gridDimY, p.gridDimZ), (p.blockDimX, p.blockDimY, p.blockDimZ), p.sharedMemBytes, ctypes.string_at(extra[1], size), "update"))

    def _cuGraphInstantiateWithFlags(self, ref: Any, g: Any, flags: Any) -> None:
        ref._obj.value = self.new()

    def _cuLaunchHostFunc(self, s: Any, fn: Any, arg: Any) -> None:
        self.host_funcs.append((_plain(fn), _plain(arg)))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLib]:
    """libcuda replaced, for the record, the GPU state and the capture module."""
    _forget_fake_captures()
    f = FakeLib()
    monkeypatch.setattr(arig.cuda._abi, "lib", f)
    monkeypatch.setattr(arig.cuda._gpu, "lib", f)
    for module in (capture, _capture_ctx, _graph_handles):  # the capture functions, their contexts, their handles' destruction
        monkeypatch.setattr(module, "lib", f)
    yield f
    _forget_fake_captures()


def _forget_fake_captures() -> None:
    """Fake handles must never reach the real libcuda (nor another test's fake)."""
    gc.collect()
    for state in arig.cuda._gpu.states():
        state._doomed.clear()
    _graph_launches._pending.clear()
    _graph_launches._captures.clear()


@pytest.fixture
def state() -> Iterator[arig.cuda._gpu.GpuState]:
    """A registered GPU state of an ordinal no machine has (so fork handling applies)."""
    s = arig.cuda._gpu.gpu_state(97)
    yield s
    with arig.cuda._gpu._states_lock:
        arig.cuda._gpu._states.pop(97, None)


def _fork_and_report(child: Any) -> Any:
    """Run ``child()`` in a forked child; return what it returns (JSON)."""
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork of a multi-threaded process
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.write(w, json.dumps(child()).encode())
        except BaseException as exc:  # noqa: BLE001
            os.write(w, json.dumps({"error": repr(exc)}).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


# == type kernel ================================================================================


@pytest.mark.parametrize("func", [0, -1, True, "1", 1.5, None])
def test_kernel_func_must_be_a_cufunction_positive_int(func: Any) -> None:
    with pytest.raises(ValueError, match="func"):
        abi.Kernel(func, 1, 1)


def test_kernel_int_shorthand_means_x_1_1() -> None:
    k = abi.Kernel(0x10, 7, 32)
    assert k.grid == (7, 1, 1) and k.block == (32, 1, 1)
    k = abi.Kernel(0x10, (2, 3, 4), [5, 6, np.int64(7)])
    assert k.grid == (2, 3, 4) and k.block == (5, 6, 7)
    assert all(type(d) is int for d in k.grid + k.block)


@pytest.mark.parametrize("size", [0, 1 << 32, -1, (0, 1, 1), (1, 0, 1), (1, 1, 0), (1, 1, 1 << 32), (1, 1), (1, 1, 1, 1), 1.5])
def test_kernel_sizes_each_at_least_1_and_at_most_2_32_minus_1(size: Any) -> None:
    with pytest.raises(ValueError):
        abi.Kernel(0x10, size, 1)
    with pytest.raises(ValueError):
        abi.Kernel(0x10, 1, size)


def test_kernel_largest_sizes_are_accepted() -> None:
    k = abi.Kernel(0x10, (U32, U32, U32), U32, shared=U32)
    assert k.grid == (U32, U32, U32) and k.block == (U32, 1, 1) and k.shared == U32


def test_kernel_sizes_must_be_ints() -> None:
    with pytest.raises(TypeError):
        abi.Kernel(0x10, ("1", 1, 1), 1)
    with pytest.raises(TypeError):
        abi.Kernel(0x10, 1, (True, 1, 1))


@pytest.mark.parametrize("args", ["abc", [1, 2], 5, np.zeros(4, np.uint8)])
def test_kernel_args_must_be_bytes(args: Any) -> None:
    with pytest.raises(TypeError, match="args must be bytes"):
        abi.Kernel(0x10, 1, 1, args)


def test_kernel_args_bytes_like_are_kept_as_bytes() -> None:
    for args in (b"\x01\x02", bytearray(b"\x01\x02"), memoryview(b"\x01\x02")):
        k = abi.Kernel(0x10, 1, 1, args)
        assert type(k.args) is bytes and k.args == b"\x01\x02"
    assert abi.Kernel(0x10, 1, 1).args == b""


@pytest.mark.parametrize("shared", [-1, 1 << 32, True, 1.0, "0"])
def test_kernel_shared_memory_range(shared: Any) -> None:
    with pytest.raises(ValueError, match="shared"):
        abi.Kernel(0x10, 1, 1, b"", shared)


def test_kernel_is_immutable() -> None:
    k = abi.Kernel(0x10, 1, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        k.func = 0x20  # type: ignore[misc]


# == key and declare =============================================================================


def test_key_repr_and_identity() -> None:
    assert repr(abi.KEY) == "arig.cuda_abi.KEY"
    assert abi.KEY is arig.cuda_abi.KEY
    assert abi.KEY == abi.KEY and hash(abi.KEY) == hash(abi.KEY)
    assert abi._Key() != abi.KEY, "a key is equal only to itself"
    assert {abi.KEY: 1}.get(abi._Key()) is None


def _record(backend: Any = None) -> abi.CudaAbi:
    return abi.CudaAbi._for_backend(backend or types.SimpleNamespace(name="FAKE"))


def test_declare_is_the_record_under_key() -> None:
    rec = _record()
    assert abi.declare(rec) == (abi.KEY, rec)
    key, value = abi.declare(rec)
    assert key is abi.KEY and value is rec
    assert dict([abi.declare(rec)])[abi.KEY] is rec


@pytest.mark.parametrize("thing", [None, object(), "record", abi.KEY])
def test_declare_rejects_anything_but_a_record(thing: Any) -> None:
    with pytest.raises(TypeError):
        abi.declare(thing)


def test_cudaabi_is_made_by_the_driver_not_by_callers() -> None:
    with pytest.raises(TypeError, match="capability"):
        abi.CudaAbi()
    with pytest.raises(TypeError):
        abi.CudaAbi(object())


@pytest.mark.asyncio
async def test_key_is_none_on_a_device_that_is_not_cuda() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        assert dev.capability(abi.KEY) is None
        assert dev.capability(abi._Key()) is None


def test_fill_prototype() -> None:
    assert abi.FILL is arig.cuda.FILL is arig.cuda._device.FILL
    assert abi.FILL._restype_ is ctypes.c_int
    assert abi.FILL._argtypes_ == (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64)
    calls = []

    @abi.FILL
    def fill(queue: int, arg: int, v: int) -> int:
        calls.append((queue, arg, v))
        return 0

    assert fill(1, 2, (1 << 64) - 1) == 0 and calls == [(1, 2, (1 << 64) - 1)]


# == graph ~handle ~nodes ~collect ===============================================================


def test_graph_value_collect_runs_once_after_the_value_is_collected() -> None:
    runs: list[int] = []
    g = abi.Graph(0x1234, [0x1, 0x2], lambda: runs.append(1))
    gc.collect()
    assert runs == [], "collect must not run while the value is reachable"
    ref = weakref.ref(g)
    del g
    gc.collect()
    assert ref() is None
    assert runs == [1]
    gc.collect()
    assert runs == [1], "collect runs exactly once"


def test_graph_value_collected_in_a_cycle_runs_collect_once() -> None:
    runs: list[int] = []
    holder: list[Any] = []
    g = abi.Graph(1, [], lambda: runs.append(1))
    holder.append(holder)
    holder.append(g)
    del g, holder
    assert runs == []
    gc.collect()
    assert runs == [1]


def test_graph_collect_keeps_no_reference_to_the_value() -> None:
    g = abi.Graph(0x1234, [], lambda: None)
    ref = weakref.ref(g)
    assert g._finalizer.alive
    assert g not in gc.get_referents(g._finalizer)
    del g
    assert ref() is None, "refcounting alone frees it: nothing holds the value"


def test_graph_handle_and_nodes() -> None:
    g = abi.Graph(np.uint64(0x1234), (np.int64(5), 6, 7), lambda: None)
    assert g.handle == 0x1234 and type(g.handle) is int
    assert g.nodes == (5, 6, 7) and all(type(n) is int for n in g.nodes)
    assert "3 kernels" in repr(g)


def test_graph_collect_must_be_callable() -> None:
    with pytest.raises(TypeError, match="collect"):
        abi.Graph(1, [], None)  # type: ignore[arg-type]


def test_graph_of_another_driver_cannot_be_updated(fake: FakeLib) -> None:
    g = abi.Graph(1, [2], lambda: None)
    with pytest.raises(arig.ArigError, match="not made by arig"):
        g.update(0, args=b"\0" * 8)
    assert g.launch(9) == 0 and fake.called("cuGraphLaunch") == [(1, 9)]


def test_graph_node_function_is_fixed_update_takes_no_func() -> None:
    g = abi.Graph(1, [2], lambda: None)
    g._kernels = [abi.Kernel(0x10, 1, 1)]
    with pytest.raises(TypeError):
        g.update(0, func=0x20)  # type: ignore[call-arg]
    assert "func" not in inspect.signature(abi.Graph.update).parameters


def test_graph_update_sets_node_params_v2_and_returns_the_curesult(fake: FakeLib, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(arig.cuda._launch._LAYOUTS, 0x10, ((0, 8), (8, 4), (16, 8)))
    args0 = arig.cuda.pack(np.uint64(0xAB), np.uint32(0), np.uint64(1))
    g = abi.Graph(0x77, [0x88], lambda: None)
    g._kernels = [abi.Kernel(0x10, 1, 1, args0)]
    args1 = arig.cuda.pack(np.uint64(0xAB), np.uint32(0), np.uint64(2))
    assert g.update(0, args=args1, grid=(3, 2, 1), block=64, shared=256) == 0
    (exec_, node, _), = fake.called("cuGraphExecKernelNodeSetParams_v2")
    assert (exec_, node) == (0x77, 0x88)
    assert fake.node_params[-1] == (0x10, (3, 2, 1), (64, 1, 1), 256, args1, "update")
    assert g._kernels[0].args == args1
    # A refused update returns CUDA's code and leaves the known parameters as they were.
    fake.fail["cuGraphExecKernelNodeSetParams_v2"] = 1
    assert g.update(0, args=args0) == 1
    assert g._kernels[0].args == args1
    # Argument buffers are checked against the kernel's layout, and sizes against their range.
    with pytest.raises(ValueError, match="argument buffer"):
        g.update(0, args=b"\0" * 8)
    with pytest.raises(ValueError):
        g.update(0, grid=0)


# == the record's graph, with a fake backend ===================================================


class FakeBackend:
    def __init__(self, state: arig.cuda._gpu.GpuState, modules: dict[int, int]) -> None:
        self.name = "FAKE"
        self.ctx = CTX
        self.gpu = state
        self._modules = modules
        self.images_loaded = set(modules.values())  # modules of images loaded and not unloaded
        self.cause: BaseException | None = None

    def module_of(self, func: int) -> int | None:
        return self._modules.get(func)

    def lost_cause(self) -> BaseException | None:
        return self.cause


@pytest.fixture
def record(fake: FakeLib, state: arig.cuda._gpu.GpuState, monkeypatch: pytest.MonkeyPatch) -> abi.CudaAbi:
    """A record over a fake backend: functions 0x10, 0x11 in module 0xA00, 0x20 in 0xB00 (both loaded)."""
    state.add_module(0xA00)
    state.add_module(0xB00)
    monkeypatch.setitem(arig.cuda._launch._LAYOUTS, 0x10, ((0, 8), (8, 4), (16, 8)))
    fake.calls.clear()
    return abi.CudaAbi._for_backend(FakeBackend(state, {0x10: 0xA00, 0x11: 0xA00, 0x20: 0xB00}))


def _args(v: int) -> bytes:
    return arig.cuda.pack(np.uint64(0xAB), np.uint32(0), np.uint64(v))


def test_graph_records_one_launch_per_kernel_in_order(record: abi.CudaAbi, fake: FakeLib, state: arig.cuda._gpu.GpuState) -> None:
    ks = [abi.Kernel(0x10, 1, 1, _args(1)), abi.Kernel(0x20, (2, 1, 1), 32, b"", 64), abi.Kernel(0x11, 1, 1)]
    g = record.graph(ks)
    assert fake.names()[:3] == ["cuCtxGetCurrent", "cuCtxSetCurrent", "cuGraphCreate"]
    assert fake.called("cuCtxSetCurrent")[0] == (CTX,), "made in the device's context"
    adds = fake.node_params
    assert [(p[0], p[1], p[2], p[3], p[4]) for p in adds] == [
        (0x10, (1, 1, 1), (1, 1, 1), 0, _args(1)),
        (0x20, (2, 1, 1), (32, 1, 1), 64, b""),
        (0x11, (1, 1, 1), (1, 1, 1), 0, b""),
    ]
    assert [p[5] for p in adds] == [0, 1, 1], "each node depends on the one before it"
    assert len(fake.called("cuGraphInstantiateWithFlags")) == 1
    assert fake.names()[-1] == "cuCtxSetCurrent" and fake.called("cuCtxSetCurrent")[-1] == (None,), "the previous context is restored"
    assert len(g.nodes) == 3 and len(set(g.nodes)) == 3
    assert g.handle not in g.nodes
    assert not fake.called("cuGraphDestroy") and not fake.called("cuGraphExecDestroy")
    assert state.loaded(0xA00) and state.loaded(0xB00)


def test_graph_of_no_kernels(record: abi.CudaAbi, fake: FakeLib) -> None:
    g = record.graph([])
    assert g.nodes == () and g.handle
    assert fake.called("cuGraphAddKernelNode_v2") == []
    assert len(fake.called("cuGraphInstantiateWithFlags")) == 1


def test_graph_refuses_a_function_of_no_loaded_image_having_changed_nothing(record: abi.CudaAbi, fake: FakeLib, state: arig.cuda._gpu.GpuState) -> None:
    with pytest.raises(ValueError, match="no image loaded"):
        record.graph([abi.Kernel(0x10, 1, 1, _args(1)), abi.Kernel(12345, 1, 1)])
    record._backend.images_loaded.discard(0xB00)  # the image's unload
    state.release_module(0xB00)
    state.reclaim()
    fake.calls.clear()
    with pytest.raises(ValueError, match="no image loaded"):
        record.graph([abi.Kernel(0x20, 1, 1)])
    assert fake.calls == [], "refused before any CUDA call"


def test_graph_refuses_a_function_of_an_unloaded_image_whose_module_a_graph_keeps(record: abi.CudaAbi, state: arig.cuda._gpu.GpuState) -> None:
    g = record.graph([abi.Kernel(0x20, 1, 1)])
    record._backend.images_loaded.discard(0xB00)  # the image's unload
    state.release_module(0xB00)
    state.reclaim()
    assert state.loaded(0xB00), "the graph keeps the module"
    with pytest.raises(ValueError, match="no image loaded"):
        record.graph([abi.Kernel(0x20, 1, 1)])
    del g


def test_graph_refuses_an_argument_buffer_of_the_wrong_size(record: abi.CudaAbi, fake: FakeLib) -> None:
    with pytest.raises(ValueError, match=r"\[\(0, 8\), \(8, 4\), \(16, 8\)\]"):
        record.graph([abi.Kernel(0x10, 1, 1, b"\0" * 8)])
    assert fake.calls == []


def test_graph_takes_kernels_only(record: abi.CudaAbi) -> None:
    with pytest.raises(TypeError, match="Kernel"):
        record.graph([(0x10, 1, 1)])  # type: ignore[list-item]


def test_graph_error_with_cudas_reason_if_it_cannot_instantiate(record: abi.CudaAbi, fake: FakeLib, state: arig.cuda._gpu.GpuState) -> None:
    fake.fail["cuGraphInstantiateWithFlags"] = 1
    graphs = state._graphs
    with pytest.raises(arig.cuda.CudaError) as info:
        record.graph([abi.Kernel(0x11, 1, 1, b"", 1 << 30)])
    assert info.value.code == 1
    assert len(fake.called("cuGraphDestroy")) == 1, "the half-made graph is destroyed"
    assert state._graphs == graphs, "nothing counted"
    assert fake.called("cuCtxSetCurrent")[-1] == (None,)


def test_graph_error_once_the_context_failed(record: abi.CudaAbi, fake: FakeLib) -> None:
    record._backend.cause = arig.cuda.CudaError(700, "work")
    with pytest.raises(arig.cuda.CudaError) as info:
        record.graph([])
    assert info.value.code == 700
    record._backend.cause = arig.DeviceHang("no progress")
    with pytest.raises(arig.ArigError, match="lost"):
        record.graph([])
    assert fake.calls == []


def test_graph_error_once_stop_began(record: abi.CudaAbi, fake: FakeLib) -> None:
    record._stop(timeout=1)
    with pytest.raises(arig.DeviceStopped):
        record.graph([])
    assert fake.calls == []


def test_stop_waits_for_a_graph_call_in_flight(record: abi.CudaAbi, fake: FakeLib) -> None:
    fake.block["cuGraphInstantiateWithFlags"] = release = threading.Event()
    fake.entered["cuGraphInstantiateWithFlags"] = entered = threading.Event()
    events: list[str] = []
    result: list[Any] = []

    def build() -> None:
        result.append(record.graph([abi.Kernel(0x11, 1, 1)]))
        events.append("graph returned")

    def stop() -> None:
        record._stop(timeout=10)
        events.append("stop returned")

    t1 = threading.Thread(target=build)
    t1.start()
    assert entered.wait(5)
    t2 = threading.Thread(target=stop)
    t2.start()
    time.sleep(0.2)
    assert events == [], "stop waits while the call is in flight"
    release.set()
    t1.join(5)
    t2.join(5)
    assert events[-1] == "stop returned" and "graph returned" in events
    assert isinstance(result[0], abi.Graph), "the call in flight completes"


@pytest.mark.asyncio
async def test_graph_async_lets_the_loop_run_while_cuda_instantiates(record: abi.CudaAbi, fake: FakeLib) -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def slow(ref: Any, g: Any, flags: Any) -> None:
        threads.append(threading.get_ident())
        time.sleep(0.3)  # libcuda's lock held while a large graph instantiates
        ref._obj.value = fake.new()

    fake._cuGraphInstantiateWithFlags = slow  # type: ignore[method-assign]
    async with StallMeter() as meter:
        g = await record.graph_async([abi.Kernel(0x11, 1, 1)] * 50)
    assert isinstance(g, abi.Graph) and len(g.nodes) == 50
    assert threads and loop_thread not in threads
    assert meter.longest < 0.15 and meter.ticks > 50  # never the 0.3 s the call took (a loaded machine stalls the loop a little)


def test_graph_from_another_thread(record: abi.CudaAbi) -> None:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(record.graph([abi.Kernel(0x11, 1, 1)])))
    t.start()
    t.join(5)
    assert isinstance(out[0], abi.Graph)


def test_collected_record_graph_queues_destruction_without_cuda(record: abi.CudaAbi, fake: FakeLib, state: arig.cuda._gpu.GpuState) -> None:
    g = record.graph([abi.Kernel(0x10, 1, 1, _args(1)), abi.Kernel(0x20, 1, 1)])
    handle, pending, destroyed = g.handle, state.pending, state.destroyed
    fake.calls.clear()
    ref = weakref.ref(g)
    del g
    gc.collect()
    assert ref() is None
    assert state.pending == pending + 1 and state.destroyed == destroyed
    assert fake.calls == [], "collection calls no CUDA destructor"
    empty = record.graph([])  # graph construction reclaims
    assert fake.called("cuGraphExecDestroy") == [(handle,)]
    assert state.pending == 0 and state.destroyed == destroyed + 1
    del empty


# == the GPU state: destruction order, sharing, fork ==============================================


def test_collect_calls_no_cuda(fake: FakeLib, state: arig.cuda._gpu.GpuState) -> None:
    state.add_module(0xA)
    state.retain((0xA,))
    fake.calls.clear()
    state.collect(0xE, 0x6, (0xA,))
    assert fake.calls == [] and state.pending == 1 and state.destroyed == 0


def test_reclaim_destroys_exec_then_graph_then_unloads_modules(fake: FakeLib, state: arig.cuda._gpu.GpuState) -> None:
    state.add_module(0xA)  # an image
    state.retain((0xA,))  # a graph of it
    state.release_module(0xA)  # the image is released: the graph still needs the module
    state.collect(0xE, 0x6, (0xA,))
    fake.calls.clear()
    state.reclaim()
    assert [c for c in fake.calls if c[0] in ("cuGraphExecDestroy", "cuGraphDestroy", "cuModuleUnload")] == [
        ("cuGraphExecDestroy", (0xE,)),
        ("cuGraphDestroy", (0x6,)),
        ("cuModuleUnload", (0xA,)),
    ]
    assert state.destroyed == 1 and state.pending == 0
    assert fake.names()[-2:] == ["cuDeviceGet", "cuDevicePrimaryCtxRelease_v2"], "the context is given back last"


def test_module_shared_by_an_image_and_a_graph_unloads_only_when_both_released(fake: FakeLib, state: arig.cuda._gpu.GpuState) -> None:
    state.add_module(0xA)
    state.retain((0xA,))
    # graph first
    state.collect(0xE, 0x6, (0xA,))
    state.reclaim()
    assert fake.called("cuModuleUnload") == [] and state.loaded(0xA)
    state.release_module(0xA)
    state.reclaim()
    assert fake.called("cuModuleUnload") == [(0xA,)] and not state.loaded(0xA)
    # image first
    state.add_module(0xB)
    state.retain((0xB,))
    state.release_module(0xB)
    state.reclaim()
    assert fake.called("cuModuleUnload") == [(0xA,)] and state.loaded(0xB)
    state.collect(0xE2, 0x62, (0xB,))
    state.reclaim()
    assert fake.called("cuModuleUnload") == [(0xA,), (0xB,)]


def test_state_holds_the_primary_context_while_graphs_or_modules_live(fake: FakeLib, state: arig.cuda._gpu.GpuState) -> None:
    state.retain(())  # an empty graph: no module, still a handle of the context
    assert len(fake.called("cuDevicePrimaryCtxRetain")) == 1
    state.reclaim()
    assert fake.called("cuDevicePrimaryCtxRelease_v2") == [], "a live empty graph keeps the context"
    state.add_module(0xA)
    assert len(fake.called("cuDevicePrimaryCtxRetain")) == 1, "one reference, however many handles"
    state.collect(0xE, 0x6, ())
    state.release_module(0xA)
    state.reclaim()
    assert len(fake.called("cuDevicePrimaryCtxRelease_v2")) == 1


def test_a_reclaim_already_running_on_another_thread_is_left_to_it(fake: FakeLib, state: arig.cuda._gpu.GpuState) -> None:
    state.retain(())
    state.retain(())
    state.collect(0xE1, 0x61, ())
    state.collect(0xE2, 0x62, ())
    fake.block["cuGraphExecDestroy"] = release = threading.Event()
    fake.entered["cuGraphExecDestroy"] = entered = threading.Event()
    t = threading.Thread(target=state.reclaim)
    t.start()
    assert entered.wait(5)
    t0 = time.monotonic()
    state.reclaim()  # returns at once, destroying nothing
    assert time.monotonic() - t0 < 1
    assert len(fake.called("cuGraphExecDestroy")) == 1
    release.set()
    t.join(5)
    assert [a for a in fake.called("cuGraphExecDestroy")] == [(0xE1,), (0xE2,)]
    assert state.pending == 0 and state.destroyed == 2


def test_a_child_of_fork_destroys_no_graph_inherited_from_its_parent(fake: FakeLib, state: arig.cuda._gpu.GpuState) -> None:
    state.add_module(0xA)
    state.retain((0xA,))
    state.release_module(0xA)
    state.collect(0xE, 0x6, (0xA,))

    def child() -> dict[str, Any]:
        fake.calls.clear()
        state.reclaim()
        state.collect(0xE9, 0x69, ())  # a graph the child itself collects is the child's
        return {"calls": fake.names(), "pending": state.pending}

    r = _fork_and_report(child)
    assert r == {"calls": [], "pending": 1}
    fake.calls.clear()
    state.reclaim()  # the parent's own still are destroyed, in the parent
    assert fake.called("cuGraphExecDestroy") == [(0xE,)] and fake.called("cuModuleUnload") == [(0xA,)]


def test_context_failure_forgets_handles_and_later_collections_call_no_destructor(fake: FakeLib, state: arig.cuda._gpu.GpuState) -> None:
    state.add_module(0xA)
    state.retain((0xA,))
    state.collect(0xE1, 0x61, (0xA,), state.generation)
    old = state.generation
    state.retain((0xA,))  # a graph still reachable when the context fails
    state.context_failed()
    assert state.pending == 0 and state.destroyed == 1
    assert not state.loaded(0xA)
    assert fake.called("cuDevicePrimaryCtxRelease_v2"), "the failed context is given back"
    fake.calls.clear()
    state.add_module(0xA)  # after a reopen, a new module at the same address
    state.collect(0xE2, 0x62, (0xA,), old)  # the old graph is collected only now
    state.reclaim()
    assert fake.called("cuGraphExecDestroy") == [] and fake.called("cuGraphDestroy") == [], "its handles died with the context"
    assert fake.called("cuModuleUnload") == [] and state.loaded(0xA), "the new module is not the old graph's"
    assert state.destroyed == 2
    state.release_module(0xA)
    state.reclaim()
    assert fake.called("cuModuleUnload") == [(0xA,)]


# == pack and check_args =========================================================================


def test_pack_aligns_each_value_naturally() -> None:
    b = arig.cuda.pack(np.float32(1.5), np.uint64(7))
    assert len(b) == 16
    assert b[:4] == np.float32(1.5).tobytes() and b[4:8] == b"\0" * 4 and b[8:] == np.uint64(7).tobytes()
    b = arig.cuda.pack(np.uint8(1), np.uint16(2), np.uint32(3), np.float64(4))
    assert len(b) == 16 and b[1:2] == b"\0"
    b = arig.cuda.pack(ctypes.c_int32(5), np.uint64(9))
    assert len(b) == 16
    assert arig.cuda.pack() == b""


def test_pack_refuses_values_of_no_fixed_size() -> None:
    for v in (1, 1.0, "x", None):
        with pytest.raises(TypeError, match="no fixed size"):
            arig.cuda.pack(v)


@pytest.mark.asyncio
async def test_pack_a_buffer_is_its_address() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        buf = await dev.alloc(64)
        b = arig.cuda.pack(np.uint32(1), buf)
        assert len(b) == 16 and int.from_bytes(b[8:], "little") == buf.address


def test_check_args_against_a_registered_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    func = 0xF00D
    monkeypatch.setitem(arig.cuda._launch._LAYOUTS, func, ((0, 4), (8, 8)))
    arig.cuda.check_args(func, b"\0" * 16)
    for n in (0, 12, 20):
        with pytest.raises(ValueError, match=r"\[\(0, 4\), \(8, 8\)\]: 16 bytes expected"):
            arig.cuda.check_args(func, b"\0" * n)
    arig.cuda.check_args(0xBEEF, b"\0" * 3)  # unknown layout: nothing to check


# == openers without a GPU =======================================================================


def test_gpu_opener_names_and_index() -> None:
    assert arig.cuda.gpu(0).name == "CUDA"
    assert arig.cuda.gpu(2).name == "CUDA:2"
    with pytest.raises(ValueError):
        arig.cuda.gpu(-1)
    for bad in (True, "0", 1.0):
        with pytest.raises(TypeError):
            arig.cuda.gpu(bad)  # type: ignore[arg-type]


def _libcuda_loads() -> bool:
    try:
        ctypes.CDLL(arig._env.LIBCUDA)
        return True
    except OSError:
        return False


@pytest.mark.skipif(_libcuda_loads(), reason="libcuda is installed here")
def test_count_is_zero_without_a_driver() -> None:
    assert arig.cuda.count() == 0


@pytest.mark.skipif(_libcuda_loads(), reason="libcuda is installed here")
@pytest.mark.asyncio
async def test_open_without_a_driver_raises_open_error_naming_libcuda() -> None:
    with pytest.raises(arig.OpenError, match="libcuda"):
        await arig.open(arig.cuda.gpu(0))


@pytest.mark.asyncio
async def test_open_with_libcuda_missing_raises_open_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arig._env, "LIBCUDA", "libcuda-arig-test-missing.so.1")
    missing = arig.cuda._lib._Lib()
    monkeypatch.setattr(arig.cuda._device, "lib", missing)
    with pytest.raises(arig.OpenError, match=r"cannot open CUDA: cannot load libcuda-arig-test-missing\.so\.1"):
        await arig.open(arig.cuda.gpu(0))


# == capture: threads ============================================================================


@pytest.mark.asyncio
async def test_capture_functions_refuse_the_event_loop_thread(fake: FakeLib) -> None:
    t = capture.Template._make(0x5, CTX, (-1, None), ())
    e = capture.Exec._make(0x6, CTX, (-1, None), ())
    calls = [
        lambda: capture.begin_capture(7),
        lambda: capture.end_capture(7),
        lambda: capture.instantiate(t),
        lambda: capture.launch(e, 7),
        lambda: capture.destroy(t),
        lambda: capture.exec_destroy(e),
        lambda: capture.reclaim(),
        lambda: capture.using(CTX).__enter__(),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="event loop's thread") as info:
            call()
        assert isinstance(info.value, arig.ArigError)
    assert fake.calls == [], "refused before any libcuda call"
    assert not t.destroyed and not e.destroyed
    # the same calls are fine from a worker thread
    await asyncio.to_thread(capture.destroy, t)
    await asyncio.to_thread(capture.exec_destroy, e)
    assert t.destroyed and e.destroyed


def test_capture_mode_values_are_custreamcapturemode() -> None:
    assert (capture.GLOBAL, capture.THREAD_LOCAL, capture.RELAXED) == (0, 1, 2)
    assert capture.CaptureMode.GLOBAL is capture.GLOBAL
    assert [m.name for m in capture.CaptureMode] == ["GLOBAL", "THREAD_LOCAL", "RELAXED"]
    assert inspect.signature(capture.begin_capture).parameters["mode"].default is capture.GLOBAL
    assert arig.cuda.capture is capture


# == capture with a fake libcuda =================================================================


def test_begin_capture_defaults_to_global_and_records_the_stream(fake: FakeLib) -> None:
    capture.begin_capture(0x51)
    assert fake.called("cuStreamBeginCapture_v2") == [(0x51, 0)]
    capture.begin_capture(0x52, capture.RELAXED)
    capture.begin_capture(0x53, mode=1)
    assert fake.called("cuStreamBeginCapture_v2")[1:] == [(0x52, 2), (0x53, 1)]
    assert fake.called("cuCtxSetCurrent") == [(CTX,), (None,)] * 3, "run in the stream's context, then restored"
    with pytest.raises(ValueError, match="mode"):
        capture.begin_capture(0x54, 3)
    with pytest.raises(TypeError):
        capture.begin_capture(True)


def test_stream_argument_forms(fake: FakeLib) -> None:
    class TorchLike:
        def __cuda_stream__(self) -> tuple[int, int]:
            return (0, 0x62)

    capture.begin_capture(arig.Queue("CUDA", 0, 0x61))
    capture.begin_capture(TorchLike())
    assert [a[0] for a in fake.called("cuStreamBeginCapture_v2")] == [0x61, 0x62]
    with pytest.raises(TypeError):
        capture.begin_capture(capture.Exec._make(0x6, CTX, (-1, None), ()))


def test_end_capture_returns_the_template_keeping_what_it_is_given(fake: FakeLib) -> None:
    class Res:
        pass

    image, buf = Res(), Res()
    capture.begin_capture(0x51)
    t = capture.end_capture(0x51, keep=(image, buf))
    assert isinstance(t, capture.Template) and t.handle and not t.destroyed
    assert t.keep == (image, buf)
    refs = [weakref.ref(image), weakref.ref(buf)]
    del image, buf
    gc.collect()
    assert all(r() is not None for r in refs), "the template keeps the captured work's resources"
    capture.destroy(t)
    assert all(r() is not None for r in refs), "destroy releases the handle; the value still holds its keep"
    del t
    gc.collect()
    assert all(r() is None for r in refs)


def test_end_capture_raises_cuda_error_if_the_capture_was_invalidated(fake: FakeLib) -> None:
    capture.begin_capture(0x51)
    fake.fail["cuStreamEndCapture"] = 901
    with pytest.raises(arig.cuda.CudaError, match="invalidated") as info:
        capture.end_capture(0x51)
    assert info.value.code == 901
    del fake.fail["cuStreamEndCapture"]
    with pytest.raises(arig.cuda.CudaError) as info:
        capture.end_capture(0x5F)  # never captured
    assert info.value.code == 401


def test_instantiate_keeps_the_templates_keep_and_its_own(fake: FakeLib) -> None:
    a, b = object(), object()
    capture.begin_capture(0x51)
    t = capture.end_capture(0x51, keep=[a])
    e = capture.instantiate(t, keep=b)
    assert isinstance(e, capture.Exec) and e.handle and e.handle != t.handle
    assert e.keep == (a, b)
    assert fake.called("cuGraphInstantiateWithFlags") == [("&", t.handle, 0)]
    th = t.handle
    capture.destroy(t)
    capture.destroy(t)
    assert fake.called("cuGraphDestroy") == [(th,)], "destroy is idempotent"
    assert e.keep == (a, b) and not e.destroyed, "the template may be destroyed after instantiate"
    with pytest.raises(ValueError, match="destroyed"):
        capture.instantiate(t)
    capture.exec_destroy(e)
    capture.exec_destroy(e)
    assert len(fake.called("cuGraphExecDestroy")) == 1, "exec_destroy is idempotent"
    with pytest.raises(ValueError, match="destroyed"):
        capture.launch(e, 0x51)


def test_template_and_exec_hold_the_primary_context_until_destroyed(fake: FakeLib) -> None:
    """The GPU's state (its one reclaimer) holds the primary context once while any
    template or exec lives, and gives it back after the last is destroyed."""
    capture.begin_capture(0x51)
    t = capture.end_capture(0x51)
    e = capture.instantiate(t)
    assert len(fake.called("cuDevicePrimaryCtxRetain")) == 1, "one hold, however many handles"
    capture.destroy(t)
    assert fake.called("cuDevicePrimaryCtxRelease_v2") == [], "the exec still lives"
    fake.calls.clear()
    capture.exec_destroy(e)
    names = fake.names()
    assert names.count("cuDevicePrimaryCtxRelease_v2") == 1
    assert names.index("cuGraphExecDestroy") < names.index("cuDevicePrimaryCtxRelease_v2"), "released after the destroy"


def _exec(fake: FakeLib, keep: Any = ()) -> capture.Exec:
    capture.begin_capture(0x51)
    t = capture.end_capture(0x51, keep=keep)
    e = capture.instantiate(t)
    capture.destroy(t)
    fake.calls.clear()
    return e


def test_launch_is_one_graph_launch_and_a_completion_host_function(fake: FakeLib) -> None:
    e = _exec(fake)
    capture.launch(e, 0x77)
    assert fake.called("cuGraphLaunch") == [(e.handle, 0x77)]
    ((s, fn, _),) = fake.called("cuLaunchHostFunc")
    assert s == 0x77 and fn == capture.SEM_POST, "libc's sem_post: no Python, no lock, no CUDA call"
    assert fake.names().index("cuGraphLaunch") < fake.names().index("cuLaunchHostFunc")
    assert e.pending == 1
    fake.run_host_funcs()
    capture.reclaim()
    assert e.pending == 0 and capture.stats()["launches_pending"] == 0


def test_launch_keeps_the_exec_alive_until_its_work_is_done(fake: FakeLib) -> None:
    class Res:
        pass

    res = Res()
    res_ref = weakref.ref(res)
    e = _exec(fake, keep=res)
    del res
    handle = e.handle
    ref = weakref.ref(e)
    capture.launch(e, 0x77)
    capture.launch(e, 0x77)
    del e
    gc.collect()
    capture.reclaim()
    assert ref() is not None and res_ref() is not None, "the stream retains the exec while its launches are pending"
    assert fake.called("cuGraphExecDestroy") == []
    fake.run_host_funcs()  # CUDA's host thread: both launches completed
    assert ref() is not None, "no Python ran on CUDA's thread: released at the next call"
    capture.reclaim()
    gc.collect()
    assert ref() is None and res_ref() is None
    assert fake.called("cuGraphExecDestroy") == [(handle,)], "collected, then destroyed by the same call"


def test_collected_values_are_destroyed_at_the_next_call_never_in_the_finalizer(fake: FakeLib) -> None:
    capture.begin_capture(0x51)
    t = capture.end_capture(0x51)
    e = capture.instantiate(t)
    th, eh = t.handle, e.handle
    fake.calls.clear()
    before = capture.stats()
    del t, e
    gc.collect()
    assert fake.calls == [], "a finalizer calls no CUDA (it may run on the loop thread, in a fill, under a lock)"
    assert capture.stats()["awaiting_destruction"] == before["awaiting_destruction"] + 2
    capture.reclaim()
    assert fake.called("cuGraphDestroy") == [(th,)] and fake.called("cuGraphExecDestroy") == [(eh,)]
    after = capture.stats()
    assert after["awaiting_destruction"] == 0
    assert after["templates_destroyed"] == before["templates_destroyed"] + 1
    assert after["execs_destroyed"] == before["execs_destroyed"] + 1
    # destroyed with the calling thread's capture mode relaxed, and the mode restored
    names = fake.names()
    n = names.count("cuThreadExchangeStreamCaptureMode")
    assert n >= 2 and n % 2 == 0 and fake.mode == 0


def test_exec_destroy_with_a_launch_pending_defers_the_destruction(fake: FakeLib) -> None:
    e = _exec(fake)
    handle = e.handle
    capture.launch(e, 0x77)
    capture.exec_destroy(e)
    assert e.destroyed and fake.called("cuGraphExecDestroy") == []
    with pytest.raises(ValueError, match="destroyed"):
        capture.launch(e, 0x77)
    capture.exec_destroy(e)
    fake.run_host_funcs()
    capture.reclaim()
    assert fake.called("cuGraphExecDestroy") == [(handle,)]
    capture.reclaim()
    assert len(fake.called("cuGraphExecDestroy")) == 1


def test_failed_launch_keeps_nothing_pending(fake: FakeLib) -> None:
    e = _exec(fake)
    fake.fail["cuGraphLaunch"] = 400
    with pytest.raises(arig.cuda.CudaError) as info:
        capture.launch(e, 0x77)
    assert info.value.code == 400 and e.pending == 0 and fake.called("cuLaunchHostFunc") == []
    del fake.fail["cuGraphLaunch"]
    capture.launch(e, 0x77, retain=False)
    assert e.pending == 0 and fake.called("cuLaunchHostFunc") == []


def test_launch_into_a_capture_joins_the_templates_keep(fake: FakeLib) -> None:
    inner = _exec(fake)
    capture.begin_capture(0x90)
    capture.launch(inner, 0x90)
    assert fake.called("cuLaunchHostFunc") == [], "nothing runs during a capture: no completion to watch"
    outer = capture.end_capture(0x90)
    assert outer.keep == (inner,) and inner.pending == 0


def test_context_switches_for_the_call_and_is_restored(fake: FakeLib) -> None:
    e = _exec(fake)
    fake.current = 0xD0  # another context is current on this thread
    capture.launch(e, 0x77, retain=False)
    assert fake.called("cuCtxSetCurrent") == [(CTX,), (0xD0,)]
    assert fake.current == 0xD0
    fake.calls.clear()
    fake.current = CTX
    capture.launch(e, 0x77, retain=False)
    assert fake.called("cuCtxSetCurrent") == [], "a fill's context is current already: no switch"


def test_context_argument_forms(fake: FakeLib, state: arig.cuda._gpu.GpuState) -> None:
    rec = abi.CudaAbi._for_backend(FakeBackend(state, {}))
    capture.begin_capture(0x51, context=rec)
    with capture.using(rec) as ctx:
        assert ctx == CTX and fake.current == CTX
    assert fake.current == 0
    with pytest.raises(TypeError):
        capture.begin_capture(0x52, context="ctx")
    rec._backend.ctx = 0
    with pytest.raises(arig.DeviceStopped):
        capture.begin_capture(0x52, context=rec)


def test_templates_and_execs_are_made_by_the_module() -> None:
    with pytest.raises(TypeError, match="end_capture"):
        capture.Template()
    with pytest.raises(TypeError, match="instantiate"):
        capture.Exec()


def test_repr(fake: FakeLib) -> None:
    e = _exec(fake, keep=(1, 2))
    assert repr(e) == f"<arig.cuda.capture.Exec 0x{e.handle:x}, keeping 2 object(s)>"
    capture.exec_destroy(e)
    assert repr(e) == "<arig.cuda.capture.Exec destroyed, keeping 2 object(s)>"


def test_a_child_of_fork_destroys_no_capture_inherited_from_its_parent(fake: FakeLib) -> None:
    e = _exec(fake)
    capture.begin_capture(0x51)
    t = capture.end_capture(0x51)
    capture.launch(e, 0x77)
    fake.calls.clear()

    def child() -> dict[str, Any]:
        nonlocal e, t
        fake.calls.clear()
        capture.destroy(t)
        capture.exec_destroy(e)
        del e, t
        gc.collect()
        capture.reclaim()
        return {"destroys": [n for n in fake.names() if "Destroy" in n], "stats": capture.stats()}

    r = _fork_and_report(child)
    assert r["destroys"] == [] and r["stats"]["awaiting_destruction"] == 0 and r["stats"]["launches_pending"] == 0
    assert not e.destroyed and not t.destroyed and e.pending == 1
    fake.run_host_funcs()
    capture.destroy(t)
    capture.exec_destroy(e)
    assert fake.called("cuGraphDestroy") and fake.called("cuGraphExecDestroy")


def test_capture_counters() -> None:
    s = capture.stats()
    assert set(s) == {"templates_destroyed", "execs_destroyed", "awaiting_destruction", "launches_pending"}
    assert all(isinstance(v, int) and v >= 0 for v in s.values())
