"""NVIDIA GPUs listed, described and watched through NVIDIA's kernel driver.

This is the read path of arig's kernel-driver backend: it needs neither
libcuda nor NVML, only the driver's files.  GPUs are listed from Linux's PCI
tree (:func:`buses`, :func:`count`), which changes nothing on the machine;
:func:`usage` and :func:`describe` ask the driver's resource manager (RM)
through ``/dev/nvidiactl`` and the GPU's ``/dev/nvidiaN``.

The first such call makes the process's RM client and the GPU's RM objects,
and they stay for the process (see :mod:`arig.nvrm._rm` for why).  Any
thread may call any function at the same time as others.

:func:`gpu` gives the opener of a device that runs work through the driver
alone, no libcuda (``arig.nvrm._device``): ``dev = await arig.open(arig.nvrm.gpu(0))``,
``image = await dev.load(cubin)`` (``arig.nvrm.shipped_image()``: arig's own kernels),
``await dev.submit(arig.nvrm.Launch(image.function("k"), grid, block, arig.nvrm.pack(...)))``.
"""

from __future__ import annotations

import math
import sys
import types
from collections.abc import Mapping

from arig._errors import ArigValueError, OpenError, safe_repr
from arig._worker import run_sync
from arig.device import Backend
from arig.nvrm import _rm, _sysfs, _visible, abi
from arig.nvrm._launch import Launch, pack, shipped_image
from arig.nvrm._device import Dmabuf
from arig.nvrm._params import DriverError, NoGpuError, PinRefused, RmError, Usage

__all__ = ["buses", "count", "visible", "usage", "usage_async", "describe", "gpu", "NvOpener", "Launch", "pack", "shipped_image", "Dmabuf", "abi", "PinRefused",
           "Usage", "RmError", "DriverError", "NoGpuError"]


def _check_index(i: int) -> int:
    """``i`` if it is a GPU index (an int >= 0), else ValueError."""
    if isinstance(i, bool) or not isinstance(i, int):
        raise ArigValueError(f"a GPU index is an int, not {i!r}")
    if i < 0:
        raise ArigValueError(f"a GPU index is >= 0, not {i}")
    return i


#: The longest finite window: its nanoseconds must still be a float (math.inf means every sample).
MAX_WINDOW = sys.float_info.max / 1e9


def _check_window(window: float) -> float:
    """``window`` as a float, or ValueError unless it is positive (NaN is not).

    A finite window too long to count in nanoseconds (the samples' clock) is
    refused by name rather than overflowing later; ``math.inf`` asks for
    every sample the RM kept.
    """
    if isinstance(window, bool) or not isinstance(window, (int, float)):
        raise ArigValueError(f"window must be a number of seconds, not {safe_repr(window)}")
    try:
        seconds = float(window)
    except OverflowError:  # an int beyond any float
        raise ArigValueError(f"window {safe_repr(window, 40)} s is too long; use math.inf for every sample the RM kept") from None
    if math.isnan(seconds) or seconds <= 0:
        raise ArigValueError(f"window must be positive seconds, not {safe_repr(window)}")
    if seconds > MAX_WINDOW and not math.isinf(seconds):
        raise ArigValueError(f"window {seconds!r} s is too long to count in nanoseconds; use math.inf for every sample the RM kept")
    return seconds


def buses() -> list[str]:
    """The PCI addresses of this machine's NVIDIA GPUs, in bus order.

    GPU i is the ith.  ``[]`` where there is no PCI tree (not Linux).  A
    function whose files cannot be read is left out.  Raises
    :class:`DriverError` if the PCI functions cannot be listed at all.
    """
    return _sysfs.buses()


def count() -> int:
    """The number of NVIDIA GPUs (0 on a machine without one)."""
    return len(buses())


def visible() -> list[int]:
    """The physical indexes (into :func:`buses`) of the GPUs ``CUDA_VISIBLE_DEVICES`` makes visible, in visible order.

    ``gpu(i)`` opens ``buses()[visible()[i]]``.  Unset: every GPU in bus
    order; ``""``: none; otherwise the listed indexes and ``GPU-<uuid>``
    (full or a unique prefix), the list ending at the first entry that
    names no GPU, as CUDA reads it (see :mod:`arig.nvrm._visible`).  Raises
    ValueError for a ``MIG-`` entry.  :func:`count`, :func:`usage` and
    :func:`describe` number GPUs physically, as nvidia-smi does.  Blocking
    (it may ask the driver for UUIDs): not on the event loop.
    """
    return list(_visible.resolve(buses()).physical)


def _bus_of(i: int) -> str:
    found = buses()
    if i >= len(found):
        plural = "" if len(found) == 1 else "s"
        raise NoGpuError(f"no GPU {i}: this machine has {len(found)} NVIDIA GPU{plural}")
    return found[i]


def _active_bus(i: int) -> str:
    bus = _bus_of(_check_index(i))
    _sysfs.require_active(bus)
    return bus


def usage(i: int, window: float = 1.0) -> Usage:
    """GPU ``i``'s memory and how busy it was over the last ``window`` seconds.

    ``busy`` is the mean of the RM's samples (one about every 200 ms, about
    the last 14 s kept) taken in the window, by the GPU's own clock.

    Raises ValueError if ``i`` < 0 or ``window`` is not positive (NaN is
    not); :class:`NoGpuError` if there is no GPU ``i``; :class:`DriverError`
    if the GPU is not active by its ``power/runtime_status`` (reading would
    wake it), the driver does not hold it, cannot be opened or is of a release
    arig does not accept; :class:`RmError` if the RM refuses a command.
    """
    window = _check_window(window)
    return _rm.read_usage(_active_bus(i), window)


async def usage_async(i: int, window: float = 1.0) -> Usage:
    """:func:`usage` run in a worker thread, so the event loop never blocks.

    The arguments are checked before the thread is taken.
    """
    _check_index(i)
    window = _check_window(window)
    result: Usage = await run_sync(usage, i, window)
    return result


def describe(i: int) -> Mapping[str, object]:
    """GPU ``i``'s lasting facts, as a read-only mapping.

    Keys: ``name`` ("NVIDIA H200"), ``arch`` ("sm_90"), ``chip`` ("GH100"),
    ``uuid`` ("GPU-…"), ``bus`` ("0000:00:06.0"), ``memory_total`` and
    ``bar1_size`` (bytes), ``hang_ms`` (None while the RM's watchdog runs on
    the GPU, which then ends work that holds it too long; 30000 otherwise).
    Raises as :func:`usage` does.
    """
    return types.MappingProxyType(_rm.read_facts(_active_bus(i)))


class NvOpener:
    """The opener of visible GPU ``index`` through NVIDIA's kernel driver (no libcuda).

    ``index`` counts the GPUs ``CUDA_VISIBLE_DEVICES`` makes visible, read
    when the device opens, as CUDA counts them (:func:`visible`).

    ``make`` runs on the new device's submit thread: it makes (once for the
    process) the driver client, UVM and the address reservation, (once per
    GPU) the GPU's RM objects, and the device's channel and memory.  A GPU
    has one device at a time.
    """

    __slots__ = ("index", "name")

    def __init__(self, index: int) -> None:
        self.index = _check_index(index)
        self.name = "NV" if index == 0 else f"NV:{index}"

    def __repr__(self) -> str:
        return f"arig.nvrm.gpu({self.index})"

    def make(self) -> Backend:
        """The device's backend; OpenError if there is no GPU ``index`` (saying how many), or the driver refuses."""
        try:
            found = buses()
            seen = _visible.resolve(found)
        except DriverError as e:
            raise OpenError(f"{self.name}: {e}") from e
        except ArigValueError as e:
            raise OpenError(f"cannot open {self.name}: {e}") from e
        if self.index >= len(seen.physical):
            raise OpenError(f"cannot open {self.name}: no GPU {self.index}: {seen.describe(len(found))}")
        bus = found[seen.physical[self.index]]
        from arig.nvrm._device import open_backend  # noqa: PLC0415 - the driver path loads on first open

        try:
            return open_backend(self.name, bus)
        except OpenError:
            raise
        except (DriverError, RmError) as e:
            raise OpenError(f"cannot open {self.name} ({bus}): {e}") from e


def gpu(i: int) -> NvOpener:
    """The opener of visible GPU ``i`` (see :func:`visible`), named "NV" for 0 and "NV:i" otherwise.

    Raises ValueError if ``i`` is not an int >= 0.
    """
    return NvOpener(i)
