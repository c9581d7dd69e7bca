"""Testing aids for code that uses arig (like ``trio.testing``).

``FakeCuda`` is a fake libcuda in Python: install it and ``arig.cuda.gpu(i)``
opens a deterministic CPU stand-in for GPU ``i``, so the real CUDA backend
(submit thread, waiter threads, timeline words, graphs) runs in CI without a
GPU.  See ``arig.testing.fake_cuda``.

``Instrument`` is told what devices do (submissions, waits, buffers,
images, losses), for one device or all (``add_instrument``,
``remove_instrument``, ``instruments``): test tools watch devices through
it instead of changing them.  It lives here, not in ``arig``, while its
hooks follow the device's structure, which is still moving; see
``arig._instruments`` for when each hook runs.

``faults`` injects failures into a device (``lose``, ``stall``,
``fail_next_fill``); the pytest plugin (fixtures ``arig_device``,
``arig_host``, ``arig_gpu``; markers ``arig_gpu``, ``arig_nv``,
``arig_allow``) is loaded by pytest on its own once arig is installed: the
module ``_arig_pytestplugin``, which imports ``arig.testing.plugin`` only for
tests that use it.  Both are instruments of the devices they watch.
"""

from __future__ import annotations

from .._instruments import Instrument, add_instrument, instruments, remove_instrument
from . import faults
from .fake_cuda import Call, FakeCuda, FakeGpu, Fault
from .fake_nvrm import FakeNvrm
from .faults import ArmedFault, fail_next_fill, lose, stall

__all__ = [
    "ArmedFault",
    "Call",
    "FakeCuda",
    "FakeGpu",
    "FakeNvrm",
    "Fault",
    "Instrument",
    "add_instrument",
    "fail_next_fill",
    "faults",
    "instruments",
    "lose",
    "remove_instrument",
    "stall",
]
