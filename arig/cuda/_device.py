"""The CUDA device: a backend over libcuda's primary context.

Threads, and what each may do:

* the device's **Python submit thread** (``arig._submit``) opens the device,
  runs Python fills, allocations, loads and frees, and closes it;
* the **native thread** of the native core (``arig/_native/core.c``) runs
  every launch, graph launch, C fill and copy, signals completions and
  watches them; without the native core the Python submit thread does that
  and one waiter thread per queue reports (``_completion.PureCompletion``);
* the **event loop** never calls libcuda.

Which engine runs a device (native core or pure Python) is ``arig._engine``'s
decision, made once at open; what each engine does with a submission, and how
a value's completion is known, is ``_completion``'s business: this module
holds one engine object and never asks which.  It opens, describes,
allocates, loads and closes.
"""

from __future__ import annotations

import ctypes
import types
from ctypes import byref, c_int, c_size_t, c_uint, c_uint64, c_void_p
from typing import Any

from .._memory import never_free, refuse_used
from .. import _engine, _log
from .._errors import ArigTypeError, ArigValueError, OpenError, safe_repr
from .._backend import Adopts, Backend, WaitsEvents, Wraps
from . import _abi
from . import _stamp
from ._completion import Completion, Stamps, _fill_result, open_completion
from .._libc import name_thread
from .._launchspec import c_arg, fill_address
from ._items import Copy
from ._resources import Resources
from ._gates import Gates
from ._gpu import gpu_state
from ._launch import Launch
from ._lib import FILL, CUdevice, CudaError, CudaUnavailable, check, lib, prefetch_error_names
from .interop import CudaAdoptedQueue, CudaQueue, stream_handle
from ..queue import AdoptedQueue

__all__ = ["CudaOpener", "CudaBackend", "count", "FILL"]

#: Driver API version arig needs (12.4: cuModuleEnumerateFunctions, cuFuncGetParamInfo).
MIN_DRIVER = 12040
#: hang_ms on a GPU where no display watchdog runs: long enough for any sane kernel, short enough to notice a hang.
DEFAULT_HANG_MS = 30_000

#: CU_CTX_SCHED_*: how libcuda's threads wait for the GPU.
SCHED = {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}
CU_STREAM_NON_BLOCKING = 1
CU_MEMHOSTALLOC_PORTABLE = 1
CU_MEMHOSTALLOC_DEVICEMAP = 2
CUDA_ERROR_NOT_READY = 600
#: Faults that leave a context unusable (CUDA_ERROR_ILLEGAL_ADDRESS, _HARDWARE_STACK_ERROR,
#: _ILLEGAL_INSTRUCTION, _MISALIGNED_ADDRESS, _INVALID_ADDRESS_SPACE, _INVALID_PC, _LAUNCH_FAILED).
STICKY = frozenset({700, 714, 715, 716, 717, 718, 719})
ATTR = {"multiprocessors": 16, "kernel_exec_timeout": 17, "cc_major": 75, "cc_minor": 76, "unified_addressing": 41}


class _Join:
    """The pure path's (and any Python fill's) join: run ``fill`` on the user's stream, then make
    the join lane wait for that stream (``record``: an event recorded on it now) or for the
    event ``slot`` holds (an adopted queue's ``join_event``, or an awaited event's handle).
    Runs on the Python submit thread."""

    __slots__ = ("stream", "slot", "record", "fill")

    def __init__(self, stream: int, slot: Any, record: bool, fill: Any = None) -> None:
        self.stream, self.slot, self.record, self.fill = stream, slot, record, fill

    def __call__(self, lane: int, arg: Any, v: int) -> Any:
        if self.fill is not None:
            rc = self.fill(self.stream, arg, v)
            if rc is not None:
                _fill_result(rc, v)  # raises for a failure: no join after a failed fill
        if self.record:
            if not self.slot.value:
                ev = c_void_p()
                check(lib.cuEventCreate(byref(ev), 2), "cuEventCreate")  # CU_EVENT_DISABLE_TIMING
                self.slot.value = ev.value
            check(lib.cuEventRecord(self.slot.value, self.stream), "cuEventRecord(adopted stream)")
        check(lib.cuStreamWaitEvent(lane, self.slot.value, 0), "cuStreamWaitEvent")
        return None


def _relaxed_capture_mode() -> None:
    """Make the calling thread's CUDA calls safe during other threads' GLOBAL captures."""
    mode = c_int(2)  # CU_STREAM_CAPTURE_MODE_RELAXED
    if lib.has("cuThreadExchangeStreamCaptureMode"):
        lib.cuThreadExchangeStreamCaptureMode(byref(mode))


def _init() -> int:
    """cuInit, then the number of GPUs."""
    try:
        check(lib.cuInit(0), "cuInit")
    except CudaUnavailable:
        raise
    except CudaError as exc:
        if exc.code == 100:  # CUDA_ERROR_NO_DEVICE
            return 0
        raise
    n = c_int()
    check(lib.cuDeviceGetCount(byref(n)), "cuDeviceGetCount")
    return n.value


def count() -> int:
    """How many GPUs libcuda sees (0 without a driver).  Blocks: not for the event loop."""
    try:
        return _init()
    except CudaUnavailable:
        return 0


def peers() -> list[list[bool]]:
    """Which GPU's memory each GPU can reach directly (``cuDeviceCanAccessPeer``: NVLink or PCIe
    peer to peer), row ``i`` column ``j``; a GPU reaches its own (the diagonal is True); empty
    without a GPU.  Blocks: not for the event loop."""
    n = count()
    devs = [CUdevice() for _ in range(n)]
    for i, d in enumerate(devs):
        check(lib.cuDeviceGet(byref(d), i), "cuDeviceGet")
    out = [[i == j for j in range(n)] for i in range(n)]
    can = c_int()
    for i in range(n):
        for j in range(n):
            if i != j:
                check(lib.cuDeviceCanAccessPeer(byref(can), devs[i].value, devs[j].value), "cuDeviceCanAccessPeer")
                out[i][j] = bool(can.value)
    return out


def _pairs_at(lanes: int) -> int:
    """The offset of the stamp kernel's pairs after ``lanes`` timeline words (16-byte aligned)."""
    return -(-8 * lanes // 16) * 16


class CudaOpener:
    """Opener of GPU ``index`` through libcuda (name ``"CUDA"`` or ``"CUDA:i"``)."""

    def __init__(self, index: int, queues: int, hang_ms: int | None, spin_us: int = 40, sched: str | None = None, memops: bool | None = None) -> None:
        self.index = index
        self.sched = sched
        self.spin_us = spin_us
        self.name = "CUDA" if index == 0 else f"CUDA:{index}"
        self.queues = queues
        self.hang_ms = hang_ms
        self.memops = memops

    def make(self) -> CudaBackend:
        return CudaBackend(self)

    def __repr__(self) -> str:
        return f"arig.cuda.gpu({self.index})"


class CudaBackend(Resources, Gates, Backend, Adopts, WaitsEvents, Wraps):
    """Open, describe, queues and close; submission items; memory and images come from ``Resources``."""

    queue_type = CudaQueue  # its queues speak cuda.core's stream protocol

    def __init__(self, opener: CudaOpener) -> None:
        self.name = opener.name
        i = opener.index
        try:
            n = _init()
        except CudaUnavailable as exc:
            raise OpenError(f"cannot open {self.name}: {exc}") from exc
        ver = c_int()
        check(lib.cuDriverGetVersion(byref(ver)), "cuDriverGetVersion")
        if ver.value < MIN_DRIVER:
            raise OpenError(f"cannot open {self.name}: the driver supports CUDA {ver.value // 1000}.{ver.value % 1000 // 10}; arig needs {MIN_DRIVER // 1000}.{MIN_DRIVER % 1000 // 10} or newer")
        if i >= n:
            raise OpenError(f"cannot open {self.name}: no GPU {i}: this machine has {n} GPU{'s' if n != 1 else ''}")
        self.ordinal = i
        self.gpu = gpu_state(i)
        dev = c_int()
        check(lib.cuDeviceGet(byref(dev), i), "cuDeviceGet")
        self.cudev = dev.value
        self._set_sched(opener.sched)
        ctx = c_void_p()
        check(lib.cuDevicePrimaryCtxRetain(byref(ctx), self.cudev), "cuDevicePrimaryCtxRetain")
        self.ctx = ctx.value
        self._streams: list[int] = []
        self._words = 0
        self._stamp_module = 0  # the stamp kernel's CUmodule (0: none)
        self._live: dict[int, str] = {}
        self._images: set[int] = set()
        self._modules_of: dict[int, int] = {}  # CUfunction -> CUmodule, for images this device loaded
        self.completion: Completion | None = None
        self.submit_thread: Any = None
        self._cfills: dict[int, tuple[Any, int]] = {}  # id -> (C fill pointer, its address): checked once
        self._adopted: dict[int, CudaAdoptedQueue] = {}  # stream handle -> its queue
        name_thread("arig-submit")
        try:
            check(lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
            _relaxed_capture_mode()  # this submit thread's own calls must not break users' captures
            prefetch_error_names()  # the loop names faults without asking the driver
            self._check_context()
            self.gpu.reclaim()  # graphs collected since the last operation on this GPU
            self._describe(ver.value, opener)
            self._make_queues(opener)
        except BaseException:
            self._release()
            raise
        self.record = _abi.CudaAbi._for_backend(self)
        self.capabilities = dict([_abi.declare(self.record)])

    # -- open ------------------------------------------------------------------
    def _set_sched(self, sched: str | None) -> None:
        """How libcuda's own threads wait (the primary context's scheduling flags).

        The primary context is shared with every library in the process, so
        the flags are set only where arig is the one creating it; otherwise
        the context keeps the flags it has.
        """
        if sched is None or not lib.has("cuDevicePrimaryCtxGetState"):
            return
        flags, active = c_uint(), c_int()
        check(lib.cuDevicePrimaryCtxGetState(self.cudev, byref(flags), byref(active)), "cuDevicePrimaryCtxGetState")
        if not active.value:
            check(lib.cuDevicePrimaryCtxSetFlags_v2(self.cudev, (flags.value & ~7) | SCHED[sched]), "cuDevicePrimaryCtxSetFlags")

    def _check_context(self) -> None:
        """A primary context that faulted earlier (a lost device) is unusable:
        if only arig holds it, give it back so the driver makes a fresh one."""
        probe = c_uint64()
        rc = lib.cuMemAlloc_v2(byref(probe), 256)
        if rc == 0:
            # Kept until close: cuMemFree would wait for all work in the context,
            # other libraries' included, and the open with it.
            self._live[probe.value] = "device"
            return
        if rc not in STICKY:  # out of memory or the like: the context itself is fine
            return
        self.gpu.context_failed()
        lib.cuCtxSetCurrent(None)
        lib.cuDevicePrimaryCtxRelease_v2(self.cudev)
        # The context is dead for every holder already; the reset destroys it even
        # where another library still holds it, so that a retain makes a new one.
        lib.cuDevicePrimaryCtxReset_v2(self.cudev)
        ctx = c_void_p()
        rc = lib.cuDevicePrimaryCtxRetain(byref(ctx), self.cudev)
        if rc == 0:
            self.ctx = ctx.value
            lib.cuCtxSetCurrent(self.ctx)
            rc = lib.cuMemAlloc_v2(byref(probe), 256)
        else:
            self.ctx = 0
        if rc:
            raise OpenError(
                f"cannot open {self.name}: a fault earlier in this process left GPU {self.ordinal} unusable ({CudaError.of(rc)}); "
                "libcuda keeps such an error until the process exits, or another user still holds the primary context"
            )
        lib.cuMemFree_v2(probe.value)

    def _attr(self, name: str) -> int:
        v = c_int()
        check(lib.cuDeviceGetAttribute(byref(v), ATTR[name], self.cudev), f"cuDeviceGetAttribute({name})")
        return v.value

    def _describe(self, driver: int, opener: CudaOpener) -> None:
        name = ctypes.create_string_buffer(256)
        check(lib.cuDeviceGetName(name, 256, self.cudev), "cuDeviceGetName")
        bus = ctypes.create_string_buffer(64)
        check(lib.cuDeviceGetPCIBusId(bus, 64, self.cudev), "cuDeviceGetPCIBusId")
        mem = c_size_t()
        check(lib.cuDeviceTotalMem_v2(byref(mem), self.cudev), "cuDeviceTotalMem")
        major, minor = self._attr("cc_major"), self._attr("cc_minor")
        watchdog = bool(self._attr("kernel_exec_timeout"))
        if opener.hang_ms is not None:
            self.hang_ms = opener.hang_ms
        else:
            self.hang_ms = None if watchdog else DEFAULT_HANG_MS
        self.arch = f"sm_{major}{minor}"
        self.facts = self._facts = {
            "name": name.value.decode(),
            "bus": bus.value.decode().lower(),
            "memory_total": mem.value,
            "multiprocessors": self._attr("multiprocessors"),
            "compute_capability": (major, minor),
            "driver_version": f"{driver // 1000}.{driver % 1000 // 10}",
            "hang_ms": self.hang_ms,
            "display_watchdog": watchdog,
            "queues": opener.queues,
            "ordinal": self.ordinal,
            "sched": self._sched_name(),
        }

    def _sched_name(self) -> str:
        if not lib.has("cuDevicePrimaryCtxGetState"):
            return "unknown"
        flags, active = c_uint(), c_int()
        lib.cuDevicePrimaryCtxGetState(self.cudev, byref(flags), byref(active))
        return {v: k for k, v in SCHED.items()}.get(flags.value & 7, "auto")

    def _make_queues(self, opener: CudaOpener) -> None:
        n = opener.queues
        # The queues' streams, and one more: the join lane, where adopted streams and
        # awaited events are joined (never the queues': their work waits for no one else's).
        for _ in range(n + 1):
            st = c_void_p()
            check(lib.cuStreamCreate(byref(st), CU_STREAM_NON_BLOCKING), "cuStreamCreate")
            self._streams.append(st.value or 0)
        self.queue_handles = self._streams[:n]
        self.join_lane = n
        # One 8-byte timeline word per lane in pinned, mapped host memory, then the stamp kernel's
        # pairs (16 bytes per lane), its calibration (32) and the queues' gates (arig.cuda._gates).
        p = c_void_p()
        gates_at = _pairs_at(n + 1) + 16 * (n + 1) + 32
        size = gates_at + 8 * n
        check(lib.cuMemHostAlloc(byref(p), size, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc(timeline)")
        self._words = p.value or 0
        ctypes.memset(self._words, 0, size)
        d = c_uint64()
        check(lib.cuMemHostGetDevicePointer_v2(byref(d), self._words, 0), "cuMemHostGetDevicePointer")
        # Stream memory operations let the GPU write the words; without them host functions do.
        refused = "memops=False" if opener.memops is False else _engine.memops()
        memops = refused is None and lib.has("cuStreamWriteValue64_v2") and lib.cuStreamWriteValue64_v2(self._streams[0], d.value, 0, 0) == 0
        check(lib.cuStreamSynchronize(self._streams[0]), "cuStreamSynchronize")
        engine = _engine.choose()
        stamps = self._stamps(n + 1, d.value) if memops and engine.native and _engine.gpu_stamps() else None
        self.completion = open_completion(engine, self, self.ctx or 0, self._streams, self._words, d.value, memops, opener.spin_us, stamps)
        self._prepare_by_type = self._item_makers(self.completion)
        if not memops:
            _log.fallback(f"{self.name}: completions written by host functions, not by the GPU ({refused or 'the driver has no stream memory operations'})")
        self._facts["stream_memops"] = memops
        self._facts["after"] = self.set_gates(memops, engine.native, self._words + gates_at, d.value + gates_at, n)
        self._facts["completion"] = self.completion.description
        self._facts["core"] = engine.why

    def _stamps(self, lanes: int, word_dev: int) -> Stamps | None:
        """The stamp kernel, loaded in the context, and where its pairs are (None: the driver cannot build it)."""
        loaded = _stamp.load()
        if loaded is None:
            _log.fallback(f"{self.name}: the stamp kernel did not build: long work is learned without the GPU's time")
            return None
        self._stamp_module = loaded[0]
        at = _pairs_at(lanes)
        cal = at + 16 * lanes
        return (loaded[1], self._words + at, word_dev + at, self._words + cal, word_dev + cal)

    # -- the loop side of submission ------------------------------------------------
    def submitter(self, st: Any, limit: int) -> Any:
        """Loop thread, at open: who takes submissions (the native core, or the submit thread)."""
        self.submit_thread = st
        assert self.completion is not None
        self.completion.attach(st._loop, limit)
        return self.completion.submitter(st)

    def begin_stop(self) -> None:
        self.record._begin_stop()

    def abort(self) -> None:
        if self.completion is not None:
            self.completion.abort()

    def detach(self) -> None:
        if self.completion is not None:
            self.completion.detach()

    def prepare(self, fill: Any, arg: Any) -> Any:
        """Check a submission on the loop (no driver call) and make the item the submitter takes."""
        t = type(fill)
        if t is Launch:  # the hot path: its core record is its item on either engine
            if arg is not None:
                raise ArigValueError("a Launch submitted as the fill takes no arg (it carries its arguments)")
            if fill._uses:
                refuse_used(fill._uses)  # its image unloaded, or a buffer pack() saw closed
            return fill._item
        make = self._prepare_by_type.get(t)
        if make is not None:
            return make(fill, arg)
        return self._prepare_other(fill, arg)

    def _item_makers(self, engine: Completion) -> dict[type, Any]:
        """The item makers of the fill types known by exact type (loop thread, through prepare)."""

        def graph(fill: Any, arg: Any) -> Any:
            if arg is not None:
                raise ArigValueError("a Graph submitted as the fill takes no arg")
            return engine.graph_item(fill)

        return {
            Copy: lambda fill, arg: engine.copy_item(fill),
            _abi.Graph: graph,
            type(None): lambda fill, arg: engine.mark_item(),
            # the usual Python fills, found without the isinstance tests of _prepare_other
            types.FunctionType: self._prepare_python,
            types.MethodType: self._prepare_python,
        }

    def _prepare_other(self, fill: Any, arg: Any) -> Any:
        """C fills (an address, a ctypes function) and Python fills: told apart by isinstance."""
        assert self.completion is not None
        if isinstance(fill, int) and not isinstance(fill, bool):
            return self.completion.cfill_item(fill_address(fill), c_arg(arg))
        if isinstance(fill, ctypes._CFuncPtr):  # type: ignore[attr-defined]
            # Each CFUNCTYPE prototype is a class of its own: once seen, prepare finds it by type.
            if len(self._prepare_by_type) < 64:
                self._prepare_by_type[type(fill)] = self._prepare_cfunc
            return self._prepare_cfunc(fill, arg)
        if callable(fill):
            return self._prepare_python(fill, arg)
        raise ArigTypeError(f"fill must be callable as fill(queue, arg, v), a C fill, a Launch or a Graph; got {type(fill).__name__}")

    def _prepare_cfunc(self, fill: Any, arg: Any) -> Any:
        """A ctypes function as a C fill: its prototype checked once per function object."""
        assert self.completion is not None
        known: tuple[Any, int] | None = self._cfills.get(id(fill))
        if known is None or known[0] is not fill:
            if len(self._cfills) > 256:
                self._cfills.clear()
            known = self._cfills[id(fill)] = (fill, fill_address(fill))
        return self.completion.cfill_item(known[1], c_arg(arg))

    def _prepare_python(self, fill: Any, arg: Any) -> Any:
        assert self.completion is not None
        self.check_fill(fill)  # the one check every backend makes of a Python fill (no async def)
        return self.completion.python_item(fill, arg)

    # -- adopted streams and awaited events (loop thread: no driver call) -----------------
    def adopt(self, stream: Any) -> CudaAdoptedQueue:
        handle, ordinal = stream_handle(stream)
        if ordinal is not None and ordinal != self.ordinal:
            raise ArigValueError(f"{safe_repr(stream)} is a stream of GPU {ordinal}; {self.name} is GPU {self.ordinal}")
        q = self._adopted.get(handle)
        if q is None:
            q = self._adopted[handle] = CudaAdoptedQueue(self.name, self._use_join_lane(), handle, stream)
        return q

    def _use_join_lane(self) -> int:
        """The join lane, from its first use on a lane of the timeline and of the native core's
        deliveries.  The one place a CUDA device's lane count grows: until something is joined,
        the timeline has the queues' lanes only (one queue's values need no ordering)."""
        if self.timeline.lanes <= self.join_lane:
            self.timeline.add_lane()  # first: a lane is delivered only once the timeline has it
            assert self.completion is not None
            self.completion.add_join_lane()
        return self.join_lane

    def adopted(self, handle: int) -> CudaAdoptedQueue | None:
        return self._adopted.get(handle)

    def prepare_adopted(self, q: AdoptedQueue, fill: Any, arg: Any) -> Any:
        """The item of a submission on an adopted queue: its fill on the user's stream, then the join."""
        assert self.completion is not None
        mine = self._adopted[q.handle]  # q is that queue: the device checked it
        if fill is None:
            item = mine.mark_item  # the loop's one step per marker: a join never changes
            if item is None:
                item = mine.mark_item = self.completion.join_item(_Join(q.handle, mine.join_event, True))
            return item
        join_event = mine.join_event
        if type(fill) in (Launch, Copy, _abi.Graph) or isinstance(fill, (int, ctypes._CFuncPtr)):  # type: ignore[attr-defined]
            raise ArigTypeError(
                f"an adopted queue takes Python fills and None, not a {type(fill).__name__}: launch on the stream in a Python fill, or submit to dev.queues"
            )
        self.check_fill(fill)
        return self.completion.python_item(_Join(q.handle, join_event, True, fill), arg)

    def event_slot(self, handle: int) -> Any:
        return ctypes.c_void_p(handle)

    def prepare_event(self, slot: Any) -> Any:
        """The item that makes the join lane wait for the event ``slot`` holds (recorded by its owner)."""
        self._use_join_lane()
        assert self.completion is not None
        return self.completion.join_item(_Join(0, slot, False))

    # -- the submit thread ---------------------------------------------------------
    def call_fill(self, qi: int, fill: Any, arg: Any, v: int) -> None:
        assert self.completion is not None
        self.completion.call_fill(self._streams[qi], fill, arg, v)

    def lanes(self) -> Any:
        assert self.completion is not None
        return self.completion.lanes()

    # -- the end -------------------------------------------------------------------
    def close(self) -> None:
        self.record._stop()  # graph calls in flight finish first; later ones are refused
        if self.completion is not None:
            self.completion.stop_thread()  # nothing is enqueued after this
        # Work still queued (after a hang, a stop timeout or an abandoned device)
        # runs once the GPU gets to it whenever the context outlives this device
        # (a loaded image's GPU state or another library holds it): it writes the
        # timeline words and runs host functions.  Those are never freed.
        if self.lost_cause() is None:
            for st in self._streams:  # only trailing host functions can remain: let them run
                lib.cuStreamSynchronize(st)
        queried = [lib.cuStreamQuery(st) for st in self._streams]
        idle = all(rc == 0 for rc in queried)
        if self.completion is not None:
            self.completion.close(idle)
        if not idle:
            never_free(self._words, self._stamp_module)
            self._words = self._stamp_module = 0
        if CUDA_ERROR_NOT_READY in queried:
            # Work that hung is still running: cuMemFree and the context's last
            # release would wait for it (libcuda synchronizes both), so stop
            # would block until it ends.  Keep the buffers and the reference.
            never_free(list(self._live), self.ctx)
            self._live.clear()
            self.ctx = 0
        self._release()

    def _release(self) -> None:
        """Give back everything; errors of a faulted context are ignored."""
        for q in self._adopted.values():  # the join events (a pending record is fine to destroy)
            if q.join_event.value:
                lib.cuEventDestroy_v2(q.join_event.value)
                q.join_event.value = 0
        for s in self._streams:
            lib.cuStreamDestroy_v2(s)
        self._streams = []
        for addr in list(self._live):
            self._free(addr)
        for m in list(self._images):  # unloaded at the GPU's next reclaim, not here:
            self._images.discard(m)  # stopping alone calls no CUDA destructor: a graph may still use the module
            self.gpu.release_module(m)
        if self.completion is not None and self.completion.open:
            self.completion.close(True)  # a failed open: nothing was enqueued
        if self._stamp_module:
            _stamp.unload(self._stamp_module)
            self._stamp_module = 0
        self.gate_host = 0  # the gates go with the words (none is waited on: every value was reached, or opened at the loss)
        if self._words:
            lib.cuMemFreeHost(self._words)
            self._words = 0
        lib.cuCtxSetCurrent(None)
        if self.ctx:
            lib.cuDevicePrimaryCtxRelease_v2(self.cudev)
            self.ctx = 0
