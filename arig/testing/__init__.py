"""Testing aids for code that uses arig (like ``trio.testing``).

``FakeCuda`` is a fake libcuda in Python: install it and ``arig.cuda.gpu(i)``
opens a deterministic CPU stand-in for GPU ``i``, so the real CUDA backend
(submit thread, waiter threads, timeline words, graphs) runs in CI without a
GPU.  See ``arig.testing.fake_cuda``.

``faults`` injects failures into a device (``lose``, ``stall``,
``fail_next_fill``); ``arig.testing.plugin`` is the pytest plugin (fixtures
``arig_device``, ``arig_host``, ``arig_gpu``), loaded by pytest on its own
once arig is installed.
"""

from __future__ import annotations

from . import faults
from .fake_cuda import Call, FakeCuda, FakeGpu, Fault
from .fake_nvrm import FakeNvrm
from .faults import ArmedFault, fail_next_fill, lose, stall

__all__ = ["ArmedFault", "Call", "FakeCuda", "FakeGpu", "FakeNvrm", "Fault", "fail_next_fill", "faults", "lose", "stall"]
