"""The served model on a GPU with arig's own kernels: for the NV device (no libcuda, so no cuBLAS or
PyTorch) and for a CUDA device where PyTorch is missing.

The MLP is built from the shipped ``saxpy`` kernel (``y += a * x``), one
launch per nonzero input of a layer, its ``a`` the input: layer 1 adds
``x[r, i] * w1[i, :]`` to ``h[r, :]`` (which starts as ``b1``), layer 2 adds
``relu(h[r, j]) * w2[j, :]`` to ``y[r, :]`` (which starts as ``b2``).  ReLU
runs on the host between the layers, since its results are the next
layer's scalars.  A batch is two fills, each enqueuing all its layer's
launches on the queue (``queue.launch(l)`` on NV; ``l(stream)`` on CUDA),
so each layer costs one submit and one awaited value.  It is slow next to
cuBLAS (hundreds of tiny launches per row): what it shows is the serving
path, the same on every device kind, checked against numpy at the same
tolerance.  All on the event loop; the device's threads launch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import arig

from ..serve.lifecycle import ArigRunner
from ..serve.model import HIDDEN, OUT, weights

__all__ = ["ArigKernels"]

F32 = 4


def _launch_all(queue: Any, launches: list[Any], v: int) -> int:
    """A fill: every launch of a layer on the device's queue, in order; never waits."""
    if hasattr(queue, "launch"):  # an NV queue
        for launch in launches:
            queue.launch(launch)
        return 0
    for launch in launches:  # a CUDA stream: a prepared Launch launches itself on it
        rc: int = launch(queue)
        if rc:
            return rc
    return 0


class ArigKernels(ArigRunner):
    """The MLP as saxpy launches on ``opener``'s device (``arig.nvrm.gpu(i)`` or ``arig.cuda.gpu(i)``)."""

    server = "arig"
    how = "saxpy launches of arig's shipped kernels, a layer per fill; await dev.wait(await dev.download(...))"

    def __init__(self, opener: Any, device: str, *, slots: int, max_batch: int) -> None:
        self.opener = opener
        self.device = device
        self.slots = slots
        self.max_batch = max_batch
        self._free: list[tuple[arig.Buffer, arig.Buffer]] = []
        self.w = weights()

    async def start(self) -> None:
        self.dev = dev = await arig.open(self.opener, stop_timeout=10.0)
        try:
            kit: Any
            if dev.arch == "host":
                raise arig.ArigValueError("the kernel model runs on a GPU; the host device serves the numpy model")
            if str(dev.name).startswith("NV"):
                import arig.nvrm as kit
            else:
                import arig.cuda as kit
            self._kit = kit
            self._image = await dev.load(kit.shipped_image())  # kept: its kernels live as long as the image
            self._saxpy = self._image.function("saxpy")
            self._w1 = await self._upload(self.w.w1)
            self._w2 = await self._upload(self.w.w2)
            for _ in range(self.slots):
                h = await dev.alloc(self.max_batch * HIDDEN * F32)
                y = await dev.alloc(self.max_batch * OUT * F32)
                self._free.append((h, y))
        except BaseException:
            await dev.stop()
            raise

    async def _upload(self, a: np.ndarray) -> arig.Buffer:
        buf = await self.dev.alloc(a.nbytes)
        await self.dev.wait(await self.dev.upload(buf, np.ascontiguousarray(a)))
        return buf

    def _layer(self, scalars: np.ndarray, w: arig.Buffer, out: arig.Buffer, width: int) -> list[Any]:
        """``out[r, :] += scalars[r, i] * w[i, :]`` for every nonzero scalar, as saxpy launches."""
        kit, block = self._kit, 256
        grid = (width + block - 1) // block
        launches = []
        for r, i in zip(*np.nonzero(scalars)):
            args = kit.pack(np.float32(scalars[r, i]), np.uint64(w.address + int(i) * width * F32),
                            np.uint64(out.address + int(r) * width * F32), np.int32(width))
            launches.append(kit.Launch(self._saxpy, grid=grid, block=block, args=args))
        return launches

    async def infer(self, x: np.ndarray) -> np.ndarray:
        n, dev = len(x), self.dev
        if n > self.max_batch:
            raise arig.ArigValueError(f"batch of {n} rows, slots hold {self.max_batch}")
        if not self._free:
            raise RuntimeError("no free slot: earlier batches failed and keep theirs (is the GPU lost?)")
        h, y = self._free.pop()
        hidden = np.tile(self.w.b1, (n, 1))
        await dev.upload(h, hidden)
        await dev.submit(_launch_all, self._layer(x, self._w1, h, HIDDEN), keep=(h, self._w1))
        await dev.wait(await dev.download(h, hidden))
        np.maximum(hidden, 0.0, out=hidden)
        out = np.tile(self.w.b2, (n, 1))
        await dev.upload(y, out)
        await dev.submit(_launch_all, self._layer(hidden, self._w2, y, OUT), keep=(y, self._w2))
        await dev.wait(await dev.download(y, out))
        self._free.append((h, y))  # only once its batch was awaited: a failed batch keeps its slot
        return out
