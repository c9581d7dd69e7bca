"""The model in PyTorch on a GPU: awaited through arig (an adopted stream) or through an executor thread.

Both runners enqueue exactly the same work on a ``torch.cuda.Stream`` of
their own, from the event loop thread (torch launches do not block): the
input's copy from pinned memory, ``addmm``, ``relu_``, ``addmm``, the
output's copy to pinned memory.  They differ only in the await:

* arig: ``await dev.wait(await dev.submit(None, queue=q))`` where
  ``q = dev.adopt(stream)``: a marker ordered after the batch; its
  completion reaches the loop through arig's completion path, with no
  thread of ours waiting.
* baseline: ``event.record(stream)`` and
  ``await loop.run_in_executor(None, event.synchronize)``: a pool thread
  blocks (and, by CUDA's default, spins) per batch in flight.

Each batch in flight owns a *slot*: pinned input and output, device
activations and an event, preallocated at start for ``max_batch`` rows, so a
batch allocates nothing.  A slot is reused only once its batch has been
awaited; a batch that failed keeps its slot (the GPU may still write into it).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from .lifecycle import ArigRunner, BaselineRunner
from .model import HIDDEN, IN, OUT, weights

__all__ = ["ArigCuda", "BaselineCuda", "import_torch"]


def import_torch(index: int) -> Any:
    """PyTorch, checked to see GPU ``index``, with TF32 off (answers are checked at float32 tolerance)."""
    try:
        import torch
    except ImportError as exc:
        raise RuntimeError(
            "--device cuda:N serves the model with PyTorch, which is not installed here: "
            "install a CUDA build of torch (python3 -m pip install torch), or serve with --device host"
        ) from exc
    if not torch.cuda.is_available():
        raise RuntimeError(f"PyTorch {torch.__version__} sees no CUDA GPU (torch.cuda.is_available() is False): serve with --device host")
    if index >= torch.cuda.device_count():
        raise RuntimeError(f"no GPU cuda:{index}: PyTorch sees {torch.cuda.device_count()}")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return torch


class _Slot:
    """One batch's memory: pinned x and y (with numpy views), device x, h, y, and an event."""

    __slots__ = ("x_pin", "x_np", "y_pin", "y_np", "x_dev", "h_dev", "y_dev", "event")

    def __init__(self, torch: Any, device: Any, rows: int) -> None:
        f32 = torch.float32
        self.x_pin = torch.empty((rows, IN), dtype=f32, pin_memory=True)
        self.y_pin = torch.empty((rows, OUT), dtype=f32, pin_memory=True)
        self.x_np = self.x_pin.numpy()
        self.y_np = self.y_pin.numpy()
        self.x_dev = torch.empty((rows, IN), dtype=f32, device=device)
        self.h_dev = torch.empty((rows, HIDDEN), dtype=f32, device=device)
        self.y_dev = torch.empty((rows, OUT), dtype=f32, device=device)
        self.event = torch.cuda.Event()  # the baseline's: no timing, default (spin-then-yield) synchronize


class TorchMLP:
    """The weights on GPU ``index``, a stream, and the slots; ``enqueue`` launches one batch on the stream."""

    def __init__(self, index: int, slots: int, max_batch: int) -> None:
        torch = self.torch = import_torch(index)
        torch.cuda.set_device(index)
        self.index = index
        self.max_batch = max_batch
        device = torch.device("cuda", index)
        w = weights()
        self.w1, self.b1, self.w2, self.b2 = (torch.from_numpy(a).to(device) for a in (w.w1, w.b1, w.w2, w.b2))
        self.stream = torch.cuda.Stream(device=device)
        self._free = [_Slot(torch, device, max_batch) for _ in range(slots)]
        torch.cuda.synchronize(device)  # the weights' copies, made on the default stream, are done before our stream reads them

    def take(self) -> _Slot:
        if not self._free:
            raise RuntimeError("no free slot: earlier batches failed and keep theirs (is the GPU lost?)")
        return self._free.pop()

    def give(self, slot: _Slot) -> None:
        self._free.append(slot)

    def enqueue(self, slot: _Slot, x: np.ndarray) -> None:
        """Launch the batch ``x`` on ``self.stream``: non-blocking; read ``slot.y_np[:n]`` once it completed."""
        torch, n = self.torch, len(x)
        if n > self.max_batch:
            raise ValueError(f"batch of {n} rows, slots hold {self.max_batch}")
        slot.x_np[:n] = x  # the slot's last batch was awaited: nothing on the GPU reads it now
        xd, h, y = slot.x_dev[:n], slot.h_dev[:n], slot.y_dev[:n]
        with torch.cuda.stream(self.stream):
            xd.copy_(slot.x_pin[:n], non_blocking=True)
            torch.addmm(self.b1, xd, self.w1, out=h)
            h.relu_()
            torch.addmm(self.b2, h, self.w2, out=y)
            slot.y_pin[:n].copy_(y, non_blocking=True)


class _OnGpu:
    """A runner of the model on GPU ``index``, ``slots`` batches of up to ``max_batch`` rows
    in flight (``start`` makes the model)."""

    def __init__(self, index: int, *, slots: int, max_batch: int) -> None:
        self.index = index
        self.device = f"cuda:{index}"
        self.slots = slots
        self.max_batch = max_batch
        self.model: TorchMLP | None = None


class ArigCuda(_OnGpu, ArigRunner):
    """The batch on an adopted torch stream, awaited with ``dev.wait(await dev.submit(None, queue=q))``."""

    server = "arig"
    how = "torch ops on a torch.cuda.Stream; q = dev.adopt(stream); await dev.wait(await dev.submit(None, queue=q))"
    queue: Any = None
    hang_ms: int | None = None  # arig.cuda.gpu's: pending work without progress this long loses the device

    async def start(self) -> None:
        import arig
        import arig.cuda

        self.model = TorchMLP(self.index, self.slots, self.max_batch)  # torch first: arig joins its primary context
        self.dev = await arig.open(arig.cuda.gpu(self.index, hang_ms=self.hang_ms), stop_timeout=10.0)
        try:
            self.queue = self.dev.adopt(self.model.stream)
            await self.infer(np.zeros((1, IN), np.float32))  # warm-up: cuBLAS on this thread and stream, and the adopted queue
        except BaseException:
            await self.dev.stop()
            raise

    async def infer(self, x: np.ndarray) -> np.ndarray:
        model, dev = self.model, self.dev
        assert model is not None
        slot = model.take()
        model.enqueue(slot, x)
        v = await dev.submit(None, queue=self.queue)  # a marker after everything enqueued on the stream so far
        await dev.wait(v)
        out: np.ndarray = slot.y_np[: len(x)].copy()
        model.give(slot)
        return out


class BaselineCuda(_OnGpu, BaselineRunner):
    """The same batch, awaited with ``event.record(stream)`` and ``await loop.run_in_executor(None, event.synchronize)``."""

    server = "baseline"
    how = "torch ops on a torch.cuda.Stream; event.record(stream); await loop.run_in_executor(None, event.synchronize)"

    async def start(self) -> None:
        self.model = TorchMLP(self.index, self.slots, self.max_batch)
        await self.infer(np.zeros((1, IN), np.float32))  # warm-up, as the arig runner's

    async def infer(self, x: np.ndarray) -> np.ndarray:
        model = self.model
        assert model is not None
        slot = model.take()
        model.enqueue(slot, x)
        slot.event.record(model.stream)
        try:
            await asyncio.get_running_loop().run_in_executor(None, slot.event.synchronize)
        except Exception as exc:  # a CUDA error here is sticky: the GPU is lost for this process
            self._lost = exc
            raise
        out: np.ndarray = slot.y_np[: len(x)].copy()
        model.give(slot)
        return out

    async def stop(self) -> None:
        if self.model is not None and self._lost is None:
            self.model.torch.cuda.synchronize(self.index)
        await super().stop()
