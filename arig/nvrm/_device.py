"""The NV device: a backend that runs work on an NVIDIA GPU through the kernel driver alone (no libcuda).

Two queues, two GPFIFO channels of one channel group: ``dev.queues[0]``
(compute: launches) and ``dev.queues[1]`` (the copy engine,
HOPPER_DMA_COPY_A on subchannel 4), each with its own pushbuffer, timeline
word and progress word, ordered with each other (:class:`arig.nvrm._queue.NvQueue`).
The device runs on arig's native core, which submits and watches both
queues (:mod:`arig.nvrm._completion`); where the core is not in use
(``ARIG_PURE=1``, or not built) the device does not open, because a second
submission engine in Python would be the same queue written twice.

A value's completion is the GPU's own semaphore release after its work,
which the core watches; where its watch ends it asks for a
NON_STALL_INTERRUPT after the value, which wakes the driver's event fd
(:mod:`arig.nvrm._events`).

Threads, and what each may do:

* the device's **submit thread** opens the device, runs Python fills (at
  their place in the core's order), allocates, loads, frees and closes:
  every RM and UVM call is made here (``arig.nvrm._rm``);
* the core's **native thread** runs prepared launches, marks, compiled
  fills and uploads and downloads (staged copies, :mod:`arig.nvrm._staging`),
  and releases each burst's value;
* the **event loop** never calls the driver: it checks submissions
  (``prepare``) and reads the words the GPU released into, through the
  core's loop side, when the driver's event fd or the core wakes it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _engine, _log, _native
from .._errors import ArigValueError, OpenError
from .._launchspec import c_arg
from .._memory import Buffer, Image, never_free, refuse_used
from .._backend import Backend
from . import _exec_params, _queue, _rm, _staging
from . import abi as _abi
from ._completion import NvCompletion
from ._events import DriverEvents
from ._faults import NvChannelError
from ._images import Images
from ._launch import Launch
from ._memory import KINDS, Dmabuf, NvMemory
from ._queue import NvQueue
from ._staging import STAGING_BYTES, STAGING_SLOTS, NvCopy

__all__ = ["NvBackend", "NvChannelError", "Dmabuf", "KINDS", "STAGING_BYTES", "STAGING_SLOTS", "open_backend"]

#: The native core's bounded spin for a completion (µs) before the interrupt backstop.
SPIN_US = 40


def _refuse_without_core(name: str) -> str:
    """The native engine's description; an OpenError where devices get the pure engine here."""
    engine = _engine.choose()
    if not engine.native:
        raise OpenError(f"cannot open {name}: the NV device runs on arig's native core, which is not in use here: {engine.why}")
    return engine.why


class NvBackend(Backend):
    """GPU ``bus`` through NVIDIA's kernel driver: a compute and a copy queue, memory, cubins, the native core."""

    def __init__(self, name: str, bus: str) -> None:
        self._engine_why = _refuse_without_core(name)
        self.name = name
        self._closed = False
        self.events: DriverEvents | None = None
        self.completion: NvCompletion | None = None
        self.submit_thread: Any = None
        self.capabilities = {}
        self.queue_handles: list[NvQueue] = []
        self.gpu = gpu = _rm.process().gpu(bus)
        gpu.claim(name)
        self.memory = NvMemory(name, gpu)
        self.images = Images(name, id(self), self.memory.free)
        self._event_undo = _rm.Undo()
        self._own: list[_rm.Mem] = []
        self.channel: _rm.Channel | None = None
        try:
            self._open(gpu)
        except BaseException:
            self._unopen()
            raise

    def _unopen(self) -> None:
        """A failed open: undo what it made, in reverse."""
        if self.completion is not None:
            self.completion.stop_thread()
            self.completion.close(True)
        self._event_undo.unwind()
        if self.events is not None:
            self.events.close()
        failures: list[str] = self.channel.free() if self.channel is not None else []
        if not failures:
            for m in reversed(self._own):
                m.free()
        self._destroy_queues()
        self.gpu.unclaim()

    # -- open -----------------------------------------------------------------------------
    def _open(self, gpu: _rm.Gpu) -> None:
        self.arch = str(gpu.facts.get("arch") or "sm_90")
        if gpu.compute_cls != _exec_params.HOPPER_COMPUTE_A or self.arch != "sm_90":
            raise OpenError(f"cannot open {self.name}: arig's NV path launches with Hopper's QMD V04 (sm_90); GPU {gpu.bus} is {self.arch} with compute class {gpu.compute_cls:#x}")
        self.hang_ms = gpu.facts.get("hang_ms")
        self.channel = ch = _rm.Channel(gpu, copy=True)
        self.events = DriverEvents(gpu, self._event_undo, self._stop_core_reads)
        self.queue, self.copy_queue = _queue.open_pair(id(self), gpu, ch, self._keep)
        self.queue_handles = [self.queue, self.copy_queue]
        _queue.start_engines(gpu, ch, self.queue, self.copy_queue, self._keep)
        self.staging = _staging.Staging(self.copy_queue, self._keep(gpu.host("staging", STAGING_BYTES)), STAGING_SLOTS)
        self.completion = NvCompletion(self, self.queue_handles, SPIN_US)
        self.capabilities = dict([_abi.declare(_abi.NvAbi.native())])
        self.facts = self._describe(gpu, ch)

    def _keep(self, m: _rm.Mem) -> _rm.Mem:
        self._own.append(m)
        return m

    def _describe(self, gpu: _rm.Gpu, ch: _rm.Channel) -> dict[str, Any]:
        facts, p = gpu.facts, gpu.p
        assert p.va is not None and self.completion is not None
        classes = {"usermode": gpu.usermode_cls, "gpfifo": gpu.gpfifo_cls, "compute": gpu.compute_cls, "copy": gpu.copy_cls}
        return {
            "name": facts.get("name"), "bus": gpu.bus, "uuid": facts.get("uuid"), "chip": facts.get("chip"),
            "memory_total": facts.get("memory_total"), "bar1_size": facts.get("bar1_size"), "hang_ms": self.hang_ms,
            "driver": p.release, "classes": {k: f"0x{v:04x}" for k, v in classes.items()}, "queues": 2,
            "kinds": KINDS, "completion": self.completion.description, "core": self._engine_why,
            "error_notifier": "read" if ch.notifier.cpu else "not CPU-mapped: channel errors are seen only as hangs",
            "reservation": f"{p.va.base:#x}+{p.va.size:#x}",
            "copies": (f"every kind, by the copy engine (queue 1, HOPPER_DMA_COPY_A) through a {STAGING_BYTES >> 20} MiB pinned staging area "
                       f"in {STAGING_BYTES // STAGING_SLOTS >> 20} MiB chunks, run by the core's native thread; the two queues are ordered with each other"),
        }  # fmt: skip

    # -- loop thread ------------------------------------------------------------------------
    def bind(self, timeline: Any, post: Callable[..., None]) -> None:
        super().bind(timeline, post)
        self.memory.bind(timeline, post, self.ledger)
        assert self.events is not None
        self.events.watch(self._on_wake)

    def submitter(self, st: Any, limit: int) -> Any:
        """Loop thread, at open: the native core takes submissions."""
        assert self.completion is not None
        self.submit_thread = st
        self.completion.attach(st._loop, limit)
        return self.completion

    def prepare(self, fill: Any, arg: Any) -> Any:
        """Check a submission on the loop (no driver call) and make the core's item of it."""
        if type(fill) is Launch:
            if arg is not None:
                raise ArigValueError("a Launch submitted as the fill takes no arg (it carries its arguments)")
            if fill.owner != id(self):
                raise ArigValueError(f"{fill!r} is of a kernel another NV device loaded")
            if fill._uses:
                refuse_used(fill._uses)  # its image unloaded, or a buffer pack() saw closed
            return fill._item
        if type(fill) is NvCopy:
            if arg is not None:
                raise ArigValueError("a copy submitted as the fill takes no arg")
            return fill.item
        if fill is None:
            return (_native.MARK, 0, 0, 0)
        if isinstance(fill, (int, ctypes._CFuncPtr)) and not isinstance(fill, bool):  # type: ignore[attr-defined]
            return (_native.CFILL, _abi.fill_address(fill), c_arg(arg), 0)
        self.check_fill(fill)
        return (_native.PY, fill, arg, 0)

    def _on_wake(self) -> None:
        # The selector's poll re-armed the driver's flag before this callback: the words read now are fresh.
        if not self._closed and self.completion is not None:
            self.completion.deliver()

    def channel_error(self) -> str | None:
        ch = self.channel
        return ch.error() if ch is not None and not self._closed else None

    def abort(self) -> None:
        if self.completion is not None:
            self.completion.abort()  # the core runs nothing more; its queues' waits end

    def _stop_core_reads(self) -> None:
        if self.completion is not None:
            self.completion.detach()

    def detach(self) -> None:
        if self.events is not None:
            self.events.detach()

    # -- the submit thread ------------------------------------------------------------------
    def call_fill(self, qi: int, fill: Any, arg: Any, v: int) -> None:
        assert self.completion is not None
        self.completion.call_fill(self.queue_handles[qi], fill, arg, v)  # at its place in the core's ring

    def alloc(self, nbytes: int, kind: str | None) -> Buffer:
        return self.memory.alloc(nbytes, kind)

    def map_host(self, address: int, nbytes: int, owner: Any) -> Buffer:
        """The program's memory at ``address`` mapped for the GPU (``Device.map_host``)."""
        return self.memory.map_host(address, nbytes, owner)

    def dma(self, buf: Buffer, offset: int, nbytes: int) -> Dmabuf:
        """The RM object ``buf`` lies in, exported as a new dma-buf (vidmem only)."""
        return self.memory.dma(buf, offset, nbytes)

    def copy_fill(self, buf: Buffer, array: np.ndarray[Any, Any], to_device: bool) -> tuple[Any, Any]:
        """Loop thread.  Any kind of memory: the copy engine, through the staging area, as one item the core's
        native thread runs (``arig.nvrm._staging``)."""
        return self.staging.copy(buf.address, array, to_device), None

    def load(self, image: bytes) -> Image:
        return self.images.load(self.gpu, image, self.post, self.ledger)

    # -- the end ------------------------------------------------------------------------------
    def _destroy_queues(self) -> None:
        for q in self.queue_handles:
            q.destroy()

    def _free_memory(self, channel_freed: bool) -> list[str]:
        """Free every memory the device holds, or, where the RM kept the channel (the GPU may still run work
        that uses it), keep all of it and the queues' rings for the process."""
        mems = [*self.memory.close(), *self.images.close()]
        pins = self.memory.pins()
        if not channel_freed:
            never_free(*mems, *self._own, *pins, *self.queue_handles)
            self._own.clear()
            return []
        failures: list[str] = []
        for m in [*mems, *reversed(self._own)]:
            failures += m.free()
        self._own.clear()
        self._destroy_queues()
        return failures

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        assert self.completion is not None and self.events is not None
        self.events.quiesce()  # the loop reads neither the timeline words nor the notifier while they are freed
        self.completion.stop_thread()  # the native thread is joined: nothing is submitted after this
        failures = self._event_undo.unwind()
        self.events.close()
        ch = self.channel
        ch_failures = ch.free() if ch is not None else []
        if ch_failures:
            _log.fallback(f"{self.name}: the RM did not free the channel ({'; '.join(ch_failures)}): its memory stays for the process")
        # The core first (its stop touches the queues): it and its eventfd (detached from the loop already, or closed by detach).
        self.completion.close(True)
        failures += self._free_memory(not ch_failures)
        self.gpu.unclaim()
        if failures:
            _log.fallback(f"{self.name}: freeing at close: {'; '.join(failures)}")


def open_backend(name: str, bus: str) -> NvBackend:
    """Make the backend on the submit thread (``NvOpener.make``)."""
    return NvBackend(name, bus)
