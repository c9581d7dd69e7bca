"""Probe: the loop's cost of building a launch per call, as the README's example and the demo do.

Times ``arig.cuda.Launch(func, grid, block, pack(np.float32(a), x, y, np.int32(n)))`` and
``arig.nvrm.Launch(func, grid, block, pack(...))`` for the shipped ``saxpy`` (best of 7 blocks,
µs per launch), on each GPU device that opens; ``--fake`` runs them over FakeCuda and FakeNvrm
instead (any machine).  Nothing is submitted: this is the Python a task runs before ``submit``.

Usage: python3 scripts/probe_launch_build.py [--fake] [--n 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import timeit
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

import arig
import arig.cuda
import arig.nvrm
from arig.cuda import pack

CUBIN = Path(arig.__file__).resolve().parent / "kernels" / "kernels.cubin"


async def _time(opener: Any, load: Any, make: Any, n: int) -> float:
    async with await arig.open(opener) as dev:
        image = await dev.load(load())
        func = image.function("saxpy")
        x, y = await dev.alloc(16384), await dev.alloc(16384)
        build = lambda: make(func, 16, 256, pack(np.float32(1.5), x, y, np.int32(4096)))  # noqa: E731
        build()
        return min(timeit.repeat(build, number=n, repeat=7)) / n * 1e6


@contextlib.contextmanager
def fakes(on: bool) -> Iterator[Any]:
    """Where ``on``: FakeCuda and FakeNvrm installed (the NV fake runs ``empty`` as a no-op), the
    FakeCuda yielded for its images; else nothing installed, None.  Other probes' ``--fake`` too."""
    if not on:
        yield None
        return
    from arig.testing import FakeCuda, FakeNvrm

    cuda, nv = FakeCuda(), FakeNvrm()
    nv.kernel("empty", lambda params, grid, block: None)
    with cuda.installed(), nv.installed():
        yield cuda


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fake", action="store_true")
    p.add_argument("--n", type=int, default=5000)
    a = p.parse_args()
    with fakes(a.fake) as fake:
        cuda_image = (lambda: fake.image(saxpy=(lambda args: None, (4, 8, 8, 4)))) if fake else arig.cuda.shipped_image
        for name, opener, load, make in (("cuda", arig.cuda.gpu(0), cuda_image, arig.cuda.Launch),
                                         ("nv", arig.nvrm.gpu(0), CUBIN.read_bytes, arig.nvrm.Launch)):
            try:
                us = asyncio.run(_time(opener, load, make, a.n))
            except arig.ArigError as exc:
                print(f"{name}: not measured ({type(exc).__name__}: {str(exc)[:80]})")
                continue
            print(f"{name}: Launch(func, 16, 256, pack(f32, x, y, i32)) {us:.2f} us per launch")


if __name__ == "__main__":
    main()
