"""The hand-off between two devices: device A's work done, device B's work started (GPU).

Each sample is two kernels of the cubin's ``spin_stamped`` (``bench.sweep``): one on A, which
writes its end stamp, then one on B, which writes its start stamp; the hand-off is B's start less
A's end (the GPU's global timer, ns).  Two ways to hand off, in the same run, alternating blocks:

* ``after``: ``vb = await b.submit(kb, after=[(a, va)])`` right after ``va = await a.submit(ka)``,
  then ``await b.wait(vb)``: B's work waits for A's value with no task in between
  (``arig._after``: the wait is held on the loop and handed to B's submitter from A's delivery);
* ``round_trip``: ``await a.wait(va)``, then ``vb = await b.submit(kb)``, ``await b.wait(vb)``:
  the host round trip through the loop that ``after=`` replaces.

Devices: A is ``arig.cuda.gpu(0)``; B is ``arig.cuda.gpu(1)`` where there are two GPUs, else a
second device on GPU 0 (``pair`` says which).  Across two GPUs the two global timers are not one
clock: the hand-off then carries their offset too (``same_gpu`` says whether it is one clock).
Then, where the NV device opens (``nvrm.gpu(0)``, on the native core), the same between A and it,
both ways (``pairs``: ``cuda->nv``, ``nv->cuda``; one GPU, one clock), or why not (``nv``).
Besides the stamps, each sample's wall time (``perf_counter``, A's submit to B's wait resumed).
Threads: everything runs on the main thread, in the loop ``asyncio.run`` makes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np

from ._common import Config, log
from ._stats import summarize
from .sweep import ArigTarget, _image

__all__ = ["run", "MODES", "KERNEL_US"]

MODES = ("after", "round_trip")
#: Each kernel's own length, µs: long enough that both stamps are the GPU's, short enough for many samples.
KERNEL_US = 20


def run(cfg: Config) -> dict[str, Any]:
    return asyncio.run(_run(cfg))


async def _open_pair() -> tuple[Any, Any, str]:
    import arig
    import arig.cuda

    two = arig.cuda.count() >= 2
    a = await arig.open(arig.cuda.gpu(0), stop_timeout=10)
    try:
        b = await arig.open(arig.cuda.gpu(1 if two else 0), stop_timeout=10)
    except BaseException:
        await a.stop()
        raise
    return a, b, "gpu0->gpu1" if two else "gpu0->gpu0"


async def _run(cfg: Config) -> dict[str, Any]:
    n, blocks = cfg.pick((500, 4), (8, 2))
    a, b, pair = await _open_pair()
    try:
        ta = ArigTarget(a, await a.load(_image("cuda")), "cuda")
        tb = ArigTarget(b, await b.load(_image("cuda")), "cuda")
        out: dict[str, Any] = {"pair": pair, "same_gpu": pair == "gpu0->gpu0", "kernel_us": KERNEL_US, "samples": n * blocks}
        out.update(await _pair(ta, tb, pair, n, blocks))
        nv = await _open_nv()
        if isinstance(nv, str):
            out["nv"] = {"skipped": nv}
            return out
        try:
            tn = ArigTarget(nv, await nv.load(_image("nv")), "nv")
            out["pairs"] = {"cuda->nv": await _pair(ta, tn, "cuda->nv", n, blocks), "nv->cuda": await _pair(tn, ta, "nv->cuda", n, blocks)}
        finally:
            await nv.stop()
        return out
    finally:
        await b.stop()
        await a.stop()


async def _open_nv() -> Any:
    """The NV device of GPU 0, or why it does not open here (a string)."""
    import arig
    import arig._engine
    import arig.nvrm

    engine = arig._engine.choose()
    if not engine.native:
        return f"the NV device runs on the native core only, not on: {engine.why}"
    try:
        return await arig.open(arig.nvrm.gpu(0), stop_timeout=10)
    except arig.ArigError as exc:
        return f"the NV device did not open: {exc}"


async def _pair(ta: ArigTarget, tb: ArigTarget, pair: str, n: int, blocks: int) -> dict[str, Any]:
    """Both modes between ``ta``'s device and ``tb``'s, alternating blocks, after a discarded warm-up."""
    got: dict[str, list[np.ndarray[Any, Any]]] = {m: [] for m in MODES}
    wall: dict[str, list[float]] = {m: [] for m in MODES}
    await _block(ta, tb, "after", 4)  # warm-up: images resident, predictions settled; discarded
    await _block(ta, tb, "round_trip", 4)
    for _ in range(blocks):
        for mode in MODES:
            handoff, w = await _block(ta, tb, mode, n)
            got[mode].append(handoff)
            wall[mode] += w
    out: dict[str, Any] = {}
    for mode in MODES:
        ns = np.concatenate(got[mode])
        out[mode] = {
            "handoff_us": summarize((ns / 1e3).tolist(), 1.0),  # NaN (a missing stamp) is left out
            "stamps_missing": int(np.isnan(ns).sum()),
            "wall_us": summarize(wall[mode], 1e6),
        }
        log(f"  peers {pair} {mode}: hand-off median {out[mode]['handoff_us'].get('median', float('nan')):.1f} us")
    return out


async def _block(ta: ArigTarget, tb: ArigTarget, mode: str, n: int) -> tuple[np.ndarray[Any, Any], list[float]]:
    """``n`` hand-offs in ``mode``: each sample's B start less A end (ns; NaN where a stamp is missing) and wall times."""
    a, b = ta.dev, tb.dev
    sa, sb = await ta.slots(n), await tb.slots(n)
    wall: list[float] = []
    try:
        for i in range(n):
            ka, kb = ta.launch(KERNEL_US, sa, i), tb.launch(KERNEL_US, sb, i)
            t0 = time.perf_counter()
            va = await a.submit(ka)
            if mode == "after":
                vb = await b.submit(kb, after=[(a, va)])
            else:
                await a.wait(va)
                vb = await b.submit(kb)
            await b.wait(vb)
            wall.append(time.perf_counter() - t0)
        ra, rb = await ta.read(sa, n), await tb.read(sb, n)
    finally:
        ta.free(sa)
        tb.free(sb)
    a_end, b_start = ra[1::2].astype(np.int64), rb[0::2].astype(np.int64)
    missing = (a_end == 0) | (b_start == 0)
    return np.where(missing, np.nan, (b_start - a_end).astype(np.float64)), wall
