"""An NV queue whose submission state lives in the native core (``core.c``'s ``arig_nvq``).

With the native core, both threads that submit to an NV device's channels
use this one state: the core's native thread (prepared launches, marks, C
fills, every value's release) and the device's Python submit thread (the
channel's first pushbuffer at open, Python fills and staged copies, which
run while the native thread waits at their gate).  Never both at once: a
method of :class:`NativeNvQueue` is called only on the submit thread, before
the core starts or inside a Python fill.

Every pushbuffer encoding stays in :mod:`arig.nvrm._push`: the core gets
each as a template (:func:`spec`) and only patches numbers in.  Without the
native core the device uses :class:`arig.nvrm._device.NvQueue`, the same
queue in Python.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from .. import _native
from .._errors import ArigTypeError, ArigValueError, DeviceHang, DeviceStopped, FillError, safe_repr
from .._native.completion import IDLE_SPIN_NS, NativeCompletion
from . import _exec_params as E
from . import _push as pb
from ._launch import Launch, launch_template

__all__ = ["NativeNvQueue", "NvCompletion", "spec", "templates", "TEMPLATES"]

#: The templates of a queue's spec, in NvSpec's order.
TEMPLATES = ("rel_tl", "rel_prog", "wait_prog", "wait_tl", "intr", "launch", "copy", "release", "acquire")

def templates(timeline: int, progress: int, copy: bool) -> dict[str, _native.NvTemplate]:
    """The words of every kind of method a queue submits, with where the core patches numbers in
    (a host semaphore method or a copy-engine release has its payload's lo, hi at words 3, 4).

    Built by the same :class:`arig.nvrm._push.Push` calls as the Python queue,
    with zeros where the numbers go (the tests patch random numbers in through
    the core and compare with ``Push``)."""
    from ._device import wait_words  # the ordering rule's wait: one definition

    T = _native.NvTemplate.of

    def rel(address: int, value: int) -> list[int]:
        return (pb.Push().copy_release(address, value) if copy else pb.Push().release(address, value)).words

    words, qmd_word = launch_template()
    out = {
        "rel_tl": T(rel(timeline, 0), a=(3, 4)),
        "rel_prog": T(rel(progress, 0), a=(3, 4)),
        "wait_prog": T(wait_words(progress, 0), a=(3, 4)),
        "wait_tl": T(wait_words(timeline, 0), a=(3, 4)),
        "intr": T(pb.Push().non_stall_interrupt().words),
        "launch": T(words, a=(qmd_word, -1)),
        # Push.copy: OFFSET_IN_UPPER, source hi, lo, destination hi, lo; LINE_LENGTH_IN, bytes; LAUNCH_DMA.
        "copy": T(pb.Push().copy(0, 0, 1).words, a=(2, 1), b=(4, 3), c=6),
        # Host release: SEM_ADDR_LO, _HI, payload lo, hi.  Copy release: SEMAPHORE_A (hi), _B (lo), payload lo, hi.
        "release": T(rel(0, 0), a=(2, 1) if copy else (1, 2), b=(3, 4)),
        "acquire": T(pb.Push().acquire(0, 0).words, a=(1, 2), b=(3, 4)),
    }
    return out


def spec(*, pushbuf: Any, args: Any, fifo: Any, doorbell: int, words: Any, base: int, copy: bool) -> _native.NvSpec:
    """A queue's NvSpec: its rings (``_rm.Mem``: host and GPU addresses are one), its channel (``_rm.Gpfifo``),
    its words at ``words.va + base`` (timeline, then progress, 16 bytes each), and its templates."""
    s = _native.NvSpec()
    s.pb = s.pb_va = pushbuf.va
    s.pb_size = pushbuf.size
    if args is not None:
        s.args = s.args_va = args.va
        s.args_size = args.size
    s.gpfifo = fifo.ring.va
    s.gp_put = fifo.ring.va + fifo.userd_offset + E.USERD_GP_PUT
    s.doorbell = doorbell + E.USERMODE_NOTIFY_CHANNEL_PENDING
    timeline, progress = words.va + base, words.va + base + 16
    s.timeline, s.progress = timeline, progress
    if fifo.notifier.cpu:
        s.notifier = fifo.notifier.va
        ctypes.memmove(s.notifier_base, fifo.notifier_base, 16)
    s.entries, s.token, s.is_copy = fifo.entries, fifo.token, int(copy)
    for name, t in templates(timeline, progress, copy).items():
        setattr(s, name, t)
    return s


class NativeNvQueue:
    """An NV queue over the core's ``arig_nvq``: what Python fills receive with the native core.

    The same methods and ordering rule as :class:`arig.nvrm._device.NvQueue`
    (see there); arguments are checked here, before the core sees them.
    Submit thread only (see the module docstring)."""

    def __init__(self, owner: int, spec_: _native.NvSpec, *, index: int, copy: bool, error: Callable[[], str | None]) -> None:
        libs = _native.library()
        if libs is None:
            raise RuntimeError(_native.status())
        # The blocking binding (the GIL released): any call may wait for the GPU to make ring room.
        self._lib = libs[1]
        self.index = index
        self.engine = "copy" if copy else "compute"
        self._is_copy = copy
        self._owner = owner
        self._error = error
        self._spec = spec_
        self.timeline_address = spec_.timeline
        self.progress_address = spec_.progress
        self._timeline = ctypes.c_uint64.from_address(spec_.timeline)
        self._progress = ctypes.c_uint64.from_address(spec_.progress)
        ptr = self._lib.arig_nv_create(ctypes.byref(spec_))
        if not ptr:
            raise MemoryError("arig_nv_create failed")
        self.ptr: int = ptr
        self.aborted = False
        self.peer: NativeNvQueue | None = None

    def pair(self, other: NativeNvQueue) -> None:
        """The two queues of a device: each orders its work after the other's."""
        self._lib.arig_nv_pair(self.ptr, other.ptr)
        self.peer, other.peer = other, self

    def _check(self, rc: int, what: str) -> None:
        if rc == 0:
            return
        if rc == -100:
            from ._device import NvChannelError

            raise NvChannelError(self._error() or f"{what}: the channel's error notifier changed")
        if rc == -101:
            raise DeviceHang(f"{what}: the GPU did not make room in the {self.engine} queue's rings in 30 s (at submission {self._progress.value})")
        if rc == -102:
            raise DeviceStopped(f"{what}: the NV device was lost or is stopping")
        raise ArigValueError(f"{what}: {_native.NV_ERRORS.get(rc, f'error {rc}')}")

    @property
    def seq(self) -> int:
        """Submissions made (the progress word's values)."""
        return int(self._lib.arig_nv_seq(self.ptr))

    # -- what fills call -------------------------------------------------------------
    def launch(self, launch: Launch) -> None:
        """Enqueue ``launch`` on the compute channel (its bank 0 and QMD into the argument ring)."""
        if type(launch) is not Launch:
            raise ArigTypeError(f"queue.launch takes an arig.nvrm.Launch, got {type(launch).__name__}")
        if launch.owner != self._owner:
            raise ArigValueError(f"{launch!r} is of a kernel another NV device loaded")
        self._check(self._lib.arig_nv_launch(self.ptr, launch._item[1]), "queue.launch")

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Enqueue a copy-engine copy of ``nbytes`` from GPU address ``src`` to ``dst`` on the copy channel."""
        pb.check_copy_args(dst, src, nbytes)
        if max(dst, src) + nbytes > 1 << 57:
            raise ArigValueError(f"queue.copy: {nbytes} bytes from {src:#x} to {dst:#x} reach past 2**57")
        self._check(self._lib.arig_nv_copy(self.ptr, dst, src, nbytes), "queue.copy")

    def release(self, address: int, value: int) -> None:
        """A semaphore release of ``value`` at ``address`` (16-byte aligned) after the work before it (u64, GPU time)."""
        _check_sem(address, value, 16)
        self._check(self._lib.arig_nv_release(self.ptr, address, value), "queue.release")

    def acquire(self, address: int, value: int) -> None:
        """Make the queue wait until the u64 at ``address`` is >= ``value`` (ACQ_CIRC_GEQ)."""
        _check_sem(address, value, 8)
        self._check(self._lib.arig_nv_acquire(self.ptr, address, value), "queue.acquire")

    # -- submission ----------------------------------------------------------------
    def put_words(self, words: list[int]) -> None:
        """Append pushbuffer words as they are (the channel's first pushbuffer)."""
        arr = (ctypes.c_uint32 * len(words))(*words)
        self._check(self._lib.arig_nv_put(self.ptr, arr, len(words)), "the channel's setup")

    def kick(self, value: int | None = None, interrupt: bool = False) -> None:
        """Submit the pending words (and a timeline release of ``value``) as one GPFIFO entry."""
        self._check(self._lib.arig_nv_kick(self.ptr, value or 0, int(value is not None), int(interrupt), 0), "a submission")

    def wait(self, seq: int, what: str) -> None:
        """Wait (bounded) until the GPU has done this queue's submission ``seq``."""
        if seq > self.seq:
            raise ArigValueError(f"submission {seq} of {self!r} was never made")
        self._check(self._lib.arig_nv_wait(self.ptr, seq), f"waiting for {what}")

    def destroy(self) -> None:
        if self.ptr:
            self._lib.arig_nv_destroy(self.ptr)
            self.ptr = 0

    def __repr__(self) -> str:
        return f"<arig.nvrm.NvQueue {self.index} ({self.engine}, native) submitted={self.seq}>"


def _check_sem(address: Any, value: Any, align: int) -> None:
    if isinstance(address, bool) or not isinstance(address, int) or address % align or not 0 <= address < 1 << 57:
        raise ArigValueError(f"a semaphore address must be an int, {align}-byte aligned, below 2**57; got {safe_repr(address)}")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 64:
        raise ArigValueError(f"a semaphore value must be an int in 0..2**64-1, got {safe_repr(value)}")


class NvCompletion(NativeCompletion):
    """The native core under an NV device: the CUDA device's loop side, with NV queues as lanes.

    The core releases each burst's last value into the queue's timeline word
    (the GPU's semaphore release, with its GPU time), watches the words, and
    when its bounded spin gives up submits a NON_STALL_INTERRUPT after the
    value, which wakes the driver's event fd that the device reads on the loop
    (:meth:`deliver`): the driver's event ends every wait the watch does not."""

    def __init__(self, owner: Any, queues: list[NativeNvQueue], spin_us: int) -> None:
        ptrs = [q.ptr for q in queues]
        words = [q.timeline_address for q in queues]

        def make(efd: int) -> _native.Core:
            return _native.Core(None, 0, ptrs, words, [0] * len(ptrs), True, efd, spin_ns=spin_us * 1000, idle_ns=IDLE_SPIN_NS if spin_us else 0)

        self._start(owner, len(queues), True, make, join=False)

    @property
    def description(self) -> str:
        return "native core: GPU-released timeline words (with GPU time), bounded spin, NON_STALL_INTERRUPT backstop on the driver's event fd"

    def _release_time(self, lane: int) -> int:
        """The GPU's time of the lane's last release (the native thread has not looked yet)."""
        core = self.core
        return core.gpu_time(lane) if core is not None else 0

    def _error(self, code: int, lane: int, v: int) -> BaseException:
        from ._device import NvChannelError

        where = f"the {'copy' if lane else 'compute'} queue of {self._owner.name}, value {v} or earlier"
        if code == -100:
            return NvChannelError(f"{self._owner.name}: {self._owner.channel_error() or 'the channel error notifier changed'} ({where})")
        if code == -101:
            return DeviceHang(f"{where}: the GPU did not make room in the queue's rings in 30 s")
        if code in _native.NV_ERRORS:
            return FillError(code, f"{where}: {_native.NV_ERRORS[code]}")
        return FillError(code, f"C fill of {where} returned {code}")
