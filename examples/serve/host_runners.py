"""The model in numpy on the CPU: as host-device work (arig) or in the default executor (baseline)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

import arig
import arig.host

from .lifecycle import ArigRunner, BaselineRunner
from .model import OUT, Weights, forward_into, weights

__all__ = ["ArigHost", "BaselineHost"]


def _forward_fill(queue: Any, arg: tuple[Weights, np.ndarray, np.ndarray], v: int) -> None:
    """A host-device fill: enqueue the forward pass on the device's worker; never wait for it."""
    queue.enqueue(forward_into, *arg)


class _OnHost:
    """A runner of the model on the CPU, with its weights."""

    device = "host"

    def __init__(self) -> None:
        self.w = weights()


class ArigHost(_OnHost, ArigRunner):
    """``v = await dev.submit(fill, (weights, x, out)); await dev.wait(v)`` on ``arig.host.cpu()``.

    The device's one worker is the model's ordered lane, as a stream is on a
    GPU: batches run one after the other, each answer lands in the ``out``
    array the submission passed, read once its value is reached.
    """

    server = "arig"
    how = "fill enqueues forward(x, out) on the host device's worker; v = await dev.submit(fill, arg); await dev.wait(v)"

    def __init__(self, *, hang_ms: int | None = None) -> None:
        super().__init__()
        self.hang_ms = hang_ms  # the device is lost once pending work makes no progress this long (None: never)

    async def start(self) -> None:
        self.dev = await arig.open(arig.host.cpu(hang_ms=self.hang_ms), stop_timeout=10.0)

    async def infer(self, x: np.ndarray) -> np.ndarray:
        out = np.empty((len(x), OUT), np.float32)
        v = await self.dev.submit(_forward_fill, (self.w, x, out))
        await self.dev.wait(v)
        return out


class BaselineHost(_OnHost, BaselineRunner):
    """``await loop.run_in_executor(None, forward, x, out)``: the common way to keep numpy off the loop."""

    server = "baseline"
    how = "await loop.run_in_executor(None, forward, x, out)"

    async def start(self) -> None:
        pass

    async def infer(self, x: np.ndarray) -> np.ndarray:
        out = np.empty((len(x), OUT), np.float32)
        await asyncio.get_running_loop().run_in_executor(None, forward_into, self.w, x, out)
        return out
