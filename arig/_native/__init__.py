"""The native core (``core.c`` and the lane operations beside it): a device's submit and completion thread in C.

The library is plain C (no Python headers), built when arig is installed
(``pip install .`` compiles it, optionally, as ``libarig_core.so`` beside this
file: a plain shared library, tied to no CPython version) and loaded here
with ctypes.  Where it was not built (no C compiler) or ``ARIG_PURE=1``,
``library()`` returns None and devices use the pure-Python path; ``status()``
says which is active and why.

Which thread may call what (see ``core.h`` and ``core_api.c`` for the C side):

* the event loop: ``Core.push``, ``pending``, ``want_space``, ``arm``, ``hold``,
  ``reached``, ``fault``, ``due``, and ``loop_spin``; these go through
  ``ctypes.PyDLL``, which keeps the GIL: each takes well under a
  microsecond, and releasing the GIL for it would let another thread take
  it in between;
* the device's Python submit thread: ``Core.create``, ``py_begin`` (blocks,
  through ``ctypes.CDLL``: the GIL is released), ``py_end``, ``close``.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import os
import sys
import threading
from ctypes import c_int, c_int32, c_int64, c_uint32, c_uint64, c_void_p, POINTER
from typing import Any

from .. import _env, _log

__all__ = ["library", "status", "Core", "CudaTable", "LaunchRecord", "NvTemplate", "NvSpec", "NvLaunchRecord", "NV_ERRORS", "CFILL", "LAUNCH", "GRAPH", "H2D", "D2H", "PY", "STATS", "GAUGES"]

ABI = 8
CFILL, LAUNCH, GRAPH, H2D, D2H, PY, MARK, JOIN = 1, 2, 3, 4, 5, 6, 7, 8
#: Counters of ``Core.stats()``, in order.
STATS = ("eventfd_writes", "host_functions", "futex_wakes", "spin_hits", "spin_misses", "early", "items", "prewakes", "queries", "prewakes_again", "py_gates", "event_waits", "mode_turns", "close_watches", "nudges")
#: Gauges after the counters in ``Core.stats()`` (not counts: a probe prints them as they are).
GAUGES = ("wake_short_ns", "wake_mid_ns", "wake_long_ns", "sleep_over_ns")
#: How long the submit thread spins, holding the GIL, for the native thread to reach a Python
#: fill before it waits with the GIL released (a release hands the GIL to the loop, and taking it
#: back waits for the loop to let go of it).
PY_READY_SPIN_NS = 5_000
#: A Python fill that raised: it reports its own exception to the timeline.
PY_FAILED = -1

_DIR = os.path.dirname(os.path.abspath(__file__))
_lock = threading.Lock()
_libs: tuple[ctypes.PyDLL, ctypes.CDLL] | None = None
_why: str | None = None
_path: str | None = None
_tried = False


class CudaTable(ctypes.Structure):
    """``struct arig_cuda``: the libcuda functions the native thread calls (addresses)."""

    _fields_ = [
        (name, c_void_p)
        for name in (
            "ctx_set_current", "launch_kernel", "write_value64", "launch_host_func", "stream_query",
            "graph_launch", "memcpy_htod", "memcpy_dtoh", "exchange_capture_mode",
            "event_create", "event_record", "stream_wait_event", "event_synchronize", "event_destroy",
        )
    ]  # fmt: skip

    #: field -> the libcuda symbol it holds.
    SYMBOLS = {
        "ctx_set_current": "cuCtxSetCurrent",
        "launch_kernel": "cuLaunchKernel",
        "write_value64": "cuStreamWriteValue64_v2",
        "launch_host_func": "cuLaunchHostFunc",
        "stream_query": "cuStreamQuery",
        "graph_launch": "cuGraphLaunch",
        "memcpy_htod": "cuMemcpyHtoDAsync_v2",
        "memcpy_dtoh": "cuMemcpyDtoHAsync_v2",
        "exchange_capture_mode": "cuThreadExchangeStreamCaptureMode",
        "event_create": "cuEventCreate",
        "event_record": "cuEventRecord",
        "stream_wait_event": "cuStreamWaitEvent",
        "event_synchronize": "cuEventSynchronize",
        "event_destroy": "cuEventDestroy_v2",
    }


class LaunchRecord(ctypes.Structure):
    """``struct arig_launch``: a prepared kernel launch that the native thread reads."""

    _fields_ = [
        ("func", c_void_p),
        ("grid", c_uint32 * 3),
        ("block", c_uint32 * 3),
        ("shared", c_uint32),
        ("pad", c_uint32),
        ("extra", c_void_p),
    ]


class NvTemplate(ctypes.Structure):
    """``struct arig_nv_tmpl``: pushbuffer words and where numbers are patched in (see nv_channel.h)."""

    WORDS = 24
    _fields_ = [("n", c_uint32), ("ix", c_int32 * 5), ("w", c_uint32 * 24)]

    @classmethod
    def of(cls, words: list[int], a: tuple[int, int] | None = None, b: tuple[int, int] | None = None, c: int | None = None) -> NvTemplate:
        """``words`` with the word indices of a's (lo, hi), b's (lo, hi) and c's 32 bits."""
        if len(words) > cls.WORDS:
            raise ValueError(f"a template holds {cls.WORDS} words, not {len(words)}")
        t = cls()
        t.n = len(words)
        for i, w in enumerate(words):
            t.w[i] = w
        ix = [*(a or (-1, -1)), *(b or (-1, -1)), -1 if c is None else c]
        for i, x in enumerate(ix):
            t.ix[i] = x
        return t


class NvSpec(ctypes.Structure):
    """``struct arig_nv_spec``: one NV queue's memory, channel and templates (host addresses)."""

    _fields_ = [
        *((name, c_uint64) for name in ("pb", "pb_va", "pb_size", "args", "args_va", "args_size",
                                         "gpfifo", "gp_put", "doorbell", "progress", "timeline", "notifier")),
        ("entries", c_uint32), ("token", c_uint32), ("is_copy", c_uint32), ("pad", c_uint32),
        ("notifier_base", ctypes.c_uint8 * 16),
        *((name, NvTemplate) for name in ("rel_tl", "rel_prog", "wait_prog", "wait_tl", "intr", "launch", "copy", "release", "acquire")),
    ]  # fmt: skip


class NvLaunchRecord(ctypes.Structure):
    """``struct arig_nv_launch_rec``: a prepared NV launch that the native thread reads."""

    _fields_ = [
        ("image", c_void_p), ("bytes", c_uint32), ("qmd_offset", c_uint32),
        ("lo_word", c_uint32), ("hi_word", c_uint32), ("hi_mask", c_uint32), ("pad", c_uint32), ("key", c_uint64),
    ]  # fmt: skip


#: The NV functions' failure codes (nv_channel.h's NVE_*): what each means.
NV_ERRORS = {
    -100: "the channel's error notifier changed",
    -101: "a wait for the GPU (ring room) ran out of time",
    -102: "the device was lost or is stopping",
    -103: "a bad argument (an address out of range or misaligned, a malformed launch)",
    -104: "an item the NV device does not run",
}


def _source_hash() -> str:
    """The digest setup.py builds into the library: every .c and .h beside this file, by name and content."""
    h = hashlib.sha256()
    paths = sorted(glob.glob(os.path.join(_DIR, "*.c")) + glob.glob(os.path.join(_DIR, "*.h")))
    try:
        for path in paths:
            with open(path, "rb") as f:
                h.update(os.path.basename(path).encode() + b"\0" + f.read() + b"\0")
    except OSError:
        return ""
    return h.hexdigest()[:16] if paths else ""


#: The library's file names (setup.py's ``LIBRARY``).
_NAMES = ("libarig_core.so", "libarig_core.dylib")


def _candidates() -> list[str]:
    """Built libraries: beside this file first, then arig's installed copy (a
    source checkout run from its root imports its own ``arig`` package, while
    ``pip install .`` built the library into site-packages)."""
    dirs = [_DIR]
    for entry in sys.path:
        d = os.path.join(entry or ".", "arig", "_native")
        if os.path.abspath(d) != _DIR and os.path.isdir(d):
            dirs.append(d)
    out = []
    for d in dirs:
        out += [p for name in _NAMES if os.path.isfile(p := os.path.join(d, name))]
    return out


def _find() -> str | None:
    return _path


def _bind(path: str) -> tuple[ctypes.PyDLL, ctypes.CDLL]:
    fast = ctypes.PyDLL(path)  # loop-side: the GIL stays held
    slow = ctypes.CDLL(path)  # blocking: the GIL is released
    P = c_void_p
    protos: dict[str, tuple[Any, tuple[Any, ...]]] = {
        "arig_core_abi": (c_int, ()),
        "arig_core_sizeof_cuda": (ctypes.c_size_t, ()),
        "arig_core_sizeof_launch": (ctypes.c_size_t, ()),
        "arig_core_create": (P, (P, P, c_int, P, P, P, c_int, c_int, c_uint64, c_int64, c_int64, c_int64, c_int)),
        "arig_core_start": (c_int, (P,)),
        "arig_core_tune": (None, (P, c_int, c_int64)),
        "arig_core_loop_window": (None, (P, c_int64, P)),
        "arig_core_py_short": (None, (P, c_int64)),
        "arig_core_loop_lead": (None, (P, c_int64)),
        "arig_core_wake_seed": (None, (P, c_int, c_int64)),
        "arig_core_push": (c_int, (P, c_uint32, c_uint64, c_uint64, c_uint64, c_uint64)),
        "arig_core_addr": (P, (P, c_int, c_int)),
        "arig_core_want_space": (None, (P,)),
        "arig_core_arm": (None, (P,)),
        "arig_core_hold": (None, (P, c_int)),
        "arig_core_fault": (c_int32, (P, POINTER(c_uint32), POINTER(c_uint64))),
        "arig_core_due": (c_uint64, (P,)),
        "arig_core_loop_spin": (c_int, (P, P, c_int64)),
        "arig_core_py_begin": (c_int, (P, c_uint64)),
        "arig_core_py_ready": (c_int, (P, c_uint64, c_int64)),
        "arig_core_py_end": (None, (P, c_uint64, c_int32)),
        "arig_core_stop": (None, (P,)),
        "arig_core_abort": (None, (P,)),
        "arig_core_destroy": (None, (P,)),
        "arig_core_stats": (None, (P, P, c_int)),
        "arig_core_create_nv": (P, (P, c_int, c_int, c_uint64, c_int64, c_int64, c_int64, c_int)),
        "arig_core_cuda_stamps": (c_int, (P, P, c_uint64, c_uint64, c_uint64, c_uint64)),
        "arig_core_cuda_waiter": (c_int, (P,)),
        "arig_core_gpu_time": (c_uint64, (P, c_int)),
        "arig_nv_create": (P, (P,)),
        "arig_nv_pair": (None, (P, P)),
        "arig_nv_destroy": (None, (P,)),
        "arig_nv_kick": (c_int, (P, c_uint64, c_int, c_int, c_uint64)),
        "arig_nv_put": (c_int, (P, P, c_uint32)),
        "arig_nv_launch": (c_int, (P, P)),
        "arig_nv_copy": (c_int, (P, c_uint64, c_uint64, c_uint64)),
        "arig_nv_release": (c_int, (P, c_uint64, c_uint64)),
        "arig_nv_acquire": (c_int, (P, c_uint64, c_uint64)),
        "arig_nv_wait": (c_int, (P, c_uint64)),
        "arig_nv_seq": (c_uint64, (P,)),
        "arig_nv_staging": (c_int, (P, c_uint64, c_uint64, c_uint32)),
        "arig_nv_stage_in": (c_int, (P, c_uint64, P, c_uint64)),
        "arig_nv_stage_out": (c_int, (P, P, c_uint64, c_uint64)),
        "arig_nv_sizeof_spec": (ctypes.c_size_t, ()),
        "arig_nv_sizeof_launch": (ctypes.c_size_t, ()),
        "arig_nv_patch": (c_uint32, (P, c_uint64, c_uint64, c_uint32, P)),
        "arig_nv_abi_record": (P, ()),
    }
    for lib in (fast, slow):
        for name, (res, args) in protos.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
    fast.arig_core_source.restype = ctypes.c_char_p
    built_from = (fast.arig_core_source() or b"").decode()
    if built_from != _source_hash():
        raise OSError(f"{path} was built from other C sources ({built_from}, this one is {_source_hash()}): rebuild it (pip install .)")
    if fast.arig_core_abi() != ABI:
        raise OSError(f"{path} speaks core ABI {fast.arig_core_abi()}, arig needs {ABI}: reinstall arig")
    if (fast.arig_core_sizeof_cuda() != ctypes.sizeof(CudaTable) or fast.arig_core_sizeof_launch() != ctypes.sizeof(LaunchRecord)
            or fast.arig_nv_sizeof_spec() != ctypes.sizeof(NvSpec) or fast.arig_nv_sizeof_launch() != ctypes.sizeof(NvLaunchRecord)):
        raise OSError(f"{path} was built for other structure layouts: reinstall arig")
    return fast, slow


def library() -> tuple[ctypes.PyDLL, ctypes.CDLL] | None:
    """The native core's (loop-side, blocking) bindings, or None: see ``status()``."""
    global _libs, _why, _tried
    if _env.PURE:
        _log.fallback("the pure-Python submit and completion path (ARIG_PURE=1)")
        return None
    with _lock:
        if not _tried:
            global _path
            _tried = True
            reasons = []
            for path in _candidates():
                try:
                    _libs, _path = _bind(path), path
                    break
                except (OSError, AttributeError) as exc:
                    reasons.append(str(exc))
            if _libs is None:
                _why = "; ".join(reasons) or (
                    "the native core is not in this install (a pure wheel or build, or no C compiler at install): "
                    "install arig's native wheel, or from source with a C compiler"
                )
                _log.fallback(f"the pure-Python submit and completion path: {_why}")
        return _libs


def status() -> str:
    """Which submit and completion path devices take, and why."""
    if _env.PURE:
        return "pure Python (ARIG_PURE=1)"
    if library() is not None:
        return f"native ({_find()})"
    return f"pure Python ({_why})"


class Core:
    """One device's native core: its ring, its thread and its lanes.

    A CUDA device gives libcuda's table, its context and streams; an NV device
    gives ``table`` None and its queues (``arig_nvq`` pointers) as streams.

    Made and closed on the device's Python submit thread; see the module
    docstring for which thread calls which method.
    """

    def __init__(
        self,
        table: CudaTable | None,
        ctx: int,
        streams: list[int],
        words: list[int],
        word_devs: list[int],
        memops: bool,
        efd: int,
        spin_ns: int,
        idle_ns: int,
        lead_ns: int = 15_000,
        prewake: bool = True,
        cap: int = 1 << 16,
    ) -> None:
        libs = library()
        if libs is None:
            raise RuntimeError(status())
        self._fast, self._slow = libs
        n = len(streams)
        self._table = table  # the core copies it, but thunks it points to must live
        self._nlanes = n
        def arr(t: Any, xs: list[int]) -> Any:
            return (t * n)(*xs)

        if table is None:  # an NV device: streams are its queues (arig_nvq pointers), words their timeline words
            ptr = self._fast.arig_core_create_nv(arr(c_void_p, streams), n, efd, cap, spin_ns, idle_ns, lead_ns, int(prewake))
        else:
            ptr = self._fast.arig_core_create(
                ctypes.byref(table), ctx, n, arr(c_void_p, streams), arr(c_uint64, words), arr(c_uint64, word_devs),
                int(memops), efd, cap, spin_ns, idle_ns, lead_ns, int(prewake),
            )  # fmt: skip
        if not ptr:
            raise MemoryError("arig_core_create failed")
        self.ptr: int = ptr
        self.cap = cap
        self._lane = c_uint32()
        self._v = c_uint64()
        self.seen = (c_uint64 * n)()  # the loop's view of each lane (loop_spin compares with it)
        f = self._fast
        self.push_fn = f.arig_core_push  # push_fn(ptr, kind | lane << 8, v, a, b, c), called directly
        addr = f.arig_core_addr
        # Words the loop reads without a call: the ring's tail, the fault code, and each lane's words.
        self.tail = c_uint64.from_address(addr(ptr, 0, 0))
        self.fault_word = c_int32.from_address(addr(ptr, 1, 0))
        self.words = [c_uint64.from_address(w) for w in words]
        self.hwords = [c_uint64.from_address(addr(ptr, 2, q)) for q in range(n)]
        self.times = [c_uint64.from_address(addr(ptr, 3, q)) for q in range(n)]
        self.time_values = [c_uint64.from_address(addr(ptr, 4, q)) for q in range(n)]
        self._arm, self._due, self.hold_fn = f.arig_core_arm, f.arig_core_due, f.arig_core_hold
        self.started = False

    def cuda_stamps(self, fn: int, pairs: int, pairs_dev: int, cal: int, cal_dev: int) -> bool:
        """Before ``start``: signal long work with the stamp kernel ``fn`` (``arig.cuda._stamp``);
        ``pairs``: 16 bytes per lane of mapped memory, ``cal``: 32 more (host and device addresses).
        False where the core cannot (no stream memory operations)."""
        return int(self._fast.arig_core_cuda_stamps(self.ptr, fn, pairs, pairs_dev, cal, cal_dev)) == 0

    def cuda_waiter(self) -> bool:
        """Before ``start``: backstops are blocking-sync events that a waiter thread per lane sits
        on in ``cuEventSynchronize``, not host functions.  False where the core cannot (no stream
        memory operations: every signal is a host function)."""
        return int(self._fast.arig_core_cuda_waiter(self.ptr)) == 0

    def tune(self, early_backstop: bool, poll_ns: int) -> None:
        """Before ``start``: how long work is watched: with the lane kind's early backstop or
        without, and the first stage of a long sleep in naps of at most ``poll_ns`` (0: one sleep)."""
        self._fast.arig_core_tune(self.ptr, int(early_backstop), poll_ns)

    def py_short(self, ns: int) -> None:
        """Any time: Python fills predicted at most ``ns`` long share gates (default: short work,
        50 µs); ``ns < 0``: every Python fill, whatever its prediction (tests)."""
        self._fast.arig_core_py_short(self.ptr, ns)

    def loop_window(self, ahead_ns: int) -> None:
        """Before ``start``: the loop's spin window opens ``ahead_ns`` before a predicted end; the
        core wakes a loop that woke further ahead (and slept again) once more, nearer the end.  The
        core also reads ``seen`` (the loop's view, which it writes as it delivers): progress the loop
        read first, in a spin of its own, needs no eventfd write."""
        self._fast.arig_core_loop_window(self.ptr, ahead_ns, self.seen)

    def loop_lead(self, ns: int) -> None:
        """Loop thread: its steps from a pre-wake to its spin in the window take about ``ns``; the
        core's pre-wakes come that much earlier (at most 100 us)."""
        self._fast.arig_core_loop_lead(self.ptr, ns)

    def wake_seed(self, bucket: int, ns: int) -> None:
        """Any time: the loop's wake-up after a sleep of ``bucket``'s length (0: under 0.5 ms, 1:
        under 3 ms, 2: longer) is taken to be ``ns`` from the native thread's next turn on, and
        learned on from there (tests; a loop that measured its own wake-up).  Not capped: the next
        pre-wake comes that far ahead; what the loop's wake teaches then is capped at 500 us."""
        self._fast.arig_core_wake_seed(self.ptr, bucket, ns)

    def start(self) -> None:
        rc = self._fast.arig_core_start(self.ptr)
        if rc:
            raise OSError(rc, "cannot start the native thread")
        self.started = True

    # -- loop thread ---------------------------------------------------------------
    def want_space(self) -> None:
        self._fast.arig_core_want_space(self.ptr)

    def arm(self) -> None:
        self._arm(self.ptr)

    def hold(self, on: bool) -> None:
        """Hold the eventfd writes while the loop is awake and reads the lanes before it can block
        next (True), or release them: re-arm with a full barrier, then read the lanes (False)."""
        self.hold_fn(self.ptr, int(on))

    def fault(self) -> tuple[int, int, int] | None:
        """(CUresult, lane, value) of the failure the native thread saw, or None."""
        code = self._fast.arig_core_fault(self.ptr, ctypes.byref(self._lane), ctypes.byref(self._v))
        return None if code == 0 else (int(code), int(self._lane.value), int(self._v.value))

    def due(self) -> int:
        """CLOCK_MONOTONIC ns of the soonest predicted completion (0: nothing in flight)."""
        return int(self._due(self.ptr))

    def gpu_time(self, lane: int) -> int:
        """An NV lane's last release on CLOCK_MONOTONIC ns, from the GPU's own time (0: unknown)."""
        return int(self._fast.arig_core_gpu_time(self.ptr, lane))

    def loop_spin(self, ns: int) -> bool:
        """Spin up to ``ns`` for progress past ``seen`` (the GIL is released: blocking binding)."""
        return bool(self._slow.arig_core_loop_spin(self.ptr, self.seen, ns))

    def abort(self) -> None:
        """The device is lost elsewhere: the core runs nothing more (loop thread, non-blocking)."""
        self._fast.arig_core_abort(self.ptr)

    def stats(self) -> dict[str, int]:
        names = STATS + GAUGES
        out = (c_uint64 * len(names))()
        self._fast.arig_core_stats(self.ptr, out, len(names))
        return dict(zip(names, (int(x) for x in out)))

    # -- the Python submit thread ---------------------------------------------------------
    def py_begin(self, v: int) -> bool:
        """Wait until the native thread reaches the Python fill of value ``v``; False: skip it.
        First a spin of at most ``PY_READY_SPIN_NS`` with the GIL held (the native thread is
        usually there, or nearly), then a wait with it released."""
        r = int(self._fast.arig_core_py_ready(self.ptr, v, PY_READY_SPIN_NS))
        if r:
            return r > 0
        return bool(self._slow.arig_core_py_begin(self.ptr, v) == 0)

    def py_end(self, v: int, rc: int) -> None:
        self._fast.arig_core_py_end(self.ptr, v, rc)

    def stop(self) -> None:
        """Stop and join the native thread (the GIL is released meanwhile)."""
        self._slow.arig_core_stop(self.ptr)

    def destroy(self) -> None:
        """Free the core: only once no host function can still run."""
        if self.ptr:
            self._slow.arig_core_destroy(self.ptr)
            self.ptr = 0
