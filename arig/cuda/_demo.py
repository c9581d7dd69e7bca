"""The demo's saxpy on a CUDA device: the shipped kernels' ``saxpy``,
a prepared ``Launch`` submitted as the fill (the device's native thread launches it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import numpy as np

from .._memory import Buffer
from ..device import Device
from ._launch import Launch, pack, shipped_image

__all__ = ["cuda_saxpy"]


async def cuda_saxpy(dev: Device) -> Callable[[float, Buffer, Buffer, int], Awaitable[int]]:
    image = await dev.load(shipped_image())
    func = image.function("saxpy")

    async def saxpy(a: float, bx: Buffer, by: Buffer, n: int) -> int:
        launch = Launch(func, ((n + 255) // 256, 1, 1), (256, 1, 1), pack(np.float32(a), bx, by, np.int32(n)))
        return await dev.submit(launch, keep=(image, bx, by))

    return saxpy
