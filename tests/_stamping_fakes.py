"""``stamping_fakes``: both fake drivers installed with arig's ``spin_stamped`` and ``empty`` kernels,
which sleep and write their start and end (the host's monotonic clock, as the GPU writes its
global timer) where the benchmarks read them; for the benchmarks' whole runs over the fakes."""

from __future__ import annotations

import contextlib
import ctypes
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from arig.testing import FakeCuda, FakeNvrm


def _spin(ns: int) -> tuple[int, int]:
    start = time.monotonic_ns() or 1
    time.sleep(ns / 1e9)
    return start, max(time.monotonic_ns(), start + ns)


def _cuda_stamped(args: bytes) -> None:
    ns, out, i = struct.unpack("<QQI", args[:20])
    start, end = _spin(ns)
    ctypes.c_uint64.from_address(out + 16 * i).value = start
    ctypes.c_uint64.from_address(out + 16 * i + 8).value = end


@contextlib.contextmanager
def stamping_fakes(set_image: Callable[[Callable[[str], bytes]], None], cubin: bytes, gpus: int = 1) -> Iterator[tuple[FakeCuda, FakeNvrm]]:
    """Install both fakes; ``set_image`` is handed the benchmark's ``_image(kind)`` replacement (the
    fake CUDA image, or ``cubin`` for the NV device).  Checks both fakes saw no misuse."""
    cuda = FakeCuda(gpus=gpus)
    image = cuda.image(spin_stamped=(_cuda_stamped, (8, 8, 4)), empty=(lambda a: None, ()))
    set_image(lambda kind: cubin if kind == "nv" else image)
    nv = FakeNvrm()

    def stamped(params: bytes, grid: Any, block: Any) -> None:
        ns, out, i = struct.unpack("<QQI", params[:20])
        nv.array(out + 16 * i, np.uint64, 2)[:] = _spin(ns)

    nv.kernel("spin_stamped", stamped)
    nv.kernel("empty", lambda params, grid, block: None)
    with cuda.installed(), nv.installed():
        yield cuda, nv
    assert cuda.violations == [] and nv.violations == []
