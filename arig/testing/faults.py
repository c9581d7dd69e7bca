"""Fault injection for tests of code built on arig: lose a device, stall a queue, fail a fill.

Everything here goes through a device's public API (fills submitted to it),
so it works on the host device, over ``FakeCuda`` and on real GPUs alike::

    err = await faults.lose(dev, RuntimeError("ECC error"))   # dev.lost is that error
    v = await faults.stall(dev, 0.5)                          # queue 0 runs nothing else for 0.5 s (host, CUDA, NV)
    faults.fail_next_fill(dev, OSError("bad launch"))         # the next submit's fill raises it

A fill that raises loses its device with that exception as the cause (the
README's *Loss*), which is what a driver failure does too: the code under
test sees the same ``DeviceLost`` it would see from a real fault.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
import time
from typing import Any

import numpy as np

from .._errors import ArigTypeError, ArigValueError, DeviceLost
from .._instruments import Instrument, add_instrument, instruments, remove_instrument
from .._memory import Image
from ..device import Device

__all__ = ["lose", "stall", "fail_next_fill", "ArmedFault"]


class _FaultFill:
    """The fill a fault submits instead of the caller's: raises the fault's error on the submit thread."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __call__(self, queue: Any, arg: Any, v: int) -> None:
        raise self.error.with_traceback(None)  # a fresh traceback: the same error may be raised again


def _check_error(error: Any) -> BaseException:
    if not isinstance(error, BaseException):
        raise ArigTypeError(f"error must be an exception instance, got {type(error).__name__}")
    return error


async def lose(dev: Device, error: BaseException, *, queue: Any = 0) -> DeviceLost:
    """Lose ``dev`` with ``error`` as its cause, after the work already submitted to ``queue``.

    Returns once the device is lost, with the ``DeviceLost`` that its waiters
    (this call among them) raise; ``dev.lost`` is ``error`` then.
    """
    _check_error(error)
    try:
        v = await dev.submit(_FaultFill(error), queue=queue)
        await dev.wait(v)
    except DeviceLost as lost:
        return lost
    raise AssertionError(f"{dev.name} was not lost by a fill raising {error!r}")  # a fill that raises always loses


# -- stall ----------------------------------------------------------------------------------------

_HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_LAUNCH_HOST_FUNC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_stalls: dict[int, float] = {}
_stall_ids = itertools.count(1)
_stalls_lock = threading.Lock()


def _sleep_host_fn(userdata: int | None) -> None:
    """A CUDA host function: sleeps on the driver's thread, holding its stream.  Never raises
    (an exception would escape into libcuda's thread as an unraisable error)."""
    try:
        with _stalls_lock:
            seconds = _stalls.pop(userdata or 0, 0.0)
        time.sleep(seconds)
    except BaseException:  # noqa: BLE001
        pass


# One callback for the life of the process: libcuda may call it after any one stall's caller is gone.
_SLEEP = _HOST_FN(_sleep_host_fn)


def _host_stall(queue: Any, seconds: float, v: int) -> None:
    queue.enqueue(time.sleep, seconds)


def _cuda_host_fn_stall(queue: int, arg: tuple[int, int], v: int) -> int:
    launch_host_func, key = arg
    rc: int = _LAUNCH_HOST_FUNC(launch_host_func)(queue, ctypes.cast(_SLEEP, ctypes.c_void_p), key)
    if rc:
        with _stalls_lock:
            _stalls.pop(key, None)
    return rc  # nonzero: the CUresult loses the device, as any failed launch


async def stall(dev: Device, seconds: float, *, queue: Any = 0, image: Image | None = None) -> int:
    """Make ``queue`` of ``dev`` run nothing else for ``seconds``; return the stall's value.

    Work submitted to that queue after the stall waits for it; its value is
    reached once the stall ends (``await dev.wait(v)``).  On the host device
    the queue's worker sleeps.  On a CUDA device (also over ``FakeCuda``) a
    host function sleeps in the stream (``cuLaunchHostFunc``, through the
    device's record); with ``image``, an image loaded on the device that has
    arig's ``spin`` kernel (``await dev.load(arig.cuda.shipped_image())``),
    the GPU itself spins instead, which holds that stream only.  On an NV device the GPU
    spins: arig's ``spin`` kernel from ``image`` (a cubin that has it), else from the shipped
    cubin (``arig.nvrm.shipped_image()``, loaded for the stall and kept until it ends).
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < 1e6:
        raise ArigValueError(f"seconds must be a number in [0, 1e6), got {seconds!r}")
    if dev.arch == "host":
        return await dev.submit(_host_stall, float(seconds), queue=queue)
    from ..nvrm.abi import KEY as NV_KEY

    if dev.capability(NV_KEY) is not None:
        return await _nv_stall(dev, seconds, queue, image)
    from ..cuda_abi import KEY

    record = dev.capability(KEY)
    if record is None:
        raise ArigTypeError(f"stall: {dev.name} is neither the host device, a CUDA device nor an NV device")
    if image is not None:
        from ..cuda import Launch, pack

        spin = Launch(image.function("spin"), grid=1, block=1, args=pack(np.uint64(int(seconds * 1e9))))
        return await dev.submit(spin, queue=queue, keep=image)
    address = record.symbol("cuLaunchHostFunc")
    if address is None:
        raise ArigTypeError(f"stall: the libcuda of {dev.name} has no cuLaunchHostFunc; pass image= to spin on the GPU")
    with _stalls_lock:
        key = next(_stall_ids)
        _stalls[key] = float(seconds)
    try:
        return await dev.submit(_cuda_host_fn_stall, (address, key), queue=queue)
    except BaseException:
        with _stalls_lock:
            _stalls.pop(key, None)
        raise


async def _nv_stall(dev: Device, seconds: float, queue: Any, image: Image | None) -> int:
    """An NV device's stall: the ``spin`` kernel on the GPU for ``seconds``."""
    from ..nvrm import Launch, shipped_image

    img = image if image is not None else await dev.load(shipped_image())
    try:
        spin = Launch(img.function("spin"), 1, 1, np.uint64(int(seconds * 1e9)).tobytes())
    except BaseException:
        if image is None:
            img.unload()
        raise
    return await dev.submit(spin, queue=queue, keep=img)


# -- fail the next fill ---------------------------------------------------------------------------


class ArmedFault(Instrument):
    """A fault waiting for the next submission (``fail_next_fill``): an instrument of its device.

    ``fired`` says whether it took one, ``value`` is that submission's value;
    ``disarm()`` takes it back unfired.  A context manager: leaving the block
    disarms it if it did not fire.
    """

    def __init__(self, dev: Device, error: BaseException, queue: int | None) -> None:
        self.device = dev
        self.error = error
        self.queue = queue
        self.fired = False
        self.value: int | None = None
        self._fill = _FaultFill(error)

    def before_submit(self, dev: Device, fill: Any, arg: Any, queue: Any, keep: Any) -> tuple[Any, Any, Any] | None:
        qi = queue.index if hasattr(queue, "index") else queue
        if self.fired or isinstance(fill, _FaultFill) or (self.queue is not None and qi != self.queue):
            return None  # not ours, or another fault took this submission already
        # Taken now, before the submission is checked: the fault fails this one
        # submission, even if it then waits for room while others are submitted.
        self.fired = True
        # The original fill, arg and keep stay held until the value is settled, as they would have been.
        return self._fill, None, (fill, arg, keep)

    def on_submit(self, dev: Device, v: int, fill: Any, arg: Any, queue: int) -> None:
        if fill is self._fill:
            self.value = v
            self._remove()

    def _remove(self) -> None:
        if self in instruments(self.device):
            remove_instrument(self, self.device)

    def disarm(self) -> None:
        """Take the fault back if it has not fired."""
        if self.value is None:
            self.fired = True  # never fires now
            self._remove()

    def __enter__(self) -> ArmedFault:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.disarm()

    def __repr__(self) -> str:
        state = f"fired at value {self.value}" if self.value is not None else "disarmed" if self.fired else "armed"
        return f"<ArmedFault {self.error!r} on {self.device.name}: {state}>"


def fail_next_fill(dev: Device, error: BaseException, *, queue: int | None = None) -> ArmedFault:
    """Make the next fill submitted to ``dev`` (on ``queue``, or any queue) raise ``error``.

    The submission itself succeeds and returns its value; its fill then
    raises on the device's submit thread, which loses the device with
    ``error`` as the cause: waiters of that value (and every later one)
    raise ``DeviceLost``.  Covers every way work is submitted (``submit``,
    ``run``, ``upload``, ``download``): the fault is an instrument of the
    device that hands it a failing fill instead of the next one.  Faults
    armed together fire in the order they were armed.
    """
    _check_error(error)
    if queue is not None and (isinstance(queue, bool) or not isinstance(queue, int)):
        raise ArigTypeError(f"queue must be an int or None, got {type(queue).__name__}")
    armed = ArmedFault(dev, error, queue)
    add_instrument(armed, dev)
    return armed
