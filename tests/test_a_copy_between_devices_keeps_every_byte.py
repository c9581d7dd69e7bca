"""``await dst_dev.copy(dst, src)``: the bytes of a buffer of any open device of the loop (the same
device included) reach a buffer of ``dst_dev``, staged through host memory; ``after=`` holds the
copy until other devices reached their values; bad arguments are refused by name, before anything
runs.  Over every pairing of host, CUDA (fake) and NV (fake) devices, on both engines."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
import pytest

import arig
import arig.host

from _kinds import openers

T = 10.0
PAIRS = [("host", "host"), ("host", "cuda"), ("cuda", "host"), ("cuda", "cuda"), ("nv", "cuda"), ("cuda", "nv")]  # one NV device per GPU at a time: no NV-to-NV pair


@pytest.mark.asyncio
@pytest.mark.parametrize(("src_kind", "dst_kind"), PAIRS)
async def test_every_byte_arrives(engine: str, src_kind: str, dst_kind: str) -> None:
    with openers((src_kind, dst_kind)) as (so, do):
        async with await arig.open(so) as a, await arig.open(do) as b:
            data = np.random.default_rng(7).integers(0, 256, 4099, dtype=np.uint8)
            src, dst = await a.alloc(data.nbytes), await b.alloc(data.nbytes + 13)
            await a.upload(src, data)
            await b.upload(dst, np.full(dst.nbytes, 0xEE, np.uint8))
            v = await b.copy(dst, src)
            assert b.reached >= v
            out = np.empty(dst.nbytes, np.uint8)
            await b.download(dst, out)
            assert out[: data.nbytes].tobytes() == data.tobytes() and (out[data.nbytes :] == 0xEE).all(), "the copy, and nothing past it"


@pytest.mark.asyncio
async def test_a_copy_within_one_device_and_a_part_of_it(engine: str) -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        src, dst = await dev.alloc(64), await dev.alloc(64)
        await dev.upload(src, np.arange(64, dtype=np.uint8))
        await dev.upload(dst, np.zeros(64, np.uint8))
        await dev.copy(dst, src, nbytes=10)
        out = np.empty(64, np.uint8)
        await dev.download(dst, out)
        assert out[:10].tolist() == list(range(10)) and not out[10:].any()


@pytest.mark.asyncio
async def test_the_copy_waits_for_after(engine: str) -> None:
    async with await arig.open(arig.host.cpu()) as peer, await arig.open(arig.host.cpu()) as a, await arig.open(arig.host.cpu()) as b:
        src, dst = await a.alloc(8), await b.alloc(8)
        await a.upload(src, np.zeros(8, np.uint8))
        gate = threading.Event()
        box: list[bytes] = []

        def later(q: Any, arg: Any, v: int) -> None:
            def run() -> None:
                gate.wait(T)
                src.numpy(np.uint8)[:] = 7  # written by the peer's work, before the copy may read it
                box.append(b"done")

            q.enqueue(run)

        pv = await peer.submit(later)
        copying = asyncio.ensure_future(b.copy(dst, src, after=[(peer, pv)]))
        await asyncio.sleep(0.05)
        assert not copying.done() and box == []
        gate.set()
        await asyncio.wait_for(copying, T)
        out = np.empty(8, np.uint8)
        await b.download(dst, out)
        assert out.tolist() == [7] * 8


@pytest.mark.asyncio
async def test_bad_copies_are_refused_by_name(engine: str) -> None:
    async with await arig.open(arig.host.cpu()) as a, await arig.open(arig.host.cpu()) as b:
        sa, sb = await a.alloc(16), await b.alloc(8)
        with pytest.raises(arig.ArigTypeError, match="expected a buffer of"):
            await b.copy(sa, sb)  # dst is a's
        with pytest.raises(arig.ArigTypeError, match="copy's source must be a buffer"):
            await b.copy(sb, b"bytes")  # type: ignore[arg-type]
        with pytest.raises(arig.ArigValueError, match="fit both"):
            await b.copy(sb, sa)  # 16 bytes into 8
        with pytest.raises(arig.ArigValueError, match="at least 1"):
            await b.copy(sb, sa, nbytes=0)
        with pytest.raises(arig.ArigTypeError):
            await b.copy(sb, sa, nbytes="8")  # type: ignore[arg-type]
        closed = await a.alloc(8)
        closed.close()
        with pytest.raises(arig.ArigValueError, match="closed"):
            await b.copy(sb, closed)
        assert a.submitted == 0 and b.submitted == 0, "nothing ran"


@pytest.mark.asyncio
async def test_a_stopped_source_device_is_refused(engine: str) -> None:
    async with await arig.open(arig.host.cpu()) as b:
        a = await arig.open(arig.host.cpu())
        src, dst = await a.alloc(8), await b.alloc(8)
        await a.stop()
        with pytest.raises(arig.ArigValueError, match="closed"):  # stop closed its buffers
            await b.copy(dst, src)
        with pytest.raises(arig.DeviceStopped):  # into a buffer of the stopped device: refused for the stop
            await a.copy(src, dst)
        assert b.submitted == 0


def test_a_source_of_another_loop_is_refused() -> None:
    other = asyncio.new_event_loop()
    try:
        a = other.run_until_complete(arig.open(arig.host.cpu()))
        src = other.run_until_complete(a.alloc(8))

        async def main() -> None:
            async with await arig.open(arig.host.cpu()) as b:
                dst = await b.alloc(8)
                with pytest.raises(arig.WrongLoopError, match="another event loop"):
                    await b.copy(dst, src)

        asyncio.run(main())
    finally:
        other.run_until_complete(a.stop())
        other.close()


def test_a_copy_under_trio() -> None:
    trio = pytest.importorskip("trio")

    async def main() -> None:
        async with await arig.open(arig.host.cpu()) as a, await arig.open(arig.host.cpu()) as b:
            src, dst = await a.alloc(32), await b.alloc(32)
            await a.upload(src, np.arange(32, dtype=np.uint8))
            await b.copy(dst, src)
            out = np.empty(32, np.uint8)
            await b.download(dst, out)
            assert out.tolist() == list(range(32))

    trio.run(main)
