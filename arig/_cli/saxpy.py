"""What the demos share: the devices ``--device`` and ``--devices`` name, their openers, and each
device's saxpy (``y = a*x + y``) with the error a wrong result raises.  On the host device the
saxpy is numpy on the host queue's worker; on a CUDA device the shipped kernels' ``saxpy`` as a
prepared ``Launch``; on an NV device the shipped cubin's, as an ``arig.nvrm.Launch``.

Threads: the openers and argument checks on the main thread, the saxpys on the event loop.
"""

from __future__ import annotations

import argparse
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

import arig

__all__ = ["WrongResult", "DEVICES", "parse_device", "pick_opener", "device_arg", "positive", "saxpy_for"]


class WrongResult(arig.ArigError):
    """The device computed a saxpy that differs from numpy's: the demo failed."""


DEVICES = "host, cuda, cuda:N or nv:N (N a GPU index: 0, 1, ...)"


def parse_device(spec: str) -> tuple[str, int]:
    """``--device`` as (kind, index): ``host``, ``cuda[:N]``, ``nv[:N]``; ArigValueError naming what is wrong."""
    kind, colon, index = spec.strip().lower().partition(":")
    if kind not in ("host", "cuda", "nv"):
        raise arig.ArigValueError(f"unknown device {spec!r}: use {DEVICES}")
    if not colon:
        return kind, 0
    if kind == "host" or not index.isdigit() or not index.isascii():
        raise arig.ArigValueError(f"bad device {spec!r}: use {DEVICES}")
    return kind, int(index)


def pick_opener(spec: str | None) -> Any:
    """The opener for ``--device`` (``host``, ``cuda:N``, ``nv:N``); the best available if None."""
    if spec is None:
        try:
            if arig.cuda.count() > 0:
                return arig.cuda.gpu(0)
        except arig.ArigError:
            pass
        return arig.host.cpu()
    kind, i = parse_device(spec)
    if kind == "host":
        return arig.host.cpu()
    if kind == "cuda":
        return arig.cuda.gpu(i)
    return arig.nvrm.gpu(i)


def device_arg(spec: str) -> str:
    try:
        parse_device(spec)
    except arig.ArigValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return spec


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _host_saxpy(dev: arig.Device) -> Callable[[float, arig.Buffer, arig.Buffer, int], Awaitable[int]]:
    def kernel(a: np.float32, x: np.ndarray, y: np.ndarray) -> None:
        y += a * x  # float32 throughout, as the GPU kernel computes it

    def fill(queue: Any, arg: tuple[Any, ...], v: int) -> None:
        queue.enqueue(kernel, *arg)

    async def saxpy(a: float, bx: arig.Buffer, by: arig.Buffer, n: int) -> int:
        x = bx.numpy(np.float32)[:n]
        y = by.numpy(np.float32)[:n]
        return await dev.submit(fill, (np.float32(a), x, y))

    return saxpy


async def _nv_saxpy(dev: arig.Device) -> Callable[[float, arig.Buffer, arig.Buffer, int], Awaitable[int]]:
    """The shipped cubin's saxpy as a prepared arig.nvrm.Launch (the kernel-driver path)."""
    image = await dev.load((Path(__file__).resolve().parent.parent / "kernels" / "kernels.cubin").read_bytes())
    func = image.function("saxpy")

    async def saxpy(a: float, bx: arig.Buffer, by: arig.Buffer, n: int) -> int:
        launch = arig.nvrm.Launch(func, (n + 255) // 256, 256, struct.pack("<f4xQQi", a, bx.address, by.address, n))
        return await dev.submit(launch, keep=(image, bx, by))

    return saxpy


async def saxpy_for(dev: arig.Device) -> Callable[[float, arig.Buffer, arig.Buffer, int], Awaitable[int]]:
    if dev.arch == "host":
        return _host_saxpy(dev)
    if dev.name.split(":")[0] == "NV":
        return await _nv_saxpy(dev)
    from ..cuda._demo import cuda_saxpy

    return await cuda_saxpy(dev)
