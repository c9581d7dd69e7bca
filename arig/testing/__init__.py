"""Testing aids for code that uses arig (like ``trio.testing``).

``FakeCuda`` is a fake libcuda in Python: install it and ``arig.cuda.gpu(i)``
opens a deterministic CPU stand-in for GPU ``i``, so the real CUDA backend
(submit thread, waiter threads, timeline words, graphs) runs in CI without a
GPU.  See ``arig.testing.fake_cuda``.
"""

from __future__ import annotations

from .fake_cuda import Call, FakeCuda, FakeGpu, Fault

__all__ = ["Call", "FakeCuda", "FakeGpu", "Fault"]
