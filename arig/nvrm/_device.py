"""The NV device: a backend that runs work on an NVIDIA GPU through the kernel driver alone (no libcuda).

Threads, and what each may do:

* the device's **submit thread** opens the device (``NvBackend.__init__``),
  runs fills (which append to the queue's pushbuffer), submits (GPFIFO entry,
  GPPut, doorbell) at each ``signal``, allocates, loads, frees and closes:
  every RM and UVM call is made here (``arig.nvrm._rm``);
* the **event loop** never calls the driver: it reads the queue's timeline
  word (pinned host memory the GPU releases values into) when the OS event
  fd wakes it and on a 20 ms check while values are outstanding, which also
  reads the channel's error notifier.

A value's completion is the GPU's own semaphore release after its work
(RELEASE_WFI), followed by NON_STALL_INTERRUPT, which wakes the event fd.
The fd merges wakes and carries no identity; the word is the only truth.
``nvidia_poll`` clears the driver's pending flag on every poll, so the fd
is registered once (``add_reader`` at bind) and the word is read in the
callback, after the selector's poll re-armed it.
"""

from __future__ import annotations

import asyncio
import ctypes
import operator
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _log
from .._errors import ArigError, ArigTypeError, ArigValueError, DeviceHang, DeviceStopped, FillError, OpenError, safe_repr
from .._memory import Buffer, Image
from ..device import Backend, deferred_result
from . import _cubin, _rm
from . import _exec_params as E
from . import _push as pb
from ._launch import LOCAL_BYTES_PER_THREAD, Launch, LoadedKernel, Ring, launch_words, register, unregister

__all__ = ["NvBackend", "NvQueue", "NvChannelError", "KINDS"]

#: Memory kinds: VRAM for the GPU only, VRAM also mapped to the CPU through BAR1, host memory.
KINDS = ("device", "mapped", "pinned")
PUSHBUFFER_BYTES = 2 << 20  # the probe's pushbuffer
ARGS_BYTES = 16 << 20  # the research's argument ring
#: Pending pushbuffer words before a fill's launches are submitted without waiting for the signal.
PENDING_MAX_WORDS = 16 << 10
MAX_TPCS = 72  # GH100's full TPC count: local memory is sized for every TPC index the GPU may use
#: The loop's check of the timeline word and the error notifier while values are outstanding.
CHECK_S = 0.02
#: Longest a submit-thread wait for the GPU (ring room, a drain) lasts before the device is lost.
WAIT_S = 30.0
OPEN_WAIT_S = 5.0
#: How long close waits for the loop to stop reading the device's memory before freeing it.
QUIESCE_S = 2.0
#: Offsets in the queue's page of pinned host memory: the timeline word, the internal progress word.
TIMELINE_OFFSET, PROGRESS_OFFSET = 0, 16


class NvChannelError(ArigError):
    """The RM reported an error of the device's channel (a fault the GPU's work made): the device is lost."""


def _no_fill(queue: Any, arg: Any, v: int) -> None:
    """``submit(None)``: nothing to enqueue; the value marks the queue's earlier work."""


def _launch_fill(queue: NvQueue, launch: Launch, v: int) -> None:
    queue.launch(launch)


def _host_copy(queue: NvQueue, arg: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]], v: int) -> None:
    queue.drain()  # the GPU's earlier work may read or write the buffer: let it finish first
    np.copyto(arg[0], arg[1])


class NvQueue:
    """The compute queue of an NV device: what Python fills receive (submit thread only).

    ``launch(l)`` enqueues a prepared :class:`Launch`; ``release(address,
    value)`` and ``acquire(address, value)`` append host semaphore methods
    (u64 payload, 16-byte aligned release with the GPU time after it, and an
    ACQ_CIRC_GEQ acquire).  Nothing reaches the GPU until the device signals.
    """

    def __init__(self, owner: int, channel: _rm.Channel, doorbell: int, pushbuf: _rm.Mem, args: _rm.Mem, words: _rm.Mem) -> None:
        self.index = 0
        self._owner = owner
        self._ch = channel
        self._doorbell = ctypes.c_uint32.from_address(doorbell + E.USERMODE_NOTIFY_CHANNEL_PENDING)
        self._gp_put = channel.ring.u32(channel.userd_offset + E.USERD_GP_PUT)
        self._pb, self._args = pushbuf, args
        self.timeline_address = words.va + TIMELINE_OFFSET
        self.progress_address = words.va + PROGRESS_OFFSET
        self._progress = words.u64(PROGRESS_OFFSET)
        self._pb_ring = Ring(pushbuf.size)
        self._arg_ring = Ring(args.size)
        self._gp_fences: deque[tuple[int, int]] = deque()  # (seq, entries put after it)
        self._gp_done = 0
        self.words: list[int] = []  # pending pushbuffer words
        self.seq = 0  # submissions made (the progress word's values)
        self.put = 0  # GPFIFO entries written
        self.aborted = False
        self._fence = threading.Lock()  # acquiring it is a locked instruction: the WC writes are out before the doorbell

    # -- what fills call -------------------------------------------------------------
    def launch(self, launch: Launch) -> None:
        """Enqueue ``launch``: its bank 0 and QMD into the argument ring, the launch methods into the pushbuffer."""
        if type(launch) is not Launch:
            raise ArigTypeError(f"queue.launch takes an arig.nvrm.Launch, got {type(launch).__name__}")
        if launch.owner != self._owner:
            raise ArigValueError(f"{launch!r} is of a kernel another NV device loaded")
        if len(self.words) > PENDING_MAX_WORDS:
            self.kick()
        off = self._reserve(self._arg_ring, launch.slot_bytes)
        at = self._args.va + off
        image = launch.slot_image(at)
        ctypes.memmove(at, image, len(image))
        self.words += launch_words(at + launch.qmd_offset)

    def release(self, address: int, value: int) -> None:
        """A host semaphore release of ``value`` at ``address`` after the work before it (WFI, u64, GPU time)."""
        if len(self.words) > PENDING_MAX_WORDS:
            self.kick()
        self.words += pb.Push().release(address, value).words

    def acquire(self, address: int, value: int) -> None:
        """Make the queue wait until the u64 at ``address`` is >= ``value`` (ACQ_CIRC_GEQ)."""
        if len(self.words) > PENDING_MAX_WORDS:
            self.kick()
        self.words += pb.Push().acquire(address, value).words

    # -- submission (the device's submit thread) ------------------------------------
    def signal(self, v: int, *, interrupt: bool = True) -> None:
        """Release ``v`` into the timeline word after the work so far (then NON_STALL_INTERRUPT), and submit."""
        self.kick(value=v, interrupt=interrupt)

    def kick(self, value: int | None = None, interrupt: bool = False) -> None:
        """Submit the pending words (and a timeline release) as one GPFIFO entry ending in a progress release."""
        p = pb.Push().extend(self.words)
        if value is not None:
            p.release(self.timeline_address, value)
        if interrupt:
            p.non_stall_interrupt()
        seq = self.seq + 1
        p.release(self.progress_address, seq)
        data = p.data()
        self._retire()
        while self.put - self._gp_done >= self._ch.entries - 1:
            self._wait_progress(self._gp_fences[0][0], "GPFIFO ring room")
        off = self._reserve(self._pb_ring, -(-len(data) // 256) * 256, tag=seq)
        seg = self._pb.va + off
        ctypes.memmove(seg, data, len(data))
        self._ch.ring.u64((self.put % self._ch.entries) * 8).value = pb.gpfifo_entry(seg, len(p))
        self.put += 1
        self._gp_fences.append((seq, self.put))
        self.words = []
        self.seq = seq
        self._gp_put.value = self.put % self._ch.entries
        _ = self._gp_put.value  # read back, as the probe: the WC writes are out
        with self._fence:
            pass
        self._doorbell.value = self._ch.token

    def drain(self) -> None:
        """Submit what is pending and wait (bounded) until the GPU has done all of it."""
        if self.words or self.seq > self._progress.value:
            if self.words:
                self.kick()
            self._wait_progress(self.seq, "the queue's work to finish")

    def _retire(self) -> None:
        done = self._progress.value
        self._pb_ring.retire(done)
        self._arg_ring.retire(done)
        fences = self._gp_fences
        while fences and fences[0][0] <= done:
            self._gp_done = fences.popleft()[1]

    def _reserve(self, ring: Ring, n: int, tag: int | None = None) -> int:
        tag = self.seq + 1 if tag is None else tag
        while True:
            self._retire()
            off = ring.alloc(n, tag)
            if off is not None:
                return off
            oldest = ring.oldest()
            assert oldest is not None  # alloc refused n > size already
            if oldest > self.seq:  # the room is held by what is not submitted yet: submit it
                self.kick()
                tag = self.seq + 1 if tag <= self.seq else tag
                continue
            self._wait_progress(oldest, "ring room")

    def _wait_progress(self, target: int, what: str) -> None:
        """Wait on the submit thread until the progress word reaches ``target``: bounded, and a lost device ends it."""
        deadline = time.monotonic() + WAIT_S
        pause = 20e-6
        while self._progress.value < target:
            if self.aborted:
                raise DeviceStopped("the NV device was lost while its submit thread waited for the GPU")
            err = self._ch.error()
            if err is not None:
                raise NvChannelError(err)
            if time.monotonic() > deadline:
                raise DeviceHang(f"waiting for {what}: the GPU did not reach submission {target} in {WAIT_S} s (it is at {self._progress.value})")
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)
        self._retire()

    def __repr__(self) -> str:
        return f"<arig.nvrm.NvQueue {self.index} submitted={self.seq}>"


class _Submitter:
    """The submit thread's hand-off, plus arming the loop's check when values are outstanding."""

    __slots__ = ("full", "wait_space", "wake_space", "_put", "_backend")

    def __init__(self, st: Any, backend: NvBackend) -> None:
        self.full, self.wait_space, self.wake_space, self._put = st.full, st.wait_space, st.wake_space, st.put
        self._backend = backend

    def put(self, qi: int, item: Any, v: int) -> None:
        self._put(qi, item, v)
        if self._backend._tick is None:
            self._backend._arm_tick()


class NvBackend(Backend):
    """GPU ``index`` through NVIDIA's kernel driver: one compute queue, memory, cubins, completion by the OS event fd."""

    def __init__(self, name: str, bus: str) -> None:
        self.name = name
        self._closed = False
        self._mem: dict[int, _rm.Mem] = {}  # live buffers and images' code, by key
        self._orphans: list[_rm.Mem] = []  # freed while the device was lost: freed at close if the channel was
        self._images: dict[int, tuple[_rm.Mem, list[int]]] = {}
        self._keys = 0
        self._tick: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reader = False
        self._seen = 0
        self._lost_told = False
        self._quiet = threading.Event()
        proc = _rm.process()
        gpu = self.gpu = proc.gpu(bus)
        gpu.claim(name)
        self._event_undo = _rm.Undo()
        self._own: list[_rm.Mem] = []
        self.channel: _rm.Channel | None = None
        self._ev = -1
        try:
            self._open(gpu)
        except BaseException:
            self._event_undo.unwind()
            if self._ev >= 0:
                _close_fd(self._ev)
                self._ev = -1
            failures: list[str] = self.channel.free() if self.channel is not None else []
            if not failures:
                for m in reversed(self._own):
                    m.free()
            gpu.unclaim()
            raise

    # -- open (the probe's steps from "channel group" on) ---------------------------------
    def _open(self, gpu: _rm.Gpu) -> None:
        facts = gpu.facts
        self.arch = str(facts.get("arch") or "sm_90")
        if gpu.compute_cls != E.HOPPER_COMPUTE_A or self.arch != "sm_90":
            raise OpenError(f"cannot open {self.name}: arig's NV path launches with Hopper's QMD V04 (sm_90); GPU {gpu.bus} is {self.arch} with compute class {gpu.compute_cls:#x}")
        self.hang_ms = facts.get("hang_ms")
        self.channel = ch = _rm.Channel(gpu)
        self._ev = gpu.os_event(self._event_undo)
        words = self._keep(gpu.host("timeline", _rm.PAGE_4K))
        per_tpc = pb.local_bytes_per_tpc(LOCAL_BYTES_PER_THREAD)
        local = self._keep(gpu.vram("local", per_tpc * MAX_TPCS, cpu=False))
        pushbuf = self._keep(gpu.vram("pushbuffer", PUSHBUFFER_BYTES))
        args = self._keep(gpu.vram("arguments", ARGS_BYTES))
        self.queue = NvQueue(id(self), ch, gpu.doorbell, pushbuf, args, words)
        self._word = words.u64(TIMELINE_OFFSET)
        self.queue_handles = [self.queue]
        # The channel's first pushbuffer: bind the compute engine, place the windows and local memory.
        self.queue.words += pb.setup(gpu.compute_cls, None, local_address=local.va, local_per_tpc=per_tpc).words
        self.queue.kick()
        t0 = time.monotonic()
        while self.queue._progress.value < 1:
            err = ch.error()
            if err is not None:
                raise NvChannelError(err)
            if time.monotonic() - t0 > OPEN_WAIT_S:
                raise DeviceHang(f"the new channel did not run its first pushbuffer within {OPEN_WAIT_S} s")
            time.sleep(50e-6)
        classes = {"usermode": gpu.usermode_cls, "gpfifo": gpu.gpfifo_cls, "compute": gpu.compute_cls}
        p = gpu.p
        assert p.va is not None
        self.facts = {
            "name": facts.get("name"), "bus": gpu.bus, "uuid": facts.get("uuid"), "chip": facts.get("chip"),
            "memory_total": facts.get("memory_total"), "bar1_size": facts.get("bar1_size"), "hang_ms": self.hang_ms,
            "driver": p.release, "classes": {k: f"0x{v:04x}" for k, v in classes.items()}, "queues": 1,
            "kinds": KINDS, "completion": "OS event fd (NON_STALL_INTERRUPT) + 20 ms check of the timeline word",
            "error_notifier": "read" if ch.notifier.cpu else "not CPU-mapped: channel errors are seen only as hangs",
            "reservation": f"{p.va.base:#x}+{p.va.size:#x}", "copies": "pinned and mapped memory only (no copy engine yet)",
        }  # fmt: skip

    def _keep(self, m: _rm.Mem) -> _rm.Mem:
        self._own.append(m)
        return m

    # -- loop thread --------------------------------------------------------------------
    def bind(self, timeline: Any, post: Callable[..., None]) -> None:
        super().bind(timeline, post)
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._ev, self._on_wake)
        self._reader = True

    def submitter(self, st: Any, limit: int) -> Any:
        return _Submitter(st, self)

    def prepare(self, fill: Any, arg: Any) -> Any:
        if type(fill) is Launch:
            if arg is not None:
                raise ArigValueError("a Launch submitted as the fill takes no arg (it carries its arguments)")
            if fill.owner != id(self):
                raise ArigValueError(f"{fill!r} is of a kernel another NV device loaded")
            return (_launch_fill, fill)
        if fill is None:
            return (_no_fill, None)
        return (self.check_fill(fill), arg)

    def _on_wake(self) -> None:
        # The selector's poll re-armed the driver's flag before this callback: the word read now is fresh.
        self._poll()

    def _poll(self) -> None:
        tl = self.timeline
        if self._closed or tl.lost is not None:
            return
        v = self._word.value
        if v > self._seen:
            self._seen = v
            tl.report_local(0, v)
        ch = self.channel
        err = ch.error() if ch is not None else None
        if err is not None and not self._lost_told:
            self._lost_told = True
            tl.fail(NvChannelError(f"{self.name}: {err}"))

    def _arm_tick(self) -> None:
        if self._loop is not None and not self._closed:
            self._tick = self._loop.call_later(CHECK_S, self._on_tick)

    def _on_tick(self) -> None:
        self._tick = None
        self._poll()
        tl = self.timeline
        if tl.lost is None and tl.assigned > tl.reached:
            self._arm_tick()

    def abort(self) -> None:
        self.queue.aborted = True

    def _quiesce(self) -> None:
        """Loop thread, asked by close: read the device's memory no more (the submit thread then frees it)."""
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        if self._reader and self._loop is not None:
            try:
                self._loop.remove_reader(self._ev)
            except (RuntimeError, ValueError):
                pass
            self._reader = False
        self._quiet.set()

    def _stop_loop_reads(self) -> None:
        """Submit thread: make sure the loop reads neither the timeline word nor the notifier while they are freed."""
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            return
        try:
            loop.call_soon_threadsafe(self._quiesce)
        except RuntimeError:  # closed meanwhile
            return
        self._quiet.wait(QUIESCE_S)

    def detach(self) -> None:
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        if self._reader and self._loop is not None:
            try:
                self._loop.remove_reader(self._ev)
            except (RuntimeError, ValueError):  # the loop is closed
                pass
            self._reader = False
        if self._closed and self._ev >= 0:
            _close_fd(self._ev)  # after the reader is gone: the number is never reused under the loop
            self._ev = -1

    # -- the submit thread ---------------------------------------------------------------
    def call_fill(self, qi: int, fill: Any, arg: Any, v: int) -> None:
        r = fill(self.queue, arg, v)
        if r is None:
            return
        if type(r) is not bool and not isinstance(r, np.bool_):
            try:
                code = operator.index(r)
            except TypeError:
                pass
            else:
                if code != 0:
                    raise FillError(code)
                return
        if deferred_result(r):
            raise ArigTypeError(f"fill returned {type(r).__name__}: it never ran; a fill is a plain function, not async def or a generator")
        raise ArigTypeError(f"fill returned {safe_repr(r)} of type {type(r).__name__}; a fill returns None, 0 or an int error code")

    def signal(self, qi: int, v: int) -> None:
        self.queue.signal(v)

    def mark(self, qi: int, v: int) -> None:
        """Nothing: values are released at ``signal`` (at least every 32 fills); the rings track progress on their own."""

    # -- memory and images (submit thread) ---------------------------------------------
    def _key(self) -> int:
        self._keys += 1
        return self._keys

    def alloc(self, nbytes: int, kind: str | None) -> Buffer:
        kind = "device" if kind is None else kind
        if kind not in KINDS:
            raise ArigValueError(f"{self.name} has memory of kinds {', '.join(repr(k) for k in KINDS)}, not {safe_repr(kind)}")
        g = self.gpu
        if kind == "pinned":
            m = g.host("pinned", nbytes)
        else:
            m = g.vram(kind, nbytes, cpu=kind == "mapped")
        key = self._key()
        self._mem[key] = m
        host = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(m.va)) if kind != "device" else None
        post = self.post
        return Buffer(self.name, kind, m.va, nbytes, lambda: post(self._free_mem, key), host=host)

    def _free_mem(self, key: int) -> None:
        m = self._mem.pop(key, None)
        if m is None or self._closed:
            return
        self._free_after_gpu(m)

    def _free_after_gpu(self, m: _rm.Mem) -> None:
        """Free ``m`` once the GPU is done with everything submitted; while lost, keep it until close."""
        if self.timeline.lost is not None or self.queue.aborted:
            self._orphans.append(m)
            return
        try:
            self.queue.drain()
        except Exception:  # noqa: BLE001 - the GPU may still use it: keep it until close
            self._orphans.append(m)
            return
        failures = m.free()
        if failures:
            _log.fallback(f"{self.name}: freeing {m.what} memory: {'; '.join(failures)}")

    def copy_fill(self, buf: Buffer, array: np.ndarray[Any, Any], to_device: bool) -> tuple[Any, Any]:
        if buf.kind == "device":
            raise ArigTypeError(
                f"{self.name} copies only pinned and mapped memory (through the CPU, in queue order); 'device' memory needs the copy engine, "
                "which arig.nvrm does not drive yet: allocate kind='pinned' or kind='mapped'"
            )
        flat = array.reshape(-1).view(np.uint8)
        mem = buf.numpy()[: flat.nbytes]
        src, dst = (flat, mem) if to_device else (mem, flat)
        return _host_copy, (dst, src)

    def load(self, image: bytes) -> Image:
        cubin = _cubin.parse(image)
        if cubin.sm != 90:
            raise ArigValueError(f"{self.name} runs sm_90 cubins; this one is sm_{cubin.sm}")
        if not cubin.kernels:
            raise ArigValueError("the cubin has no kernels")
        for k in cubin.kernels.values():
            if k.relocations:
                kinds = sorted({f"type {r.type} of {r.symbol!r}" for r in k.relocations})
                raise ArigValueError(f"kernel {k.name!r} needs {len(k.relocations)} relocation(s) ({', '.join(kinds)}), which arig.nvrm does not apply yet")
        offsets, at = {}, 0
        for name, k in cubin.kernels.items():
            offsets[name] = at
            at += -(-max(len(k.text), 1) // 256) * 256
        m = self.gpu.vram("code", at + 256)
        try:
            for name, k in cubin.kernels.items():
                m.write(offsets[name], k.text)
            ids = {name: register(LoadedKernel(k, m.va + offsets[name], id(self))) for name, k in cubin.kernels.items()}
        except BaseException:
            m.free()
            raise
        key = self._key()
        self._images[key] = (m, list(ids.values()))
        post = self.post
        return Image(self.name, key, ids, lambda: post(self._unload, key))

    def _unload(self, key: int) -> None:
        found = self._images.pop(key, None)
        if found is None or self._closed:
            return
        m, ids = found
        for fid in ids:
            unregister(fid)
        self._free_after_gpu(m)

    # -- the end --------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop_loop_reads()
        for _m, ids in self._images.values():
            for fid in ids:
                unregister(fid)
        failures = self._event_undo.unwind()  # the fd itself is closed by detach, once the loop no longer reads it
        ch = self.channel
        ch_failures = ch.free() if ch is not None else []
        if ch_failures:
            # The GPU may still run work that uses the memory: keep it for the process.
            _ORPHANS.extend([*self._mem.values(), *(m for m, _ in self._images.values()), *self._orphans, *self._own])
            _log.fallback(f"{self.name}: the RM did not free the channel ({'; '.join(ch_failures)}): its memory stays for the process")
        else:
            for m in [*self._mem.values(), *(m for m, _ in self._images.values()), *self._orphans, *reversed(self._own)]:
                failures += m.free()
        self._mem.clear()
        self._images.clear()
        self._orphans.clear()
        self._own.clear()
        self.gpu.unclaim()
        if failures:
            _log.fallback(f"{self.name}: freeing at close: {'; '.join(failures)}")
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self.detach)  # a device never stopped is closed without Device.stop's detach
            except RuntimeError:
                pass
        elif not self._reader and self._ev >= 0:
            _close_fd(self._ev)
            self._ev = -1


def _close_fd(fd: int) -> None:
    import os  # noqa: PLC0415

    try:
        os.close(fd)
    except OSError:
        pass


#: Memory of devices whose channel the RM did not free: the GPU may still use it, so it is never freed.
_ORPHANS: list[Any] = []


def open_backend(name: str, bus: str) -> NvBackend:
    """Make the backend on the submit thread (``NvOpener.make``)."""
    return NvBackend(name, bus)
