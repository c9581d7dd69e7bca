"""The ways to launch a kernel and await its completion that benchmarks 1 and 2 compare.

Every method offers ``make_op(us)``: a fresh coroutine function that
launches one kernel of ``us`` microseconds (0: the ``empty`` kernel,
otherwise ``spin(us * 1000 ns)``, both from the shipped cubin) and returns
once its completion has reached the awaiting coroutine.  ``make_op`` is
called once per task, so per-task state (a PyTorch event) is never shared.

PyTorch and CuPy are imported inside the functions that need them: on a
machine without them (or without a GPU) nothing here is imported.

What the baselines launch: CuPy loads the same cubin (``cupy.RawModule(path=...)``)
and launches its ``empty``/``spin`` functions.  The PyTorch patterns launch
those same CuPy functions *on the torch stream* (``cupy.cuda.ExternalStream``)
so the GPU work is identical; only where CuPy is missing do they fall back
to ``torch.cuda._sleep(cycles)`` with cycles from a clock calibration.
``TorchBase.launcher`` says which ran.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from ._common import KERNEL_US, launch_fill
from ._cuda import RawCuda, cubin_path, get_raw

__all__ = ["ArigGpu", "CupyLib", "TorchLib", "TorchExecutor", "TorchPoll", "CupyHostFunc", "RawFloor", "open_arig", "open_method", "METHOD_KINDS"]

Op = Callable[[], Awaitable[Any]]


class ArigGpu:
    """arig on GPU 0: ``v = await dev.submit(launch); await dev.wait(v)``, the native fast path
    (``native=False``: ``dev.submit(launch_fill, launch)``, one Python fill per launch, run on the
    submit thread; ``inline=True`` too: the same fill run inside ``submit``, ``inline=True``)."""

    name = "arig"

    def __init__(self, dev: Any, image: Any, native: bool = True, inline: bool = False) -> None:
        from arig.cuda import Launch, pack

        self.dev, self.image, self.native, self.inline = dev, image, native, inline and not native
        self.funcs = {n: image.function(n) for n in ("empty", "spin", "store", "step")}
        self.launches = {us: (Launch(self.funcs["empty"], 1, 1) if us == 0 else Launch(self.funcs["spin"], 1, 1, pack(np.uint64(us * 1000))))
                         for us in KERNEL_US}

    @property
    def what(self) -> str:
        if self.native:
            return "v = await dev.submit(launch); await dev.wait(v): a prepared arig.cuda.Launch as the fill (launched without Python by the native core)"
        if self.inline:
            return "v = await dev.submit(launch_fill, launch, inline=True); await dev.wait(v): the Python fill run inside submit, its Launch recorded"
        return "v = await dev.submit(launch_fill, launch); await dev.wait(v): a Python fill calling a prepared arig.cuda.Launch"

    def launch_for(self, us: int) -> Any:
        if us not in self.launches:
            from arig.cuda import Launch, pack

            self.launches[us] = Launch(self.funcs["spin"], 1, 1, pack(np.uint64(us * 1000)))
        return self.launches[us]

    def make_op(self, us: int) -> Op:
        dev, launch = self.dev, self.launch_for(us)
        submit, wait, reached_at = dev.submit, dev.wait, dev.reached_at
        from time import perf_counter

        if self.native:

            async def op() -> float | None:
                v = await submit(launch)
                await wait(v)
                t = reached_at(v)
                return None if t is None else perf_counter() - t

        else:
            inline = self.inline

            async def op() -> float | None:
                v = await submit(launch_fill, launch, inline=inline)
                await wait(v)
                t = reached_at(v)
                return None if t is None else perf_counter() - t

        return op


@contextlib.asynccontextmanager
async def open_arig(stop_timeout: float = 10.0, native: bool = True, inline: bool = False) -> Any:
    """An arig device on GPU 0 with the shipped cubin loaded, as an ``ArigGpu``."""
    import arig
    import arig.cuda

    async with await arig.open(arig.cuda.gpu(0), stop_timeout=stop_timeout) as dev:
        image = await dev.load(arig.cuda.shipped_image())
        yield ArigGpu(dev, image, native=native, inline=inline)


#: Method kinds of benchmarks 1 and 2: what ``open_method`` makes.
METHOD_KINDS = ("arig", "arig_pyfill", "arig_pyfill_inline", "raw_floor", "torch_executor", "torch_poll", "cupy_hostfunc")


@contextlib.asynccontextmanager
async def open_method(kind: str, name: str | None = None) -> Any:
    """A method of ``kind`` (``METHOD_KINDS``) for the running loop: a fresh arig device for
    ``arig``/``arig_pyfill``/``arig_pyfill_inline`` (stopped on exit), else a baseline (ImportError where its library is missing).
    ``name`` (default ``kind``) becomes the method's ``name``; it also gets ``what``, ``loop`` and ``facts``."""
    from ._common import loop_name

    if kind in ("arig", "arig_pyfill", "arig_pyfill_inline"):
        async with open_arig(native=(kind == "arig"), inline=(kind == "arig_pyfill_inline")) as a:
            a.name = name or kind
            a.loop = loop_name()
            a.facts = gpu_facts(a.dev)
            yield a
        return
    makers: dict[str, Callable[[], Any]] = {
        "raw_floor": lambda: RawFloor(get_raw()),
        "torch_executor": lambda: TorchExecutor(torch_lib()),
        "torch_poll": lambda: TorchPoll(torch_lib()),
        "cupy_hostfunc": lambda: CupyHostFunc(cupy_lib()),
    }
    if kind not in makers:
        raise ValueError(f"unknown method kind {kind!r}: choose from {', '.join(METHOD_KINDS)}")
    m = makers[kind]()
    m.name = name or kind
    m.what = (type(m).__doc__ or "").strip().splitlines()[0]
    m.loop = loop_name()
    m.facts = None
    yield m


def gpu_facts(dev: Any) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dev.facts.items() if isinstance(v, (int, float, str, bool, tuple, type(None)))}


# -- CuPy and PyTorch ---------------------------------------------------------------


class CupyLib:
    """CuPy with the shipped cubin loaded through ``cupy.RawModule(path=...)``."""

    def __init__(self) -> None:
        import cupy

        self.cp = cupy
        self.version = cupy.__version__
        self.module = cupy.RawModule(path=cubin_path())
        self.empty = self.module.get_function("empty")
        self.spin = self.module.get_function("spin")
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._args: dict[int, tuple[Any, ...]] = {0: ()}
        with self.stream:
            self.launch(0)  # loads the module now, not inside a timed block
        self.stream.synchronize()

    def launch(self, us: int) -> None:
        """Launch on CuPy's current stream (use ``with stream:``)."""
        if us == 0:
            self.empty((1,), (1,), ())
        else:
            args = self._args.get(us)
            if args is None:
                args = self._args[us] = (np.uint64(us * 1000),)
            self.spin((1,), (1,), args)


class TorchLib:
    """PyTorch on GPU 0 with one stream of its own and a launcher of the same kernels."""

    def __init__(self, cupy: CupyLib | None) -> None:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
        self.torch = torch
        self.version = torch.__version__
        torch.cuda.init()
        self.stream = torch.cuda.Stream()
        self.cupy = cupy
        if cupy is not None:
            self.ext = cupy.cp.cuda.ExternalStream(self.stream.cuda_stream)
            self.launcher = "cupy RawModule empty/spin of the shipped cubin, launched on the torch stream"
            self.cycles_per_us = None
        else:
            self.ext = None
            self.cycles_per_us = self._calibrate()
            self.launcher = f"torch.cuda._sleep(us * {self.cycles_per_us:.1f} cycles/us, calibrated)"

    def _calibrate(self) -> float:
        torch = self.torch
        with torch.cuda.stream(self.stream):
            torch.cuda._sleep(1000)
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            best = []
            for _ in range(3):
                e0.record(self.stream)
                torch.cuda._sleep(1_000_000)
                e1.record(self.stream)
                e1.synchronize()
                best.append(e0.elapsed_time(e1))
        ms = float(np.median(best))
        return 1_000_000 / (ms * 1000.0)

    def launch(self, us: int) -> None:
        """Launch one kernel of ``us`` µs on the torch stream."""
        if self.ext is not None:
            assert self.cupy is not None
            with self.ext:
                self.cupy.launch(us)
        else:
            assert self.cycles_per_us is not None
            with self.torch.cuda.stream(self.stream):
                self.torch.cuda._sleep(int(us * self.cycles_per_us))

    def event(self) -> Any:
        return self.torch.cuda.Event()

    def synchronize(self) -> None:
        self.stream.synchronize()


_LIBS: dict[str, Any] = {}


def cupy_lib() -> CupyLib:
    """The process's CupyLib (raises ImportError, or the setup error, if unavailable)."""
    if "cupy" not in _LIBS:
        try:
            _LIBS["cupy"] = CupyLib()
        except BaseException as exc:
            _LIBS["cupy"] = exc
    lib = _LIBS["cupy"]
    if isinstance(lib, BaseException):
        raise lib
    return lib


def torch_lib() -> TorchLib:
    """The process's TorchLib (its launcher uses CuPy where CuPy works)."""
    if "torch" not in _LIBS:
        try:
            try:
                cp: CupyLib | None = cupy_lib()
            except Exception:  # noqa: BLE001 - torch works without CuPy
                cp = None
            _LIBS["torch"] = TorchLib(cp)
        except BaseException as exc:
            _LIBS["torch"] = exc
    lib = _LIBS["torch"]
    if isinstance(lib, BaseException):
        raise lib
    return lib


def versions() -> dict[str, Any]:
    out = {}
    for k, lib in _LIBS.items():
        out[k] = getattr(lib, "version", None) if not isinstance(lib, BaseException) else f"unavailable: {type(lib).__name__}: {lib}"
    if "torch" in _LIBS and not isinstance(_LIBS["torch"], BaseException):
        out["torch_launcher"] = _LIBS["torch"].launcher
    return out


class TorchExecutor:
    """PyTorch: launch, ``ev.record(stream)``, ``await loop.run_in_executor(None, ev.synchronize)``."""

    name = "torch_executor"

    def __init__(self, t: TorchLib) -> None:
        self.t = t

    def make_op(self, us: int) -> Op:
        t, ev, stream = self.t, self.t.event(), self.t.stream
        loop = asyncio.get_running_loop()

        async def op() -> None:
            t.launch(us)
            ev.record(stream)
            await loop.run_in_executor(None, ev.synchronize)

        return op


class TorchPoll:
    """PyTorch: launch, ``ev.record(stream)``, ``while not ev.query(): await asyncio.sleep(0)``."""

    name = "torch_poll"

    def __init__(self, t: TorchLib) -> None:
        self.t = t

    def make_op(self, us: int) -> Op:
        t, ev, stream = self.t, self.t.event(), self.t.stream
        sleep = asyncio.sleep

        async def op() -> None:
            t.launch(us)
            ev.record(stream)
            while not ev.query():
                await sleep(0)

        return op


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class CupyHostFunc:
    """CuPy: launch, ``stream.launch_host_func(cb, fut)``; cb calls ``loop.call_soon_threadsafe``."""

    name = "cupy_hostfunc"

    def __init__(self, c: CupyLib) -> None:
        self.c = c

    def make_op(self, us: int) -> Op:
        c, stream = self.c, self.c.stream
        loop = asyncio.get_running_loop()

        def cb(fut: asyncio.Future[None]) -> None:  # on the driver's callback thread
            try:
                loop.call_soon_threadsafe(_resolve, fut)
            except RuntimeError:
                pass  # loop closed

        async def op() -> None:
            fut = loop.create_future()
            with stream:
                c.launch(us)
            stream.launch_host_func(cb, fut)
            await fut

        return op


class RawFloor:
    """No event loop involved: ctypes ``cuLaunchKernel`` + ``cuStreamSynchronize`` (blocks the thread)."""

    name = "raw_floor"

    def __init__(self, raw: RawCuda) -> None:
        self.raw = raw
        self._launches = {us: raw.spin_or_empty(us) for us in KERNEL_US}

    def make_op(self, us: int) -> Op:
        raw = self.raw
        launch = self._launches.get(us) or raw.spin_or_empty(us)
        stream, sync, check = raw.stream, raw.lib.cuStreamSynchronize, raw.check

        async def op() -> None:  # never suspends: the loop is not involved
            rc = launch(stream)
            if rc:
                check(rc, "cuLaunchKernel")
            check(sync(stream), "cuStreamSynchronize")

        return op


# -- GPU time per kernel: a graph of N empty kernels vs N launches in one fill ---------


def _timed_fill(stream: int, arg: Any, v: int) -> int:
    raw, e0, e1, body = arg
    rc = raw.record(e0, stream) or body(stream) or raw.record(e1, stream)
    return int(rc)


async def gpu_time_per_kernel(a: ArigGpu, raw: RawCuda, n: int, reps: int, separate: bool = True) -> dict[str, Any]:
    """GPU µs per kernel (events around the work inside one fill, divided by ``n``):
    a graph of ``n`` empty kernels vs ``n`` ``cuLaunchKernel`` of it from one fill.
    The first of each is a discarded warm-up (a graph's first launch uploads it)."""
    import arig.cuda_abi as abi
    from arig.cuda import Launch

    from ._stats import ratio, summarize

    rec = a.dev.capability(abi.KEY)
    g = await rec.graph_async([abi.Kernel(a.funcs["empty"], 1, 1)] * n)
    launch = Launch(a.funcs["empty"], 1, 1)

    def many(stream: int) -> int:
        for _ in range(n):
            rc = launch(stream)
            if rc:
                return int(rc)
        return 0

    e0, e1 = raw.timing_events
    out: dict[str, Any] = {"n": n}
    bodies = {"graph": g.launch}
    if separate:
        bodies["launches"] = many
    for name, body in bodies.items():
        per: list[float] = []
        for k in range(reps + 1):
            await a.dev.run(_timed_fill, (raw, e0, e1, body), keep=g)
            ms = await asyncio.to_thread(raw.elapsed_ms, e0, e1)
            if k:
                per.append(ms * 1000.0 / n)
        out[f"{name}_us_per_kernel"] = summarize(per)
    if separate:
        out["launches_over_graph"] = ratio(out["launches_us_per_kernel"], out["graph_us_per_kernel"])
    return out
