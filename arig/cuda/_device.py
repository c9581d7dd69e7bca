"""The CUDA device: a backend over libcuda's primary context.

Threads, and what each may do:

* the **submit thread** (``arig._submit``) makes the context current at open
  and is the only thread that runs fills, launches, copies, allocations and
  frees of the device;
* one **waiter thread** per queue sleeps in ``sem_timedwait`` (a libc call:
  the GIL is released) and reports reached values to the timeline;
* the **event loop** never calls libcuda.

Completion: after the last fill of a burst on a queue, the submit thread
enqueues ``cuStreamWriteValue64(word[q], v)`` (the GPU writes ``v`` into
pinned, mapped host memory once the queue's earlier work is done) and
``cuLaunchHostFunc(sem_post, sem[q])``.  The host function is libc's
``sem_post`` itself: no Python, no GIL, no lock a fill could hold, as the
seed demands.  The waiter wakes, reads the word and reports.  While values
are outstanding it also wakes every ``FAULT_POLL`` seconds to ask
``cuStreamQuery`` for an asynchronous fault, so a faulted context (whose
host functions never run) loses the device within that time.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections import deque
from ctypes import byref, c_char_p, c_int, c_size_t, c_uint, c_uint64, c_void_p
from typing import Any

import numpy as np

from .._errors import ArigTypeError, ArigValueError, OpenError
from .._memory import Buffer, Image
from ..device import Backend
from ._gpu import gpu_state
from . import _wake
from ._lib import CudaError, CudaUnavailable, check, lib

__all__ = ["CudaOpener", "CudaBackend", "count", "FILL"]

#: The prototype of a C fill: ``int fill(void *queue, void *arg, uint64_t v)``.
FILL = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_uint64)

#: Driver API version arig needs (12.4: cuModuleEnumerateFunctions, cuFuncGetParamInfo).
MIN_DRIVER = 12040
#: Seconds between fault checks while work is outstanding.
FAULT_POLL = 0.02
#: Spin only while at most this many values are outstanding on a queue (latency mode);
#: with more in flight, host functions arrive often enough (throughput mode).
SPIN_OUTSTANDING = 2
#: Completions predicted sooner than this are watched by the submit thread itself.
SHORT_SPIN = 25e-6
#: How early before the predicted completion the spin starts.
SPIN_LEAD = 15e-6
PR_SET_TIMERSLACK = 29
PR_SET_NAME = 15
#: Seconds between wake-ups while nothing is outstanding.
IDLE_POLL = 0.5
#: hang_ms on a GPU where no display watchdog runs (the seed's 30 s).
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

_libc = ctypes.CDLL(None, use_errno=True)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_libc.sem_init.argtypes = (c_void_p, c_int, c_uint)
_libc.sem_post.argtypes = (c_void_p,)
_libc.sem_timedwait.argtypes = (c_void_p, ctypes.POINTER(_Timespec))
_libc.sem_destroy.argtypes = (c_void_p,)
_SEM_POST = ctypes.cast(_libc.sem_post, c_void_p).value
_SEM_T = 64  # bytes; sem_t is 32 on x86-64 glibc, with room to spare
#: Timeline words (pinned memory) and semaphores of closed devices whose streams still had work queued.
_ORPHANS: list[tuple[Any, ...]] = []


def _sem_wait(sem: int, ts: _Timespec, timeout: float) -> bool:
    """``sem_timedwait`` for ``timeout`` seconds (the GIL is released); True if posted."""
    deadline = time.time() + timeout
    ts.tv_sec = int(deadline)
    ts.tv_nsec = int((deadline - ts.tv_sec) * 1e9)
    return bool(_libc.sem_timedwait(sem, byref(ts)) == 0)


def _name_thread(name: str) -> None:
    """The OS thread's name (``top -H``, /proc/self/task/*/comm), 15 bytes at most."""
    _libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


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


class _CFill:
    """A C fill, called through ctypes without the GIL."""

    __slots__ = ("fn",)

    def __init__(self, fn: Any) -> None:
        self.fn = fn


def _c_arg(arg: Any) -> int | None:
    if arg is None or isinstance(arg, int):
        return arg
    if isinstance(arg, Buffer):
        return arg.address
    if isinstance(arg, ctypes._Pointer):  # type: ignore[attr-defined]
        return ctypes.cast(arg, c_void_p).value
    if isinstance(arg, (ctypes._SimpleCData, ctypes.Structure, ctypes.Array, ctypes.Union)):  # type: ignore[attr-defined]
        return ctypes.addressof(arg)
    raise ArigTypeError(f"a C fill's arg must be None, an int address, a Buffer or a ctypes object, got {type(arg).__name__}")


class CudaOpener:
    """Opener of GPU ``index`` through libcuda (name ``"CUDA"`` or ``"CUDA:i"``)."""

    def __init__(self, index: int, queues: int, hang_ms: int | None, spin_us: int = 40, sched: str | None = None) -> None:
        self.index = index
        self.sched = sched
        self.spin_us = spin_us
        self.name = "CUDA" if index == 0 else f"CUDA:{index}"
        self.queues = queues
        self.hang_ms = hang_ms

    def make(self) -> CudaBackend:
        return CudaBackend(self)

    def __repr__(self) -> str:
        return f"arig.cuda.gpu({self.index})"


class CudaBackend(Backend):
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
        self._spin_s = opener.spin_us * 1e-6
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
        self._sems: list[Any] = []
        self._live: dict[int, str] = {}
        self._images: set[int] = set()
        self._modules_of: dict[int, int] = {}  # CUfunction -> CUmodule, for images this device loaded
        self._closing = False
        self._closed = False
        self._efd = self._reader_fd = -1
        self._waiters: list[threading.Thread] = []
        _name_thread("arig-submit")
        try:
            check(lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
            _relaxed_capture_mode()  # this submit thread's own calls must not break users' captures
            self._check_context()
            self.gpu.reclaim()  # graphs collected since the last operation on this GPU
            self._describe(ver.value, opener)
            self._make_queues(opener.queues)
        except BaseException:
            self._release()
            raise
        from .. import cuda_abi

        self.record = cuda_abi.CudaAbi._for_backend(self)
        self.capabilities = dict([cuda_abi.declare(self.record)])

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

    def _make_queues(self, n: int) -> None:
        for _ in range(n):
            st = c_void_p()
            check(lib.cuStreamCreate(byref(st), CU_STREAM_NON_BLOCKING), "cuStreamCreate")
            self._streams.append(st.value or 0)
        self.queue_handles = list(self._streams)
        # One 8-byte timeline word per queue in pinned, mapped host memory.
        p = c_void_p()
        check(lib.cuMemHostAlloc(byref(p), 8 * n, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc(timeline)")
        self._words = p.value or 0
        ctypes.memset(self._words, 0, 8 * n)
        d = c_uint64()
        check(lib.cuMemHostGetDevicePointer_v2(byref(d), self._words, 0), "cuMemHostGetDevicePointer")
        self._word_dev = d.value
        self._word_views = [c_uint64.from_address(self._words + 8 * q) for q in range(n)]
        for _ in range(n):
            sem = ctypes.create_string_buffer(_SEM_T)
            if _libc.sem_init(sem, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "sem_init")
            self._sems.append(sem)
        self._signalled = [0] * n  # last value signalled per queue (submit thread)
        self._marked = [0] * n  # last value whose word write is enqueued (submit thread)
        self._seen = [0] * n  # highest value reported to the timeline
        self._kicks = [0] * n  # latency-mode kicks, so the waiter spins once per kick
        self._kick_v = [0] * n
        self._kick_t = [0.0] * n
        self._est = [0.0] * n  # predicted seconds from a signal to its completion
        self._oversleep = [0.0] * n  # how late the waiter's timed waits end
        self.spin_stats = [0, 0, 0]  # spins that saw the completion, that ended before it, that began after it
        self._fallback: list[deque[int]] = [deque() for _ in range(n)]
        # Stream memory operations write the word from the GPU; without them
        # the waiter pairs each sem_post with a value recorded at signal time.
        self._memops = lib.has("cuStreamWriteValue64_v2") and lib.cuStreamWriteValue64_v2(self._streams[0], self._word_dev, 0, 0) == 0
        check(lib.cuStreamSynchronize(self._streams[0]), "cuStreamSynchronize")
        # The GIL-free helper wakes the loop through an eventfd; it needs the words.
        self._helper = _wake.load() if self._memops else None
        self._efd = -1
        if self._helper is not None:
            self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            self._sigs = [_wake.Signal(self._efd, 0, 0) for _ in range(n)]
            self._hostfn = ctypes.cast(self._helper.arig_host_signal, c_void_p).value
        self._facts["stream_memops"] = self._memops
        self._facts["completion"] = "eventfd (host function and spin in C)" if self._helper else "sem_post + waiter thread"

    def bind(self, timeline: Any, post: Any) -> None:
        super().bind(timeline, post)
        if self._helper is not None:
            self._loop = timeline._loop
            self._loop.add_reader(self._efd, self._on_wake)  # bind runs on the loop thread
            self._reader_fd = self._efd
        for q in range(len(self._streams)):
            t = threading.Thread(target=self._wait_loop, args=(q,), name=f"arig-cuda-wait-{self.name}-{q}", daemon=True)
            t.start()
            self._waiters.append(t)

    def begin_stop(self) -> None:
        self.record._begin_stop()

    def detach(self) -> None:
        if self._reader_fd >= 0:
            try:
                self._loop.remove_reader(self._reader_fd)
            except (RuntimeError, ValueError):  # the loop is closed
                pass
            self._reader_fd = -1
        if self._efd >= 0 and self._closed:  # never while a host function may still write it
            os.close(self._efd)
            self._efd = -1

    def _on_wake(self) -> None:
        """The eventfd is readable (loop thread): read the words the GPU wrote."""
        try:
            os.read(self._efd, 8)
        except (BlockingIOError, OSError):
            pass
        words, seen = self._word_views, self._seen
        for q in range(len(words)):
            v = words[q].value
            if v > seen[q]:
                seen[q] = v
                t = self._sigs[q].t_ns
                self.timeline.report_local(q, v, t * 1e-9 if t else None)

    def check_fill(self, fill: Any) -> Any:
        if isinstance(fill, int) and not isinstance(fill, bool):
            if fill == 0:
                raise ArigValueError("a C fill's address must not be 0")
            return _CFill(FILL(fill))
        if isinstance(fill, ctypes._CFuncPtr):  # type: ignore[attr-defined]
            if fill._restype_ is not c_int or tuple(fill._argtypes_ or ()) != (c_void_p, c_void_p, c_uint64):  # type: ignore[attr-defined]
                raise ArigTypeError("a C fill must have the prototype arig.cuda_abi.FILL: int fill(void *queue, void *arg, uint64_t v)")
            return _CFill(fill)
        return super().check_fill(fill)

    def call_fill(self, qi: int, fill: Any, arg: Any, v: int) -> None:
        stream = self._streams[qi]
        if type(fill) is _CFill:
            rc = fill.fn(stream, _c_arg(arg), v)
        else:
            rc = fill(stream, arg, v)
            if rc is None:
                return
            if not isinstance(rc, int) or isinstance(rc, bool):
                raise ArigTypeError(f"fill returned {rc!r}; a fill returns None/0 or a CUresult")
        if rc:
            raise CudaError.of(rc, f"fill of value {v}")

    def mark(self, qi: int, v: int) -> None:
        # The GPU writes v once the fill's work is done: no host function, no
        # stream stall.  Progress shows between the burst's host functions
        # (the waiter and the loop read the word), also to the hang watchdog.
        if self._memops:
            check(lib.cuStreamWriteValue64_v2(self._streams[qi], self._word_dev + 8 * qi, v, 0), "cuStreamWriteValue64")
        self._marked[qi] = v

    def signal(self, qi: int, v: int) -> None:
        if self._helper is not None:
            check(lib.cuLaunchHostFunc(self._streams[qi], self._hostfn, ctypes.addressof(self._sigs[qi])), "cuLaunchHostFunc")
        else:
            if not self._memops:
                self._fallback[qi].append(v)
            check(lib.cuLaunchHostFunc(self._streams[qi], _SEM_POST, ctypes.addressof(self._sems[qi])), "cuLaunchHostFunc")
        idle = self._seen[qi] >= self._signalled[qi]  # the waiter may be in its long idle sleep
        self._signalled[qi] = v
        latency = self._spin_s > 0 and self._memops and v - self._seen[qi] <= SPIN_OUTSTANDING
        if latency and self._helper is not None and self._est[qi] < SHORT_SPIN:
            latency = False
            if self._spin_here(qi, v):  # short work: watched here rather than by the waiter
                return  # done and told: nothing outstanding for the waiter to poll
        if latency:
            self._kick_v[qi] = v
            self._kick_t[qi] = time.perf_counter()
            self._kicks[qi] += 1
        if latency or idle:
            _libc.sem_post(self._sems[qi])  # the waiter spins (_spin) or starts polling for faults

    def _spin_here(self, qi: int, v: int) -> bool:
        """The submit thread watches a completion predicted within ``SHORT_SPIN``
        (in C, without the GIL), saving the waiter thread's wake-up."""
        t_kick, est = time.perf_counter(), self._est[qi]
        sig, word = self._sigs[qi], self._word_views[qi]
        window = est + self._spin_s
        assert self._helper is not None
        got = self._helper.arig_spin(ctypes.addressof(word), v - 1, int(window * 1e9), self._efd, ctypes.addressof(sig) + 8)
        if got >= v:
            self.spin_stats[0] += 1
            d = sig.t_ns * 1e-9 - t_kick
            self._est[qi] = d if est == 0.0 else 0.8 * est + 0.2 * d
            return True
        self.spin_stats[1] += 1
        self._est[qi] = max(est, window)
        return False

    # -- the waiter thread ---------------------------------------------------------
    def _wait_loop(self, qi: int) -> None:
        """Poll for asynchronous faults while work is outstanding; spin after a
        latency-mode kick; without the helper, also report completions."""
        _name_thread(f"arig-wait-{qi}")
        lib.cuCtxSetCurrent(self.ctx)
        _relaxed_capture_mode()  # its cuStreamQuery must not invalidate a user's GLOBAL capture
        _libc.prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0)  # µs-precise timed waits for the spin's sleep
        sem = ctypes.addressof(self._sems[qi])
        stream = self._streams[qi]
        ts = _Timespec()
        kicks = 0
        helper = self._helper is not None
        while not self._closing:
            k = self._kicks[qi]
            if k != kicks:  # checked before sleeping: a spin's own sleep may have taken the kick's post
                kicks = k
                if self._kick_v[qi] > self._seen[qi]:
                    self._spin(qi, sem, ts)
                if not helper:
                    self._report_fallback(qi, False)
                continue
            outstanding = self._seen[qi] < self._marked[qi]
            woke = _sem_wait(sem, ts, FAULT_POLL if outstanding else IDLE_POLL)
            if self._closing:
                return
            if not helper:
                self._report_fallback(qi, woke)
            if not woke and self._seen[qi] < self._marked[qi]:
                rc = lib.cuStreamQuery(stream)
                if rc not in (0, CUDA_ERROR_NOT_READY):
                    self.timeline.fail_threadsafe(CudaError.of(rc, f"work on queue {qi} of {self.name} (found by cuStreamQuery)"))
                    return
                if helper and self._word_views[qi].value > self._seen[qi]:
                    os.eventfd_write(self._efd, 1)  # progress between host functions: let the loop read it

    def _report_fallback(self, qi: int, woke: bool) -> None:
        if self._memops:
            v = self._word_views[qi].value
        elif woke and self._fallback[qi]:
            v = self._fallback[qi].popleft()
        else:
            return
        if v > self._seen[qi]:
            self._seen[qi] = v
            self.timeline.report(qi, v)

    def _spin(self, qi: int, sem: int, ts: _Timespec) -> None:
        """Watch the timeline word around the predicted completion of a short queue.

        A host function runs 25-55 µs after the work it follows; the GPU's
        own write of the word is seen at once.  So while one or two values are
        outstanding, sleep until shortly before the completion predicted from
        earlier ones, then watch the word for at most ``spin_us``: in C without
        the GIL where the helper is built (it wakes the loop's eventfd itself),
        else in Python yielding the CPU between reads.  A miss moves the
        prediction past the window; the host function stays the backstop.
        """
        target, t_kick, est = self._kick_v[qi], self._kick_t[qi], self._est[qi]
        word = self._word_views[qi]
        now = time.perf_counter()
        start = t_kick + est - SPIN_LEAD
        wake_at = start - self._oversleep[qi]  # timed waits end late, on a VM by tens of µs
        if wake_at - now > SPIN_LEAD:
            if not _sem_wait(sem, ts, wake_at - now):  # a post (the next kick, a host function) ends it early
                now = time.perf_counter()
                self._oversleep[qi] = 0.8 * self._oversleep[qi] + 0.2 * max(0.0, now - wake_at)
            now = time.perf_counter()
        if word.value >= target:  # done before the window opened: predict earlier next time
            self._est[qi] = max(0.0, est - max(2e-6, 0.05 * est))
            self.spin_stats[2] += 1
            if self._seen[qi] < target:  # tell the loop now, not when the host function runs
                if self._helper is not None:
                    self._sigs[qi].t_ns = time.perf_counter_ns()
                    os.eventfd_write(self._efd, 1)
                else:
                    self._report_fallback(qi, False)
            return
        end = max(now, start) + self._spin_s
        if self._helper is not None:
            sig = self._sigs[qi]
            v = self._helper.arig_spin(ctypes.addressof(word), target - 1, int((end - now) * 1e9), self._efd, ctypes.addressof(sig) + 8)
            hit, seen_at = v >= target, sig.t_ns * 1e-9
        else:
            while True:
                v = word.value
                if v >= target or now > end or self._closing:
                    break
                os.sched_yield()
                now = time.perf_counter()
            hit, seen_at = v >= target, now
            if v > self._seen[qi]:
                self._seen[qi] = v
                self.timeline.report(qi, v, now)
        self.spin_stats[0 if hit else 1] += 1
        if hit:
            d = seen_at - t_kick
            self._est[qi] = d if est == 0.0 else 0.8 * est + 0.2 * d
        else:
            self._est[qi] = max(est, end - t_kick)

    # -- memory ------------------------------------------------------------------
    def alloc(self, nbytes: int, kind: str | None) -> Buffer:
        kind = kind or "device"
        if kind == "device":
            d = c_uint64()
            check(lib.cuMemAlloc_v2(byref(d), nbytes), f"cuMemAlloc({nbytes})")
            addr = d.value
            host = None
        elif kind in ("pinned", "mapped"):
            p = c_void_p()
            flags = CU_MEMHOSTALLOC_PORTABLE | (CU_MEMHOSTALLOC_DEVICEMAP if kind == "mapped" else 0)
            check(lib.cuMemHostAlloc(byref(p), nbytes, flags), f"cuMemHostAlloc({nbytes})")
            addr = p.value or 0
            host = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(addr))
        else:
            raise ArigValueError(f"kind must be 'device', 'pinned' or 'mapped', not {kind!r}")
        self._live[addr] = kind
        return Buffer(self.name, kind, addr, nbytes, _Release(self.post, self._free, addr), host=host, cuda_device_memory=kind == "device")

    def _free(self, addr: int) -> None:
        kind = self._live.pop(addr, None)
        if kind == "device":
            lib.cuMemFree_v2(addr)
        elif kind is not None:
            lib.cuMemFreeHost(addr)

    def copy_fill(self, buf: Buffer, array: np.ndarray, to_device: bool) -> tuple[Any, Any]:
        return (_h2d if to_device else _d2h), (buf.address, array.ctypes.data, array.nbytes)

    # -- images ------------------------------------------------------------------
    def load(self, image: bytes) -> Image:
        self.gpu.reclaim()
        data = image
        if not (data[:4] == b"\x7fELF" or data[:4] == b"\x50\xed\x55\xba"):
            data = data + b"\0"  # PTX is text: libcuda reads it up to a NUL
        buf = ctypes.create_string_buffer(data, len(data))
        mod = c_void_p()
        check(lib.cuModuleLoadData(byref(mod), buf), "cuModuleLoadData")
        m = mod.value or 0
        try:
            functions, layouts = _enumerate(m)
        except BaseException:
            lib.cuModuleUnload(m)
            raise
        self.gpu.add_module(m)
        self._images.add(m)
        img = Image(self.name, m, functions, _Release(self.post, self._unload, m))
        img.layouts = layouts  # type: ignore[attr-defined]
        for f, layout in zip(functions.values(), layouts.values()):
            _LAYOUTS[f] = layout
            self._modules_of[f] = m
        return img

    def module_of(self, func: int) -> int | None:
        """The module of a function this device loaded, or None."""
        return self._modules_of.get(func)

    def lost_cause(self) -> BaseException | None:
        tl = getattr(self, "timeline", None)
        return None if tl is None else tl.cause

    def _unload(self, module: int) -> None:
        if module in self._images:
            self._images.discard(module)
            for f in [f for f, m in self._modules_of.items() if m == module]:
                del self._modules_of[f]  # a later module at the same address is another image
                _LAYOUTS.pop(f, None)
            self.gpu.release_module(module)
            self.gpu.reclaim()

    # -- the end -------------------------------------------------------------------
    def close(self) -> None:
        self.record._stop()  # graph calls in flight finish first; later ones are refused
        self._closing = True
        for sem in self._sems:
            _libc.sem_post(sem)
        for t in self._waiters:
            t.join(timeout=2.0)
        # Work still queued (after a hang, a stop timeout or an abandoned device)
        # runs once the GPU gets to it whenever the context outlives this device
        # (a loaded image's GPU state or another library holds it): it writes the
        # timeline words and sem_posts the semaphores.  Those are never freed.
        if self.lost_cause() is None:
            for st in self._streams:  # only trailing host functions can remain: let them run
                lib.cuStreamSynchronize(st)
        queried = [lib.cuStreamQuery(st) for st in self._streams]
        if any(rc != 0 for rc in queried):
            _ORPHANS.append((self._words, self._sems, getattr(self, "_sigs", None), self._efd))
            self._words, self._sems, self._efd = 0, [], -1  # the eventfd stays open too: never reused
        if CUDA_ERROR_NOT_READY in queried:
            # Work that hung is still running: cuMemFree and the context's last
            # release would wait for it (libcuda synchronizes both), so stop
            # would block until it ends.  Keep the buffers and the reference.
            _ORPHANS.append((list(self._live), self.ctx))
            self._live.clear()
            self.ctx = 0
        self._release()
        self._closed = True

    def _release(self) -> None:
        """Give back everything; errors of a faulted context are ignored."""
        for s in self._streams:
            lib.cuStreamDestroy_v2(s)
        self._streams = []
        for addr in list(self._live):
            self._free(addr)
        for m in list(self._images):  # unloaded at the GPU's next reclaim, not here:
            self._images.discard(m)  # stopping alone calls no CUDA destructor (seed)
            self.gpu.release_module(m)
        if self._words:
            lib.cuMemFreeHost(self._words)
            self._words = 0
        for sem in self._sems:
            _libc.sem_destroy(sem)
        lib.cuCtxSetCurrent(None)
        if self.ctx:
            lib.cuDevicePrimaryCtxRelease_v2(self.cudev)
            self.ctx = 0


class _Release:
    """A finalizer's callable that holds no reference to its buffer or image."""

    __slots__ = ("post", "fn", "handle")

    def __init__(self, post: Any, fn: Any, handle: int) -> None:
        self.post, self.fn, self.handle = post, fn, handle

    def __call__(self) -> None:
        self.post(self.fn, self.handle)


def _h2d(stream: int, arg: tuple[int, int, int], v: int) -> int:
    return lib.cuMemcpyHtoDAsync_v2(arg[0], arg[1], arg[2], stream)


def _d2h(stream: int, arg: tuple[int, int, int], v: int) -> int:
    return lib.cuMemcpyDtoHAsync_v2(arg[1], arg[0], arg[2], stream)


#: CUfunction -> its parameters as (offset, size), for checking argument buffers off the driver.
_LAYOUTS: dict[int, tuple[tuple[int, int], ...]] = {}


def _enumerate(module: int) -> tuple[dict[str, int], dict[str, tuple[tuple[int, int], ...]]]:
    n = c_uint()
    check(lib.cuModuleGetFunctionCount(byref(n), module), "cuModuleGetFunctionCount")
    funcs = (c_void_p * n.value)()
    if n.value:
        check(lib.cuModuleEnumerateFunctions(funcs, n.value, module), "cuModuleEnumerateFunctions")
    names: dict[str, int] = {}
    layouts: dict[str, tuple[tuple[int, int], ...]] = {}
    for f in funcs:
        s = c_char_p()
        check(lib.cuFuncGetName(byref(s), f), "cuFuncGetName")
        name = (s.value or b"").decode()
        # The enumerated handle may be a CUkernel-backed function: take the
        # module's own CUfunction for it, which is what launches expect.
        h = c_void_p()
        check(lib.cuModuleGetFunction(byref(h), module, name.encode()), f"cuModuleGetFunction({name})")
        names[name] = h.value or 0
        layout = []
        for k in range(4096):
            off, size = c_size_t(), c_size_t()
            if lib.cuFuncGetParamInfo(h, k, byref(off), byref(size)) != 0:
                break
            layout.append((off.value, size.value))
        layouts[name] = tuple(layout)
    return names, layouts


def layout_of(func: int) -> tuple[tuple[int, int], ...] | None:
    """The parameter layout of a loaded CUfunction, recorded at load (None if unknown)."""
    return _LAYOUTS.get(func)

