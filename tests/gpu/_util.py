"""Helpers of the GPU tests: the graph and capture tests (``test_graphs_gpu.py``), and the round trips
that the asyncio and trio tests share (``saxpy_checked``, ``axpy_checked``, ``cuda_torch``, ``torch_rounds_checked``, ``torch_event_after_work``)."""

from __future__ import annotations

import contextlib
import functools
import json
import ctypes
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator, Sequence
from ctypes import byref, c_int, c_void_p
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arig
import arig.cuda
import arig.cuda_abi as abi
from arig.cuda import Launch, capture, pack, shipped_image
from arig.cuda._lib import check, lib  # raw libcuda: the streams the tests capture on are their own

REPO = Path(__file__).resolve().parents[2]
CU_STREAM_NON_BLOCKING = 1
MS = 1_000_000  # nanoseconds, for spin


@dataclass
class Kit:
    """An open CUDA device, its record and the shipped kernels."""

    dev: arig.Device
    rec: abi.CudaAbi
    image: arig.Image

    def f(self, name: str) -> int:
        return self.image.function(name)

    @property
    def gpu(self) -> Any:
        return self.rec._backend.gpu

    def store(self, buf: arig.Buffer, i: int, v: int) -> abi.Kernel:
        return abi.Kernel(self.f("store"), 1, 1, pack(buf, np.uint32(i), np.uint64(v)))

    def step(self, buf: arig.Buffer, i: int, v: int) -> abi.Kernel:
        return abi.Kernel(self.f("step"), 1, 1, pack(buf, np.uint32(i), np.uint64(v)))

    def spin(self, ns: int) -> Launch:
        return Launch(self.f("spin"), 1, 1, pack(np.uint64(ns)))

    def store_launch(self, buf: arig.Buffer, i: int, v: int) -> Launch:
        return Launch(self.f("store"), 1, 1, pack(buf, np.uint32(i), np.uint64(v)))


async def open_kit(**kw: Any) -> Kit:
    dev = await arig.open(arig.cuda.gpu(0, **kw))
    try:
        rec = dev.capability(abi.KEY)
        assert isinstance(rec, abi.CudaAbi)
        return Kit(dev, rec, await dev.load(shipped_image()))
    except BaseException:
        await dev.stop()
        raise


async def zeros(dev: arig.Device, n: int) -> arig.Buffer:
    """A device buffer of ``n`` zeroed u64."""
    buf = await dev.alloc(8 * n)
    await dev.upload(buf, np.zeros(n, np.uint64))
    return buf


async def read(dev: arig.Device, buf: arig.Buffer, n: int) -> list[int]:
    out = np.zeros(n, np.uint64)
    await dev.download(buf, out)
    return [int(x) for x in out]


async def saxpy_checked(dev: arig.Device) -> None:
    """Upload two random vectors, ``saxpy`` them with the shipped image, download and compare with numpy."""
    rng = np.random.default_rng(1)
    n = 1 << 20
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    img = await dev.load(shipped_image())
    bx, by = await dev.alloc(4 * n), await dev.alloc(4 * n)
    await dev.upload(bx, x)
    await dev.upload(by, y)
    a = np.float32(1.75)
    launch = Launch(img.function("saxpy"), (n + 255) // 256, 256, pack(a, bx, by, np.int32(n)))
    v = await dev.submit(_launch_one, launch, keep=(img, bx, by))
    await dev.wait(v)
    out = np.empty_like(y)
    await dev.download(by, out)
    np.testing.assert_allclose(out, a * x + y, rtol=1e-6, atol=1e-6)
    assert dev.reached_at(v) is not None


async def gapless_stores(dev: arig.Device, total: int, tasks: int, run_all: Any, inline: bool = False) -> None:
    """``total`` submits from ``tasks`` tasks, each fill storing v*7+1 at out[v] for its own value v;
    the values are gapless and every store landed.  ``run_all(fns)`` runs the task functions
    concurrently and returns once all ended (``asyncio.gather``, a trio nursery).  ``inline``: the
    fills run inside ``submit`` (``inline=True``), each recording its launch."""
    img = await dev.load(shipped_image())
    out = await dev.alloc(8 * (total + 1))
    store = img.function("store")
    seen: list[int] = []

    async def task(k: int) -> None:
        for _ in range(total // tasks + (1 if k < total % tasks else 0)):
            # The fill learns its own value v and stores v*7+1 at out[v].
            v = await dev.submit(lambda s, a, v: Launch(store, 1, 1, pack(out, np.uint32(v), np.uint64(v * 7 + 1)))(s), inline=inline)
            seen.append(v)
            if v % 97 == 0:
                await dev.wait(v)

    await run_all([functools.partial(task, k) for k in range(tasks)])
    await dev.wait(max(seen))
    assert sorted(seen) == list(range(1, total + 1))
    host = np.empty(total + 1, np.uint64)
    await dev.download(out, host)
    np.testing.assert_array_equal(host[1:], np.arange(1, total + 1, dtype=np.uint64) * 7 + 1)


def _launch_one(stream: int, launch: Launch, v: int) -> int:
    return launch(stream)


def axpy_args(a: float, x: arig.Buffer, y: arig.Buffer, n: int) -> bytes:
    """axpy(float a, const float *x, float *y, int n) as the kernel lays it out (tests/data/nv/probe.cu)."""
    return struct.pack("<f4xQQi", a, x.address, y.address, n)


async def axpy_checked(dev: arig.Device, cubin: bytes, kind: str) -> None:
    """On an NV device: ``axpy`` (tests/data/nv/probe.cu) over ``kind`` memory, uploaded and downloaded, against numpy."""
    import arig.nvrm as nvrm

    n = 100_000
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    image = await dev.load(cubin)
    bx, by = await dev.alloc(4 * n, kind), await dev.alloc(4 * n, kind)
    await dev.upload(bx, x)
    await dev.upload(by, y)
    launch = nvrm.Launch(image.function("axpy"), (n + 255) // 256, 256, axpy_args(2.5, bx, by, n))
    await dev.run(launch, keep=(bx, by, image))
    out = np.empty_like(y)
    await dev.download(by, out)
    np.testing.assert_allclose(out, np.float32(2.5) * x + y, rtol=1e-5, atol=1e-6)
    assert np.array_equal(by.numpy(np.float32)[:n], out)  # the host view is the same memory
    bx.close()
    by.close()


def cuda_torch() -> Any:
    """torch, where it is installed and sees a CUDA GPU; else the test is skipped."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA GPU")
    return torch


async def torch_rounds_checked(dev: arig.Device, torch: Any, k: int, rounds: int = 20, between: Any = None) -> None:
    """Task ``k`` of many: ``rounds`` rounds of torch work on a torch stream of its own, adopted by
    ``dev``, each awaited through ``submit(None, queue=q)`` and its result checked (a finished sum:
    the await covered it).  ``between(v, i)``, awaited before each wait, may cut a wait short."""
    s = torch.cuda.Stream()
    q = dev.adopt(s)
    x = torch.full((1024,), float(k), device="cuda")
    for i in range(rounds):
        with torch.cuda.stream(s):
            x.add_(1.0)
            y = (x * 2.0).sum()
        v = await dev.submit(None, queue=q)
        if between is not None:
            await between(v, i)
        await dev.wait(v)
        assert y.item() == 2.0 * 1024 * (k + i + 1)


def torch_event_after_work(torch: Any) -> tuple[Any, Any]:
    """A torch stream with some milliseconds of work on it, and an event recorded after that work."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        t = torch.ones(1 << 20, device="cuda")
        for _ in range(50):
            t = t * 1.0001
    ev = torch.cuda.Event()
    ev.record(s)
    return s, ev


def chain(values: Sequence[int], start: int = 0) -> int:
    """What ``step`` kernels with ``values``, in order, leave in a slot holding ``start``."""
    x = start
    for v in values:
        x = x * 2 + v
    return x


# -- fills ----------------------------------------------------------------------------------
def noop(queue: int, arg: Any, v: int) -> None:
    return None


def launch_fill(queue: int, graph: abi.Graph, v: int) -> int:
    return graph.launch(queue)


def run_fill(queue: int, launches: Sequence[Launch], v: int) -> int:
    for launch in launches:
        rc = launch(queue)
        if rc:
            return rc
    return 0


def update_launch_fill(queue: int, arg: tuple[abi.Graph, Sequence[tuple[int, bytes]]], v: int) -> int:
    """For each (node, args): update the node, then launch the graph."""
    graph, steps = arg
    for node, args in steps:
        rc = graph.update(node, args=args)
        if rc:
            return rc
        rc = graph.launch(queue)
        if rc:
            return rc
    return 0


def exec_fill(queue: int, exe: capture.Exec, v: int) -> None:
    capture.launch(exe, queue)


# -- streams and threads ----------------------------------------------------------------------
def new_stream() -> int:
    """A non-blocking stream of the current context."""
    s = c_void_p()
    check(lib.cuStreamCreate(byref(s), CU_STREAM_NON_BLOCKING), "cuStreamCreate")
    return s.value or 0


def drop_stream(s: int) -> None:
    """End a capture left open (ignoring its error), then destroy the stream."""
    status = c_int()
    if lib.cuStreamIsCapturing(s, byref(status)) == 0 and status.value:
        g = c_void_p()
        if lib.cuStreamEndCapture(s, byref(g)) == 0 and g.value:
            lib.cuGraphDestroy(g)
    lib.cuStreamDestroy_v2(s)


@contextlib.contextmanager
def private_stream(rec: abi.CudaAbi) -> Iterator[int]:
    """On a worker thread: the device's context current and a stream of its own."""
    with capture.using(rec):
        s = new_stream()
        try:
            yield s
        finally:
            drop_stream(s)


def capture_stores(kit: Kit, buf: arig.Buffer, values: Sequence[int], mode: capture.CaptureMode = capture.GLOBAL, keep: Any = ()) -> capture.Template:
    """On a worker thread: capture ``store(buf, i, values[i])`` for each i on a private stream."""
    launches = [kit.store_launch(buf, i, v) for i, v in enumerate(values)]
    with private_stream(kit.rec) as s:
        capture.begin_capture(s, mode)
        for launch in launches:
            check(launch(s), "cuLaunchKernel (captured)")
        return capture.end_capture(s, keep=keep)


def in_thread(fn: Any, *args: Any) -> Any:
    """Run ``fn(*args)`` on a new plain thread (not the loop's executor) and return its result."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append((True, fn(*args)))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box.append((False, exc))

    t = threading.Thread(target=run)
    t.start()
    t.join(120)
    ok, value = box[0]
    if not ok:
        raise value
    return value


def child(code: str, timeout: float = 180) -> dict[str, Any]:
    """Run a scenario in a fresh interpreter (a faulted context must not poison
    this one); it prints one JSON line last."""
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=timeout, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)},
    )
    assert r.returncode == 0, r.stderr[-4000:]
    result: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return result


def compile_fill(tmp_path: Path, source: str) -> ctypes.CDLL:
    """``source`` built with the system C compiler into a shared library (skips the test without one)."""
    import pytest

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "fill.c").write_text(source)
    so = tmp_path / "fill.so"
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(so), str(tmp_path / "fill.c")], check=True)
    return ctypes.CDLL(str(so))
