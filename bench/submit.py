"""Benchmark 3: submit overhead, CPU µs per launch of the empty kernel.

Blocks of N launches, many blocks; per block the process CPU (all threads)
divided by N, and the loop thread's own CPU (``time.thread_time``) / N.
Each arig method runs in a fresh default loop with a fresh device; N
submits from one task, then ``await dev.wait(last)``; CPU counted until the
last completion (the launches run on the submit thread).

* ``arig_launch``: ``await dev.submit(Launch)``: a prepared ``arig.cuda.Launch``,
  launched by the native submit thread without Python (the fast path).
* ``arig_c_fill``: a tiny C function compiled here (``cc -O2 -shared -fPIC``)
  that calls ``cuLaunchKernel`` through the pointer
  ``dev.capability(arig.cuda_abi.KEY).symbol("cuLaunchKernel")`` passed in
  its arg; the submit thread calls it without the GIL.
* ``arig_graph``: ``await dev.submit(graph)``, a one-kernel ``arig.cuda_abi.Graph``
  launched natively.
* ``arig_python_fill``: ``await dev.submit(launch_fill, Launch)``, a Python fill.
* ``arig_graph_fill``: a Python fill calling ``Graph.launch`` of a one-kernel graph.
* raw ctypes: ``cuLaunchKernel`` in a loop on the main thread (the floor).
* CuPy: the ``empty`` function of the same cubin through ``cupy.RawModule``.
* PyTorch: ``torch.cuda._sleep(0)`` (one kernel, the thinnest launch torch
  exposes) and ``x.add_(1)`` on a 1-element tensor (a typical small op).

For the baselines CPU is counted over the launch loop only (their launches
are synchronous on the calling thread); the stream is drained afterwards.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any

from ._common import Config, error_record, graph_fill, launch_fill, log, run_in_loop
from ._cuda import get_raw
from ._methods import cupy_lib, gpu_facts, open_arig, torch_lib, versions
from ._stats import ratio, summarize

__all__ = ["run", "C_FILL", "ARIG_METHODS"]

C_FILL = r"""
#include <stdint.h>
typedef int (*launch_t)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra);
struct fill_arg { launch_t launch; void *func; };
/* int fill(void *queue, void *arg, uint64_t v): launch one empty kernel on the queue's stream. */
int fill(void *queue, void *arg, uint64_t v) {
    const struct fill_arg *a = (const struct fill_arg *)arg;
    (void)v;
    return a->launch(a->func, 1, 1, 1, 1, 1, 1, 0, queue, 0, 0);
}
"""


class _FillArg(ctypes.Structure):
    _fields_ = [("launch", ctypes.c_void_p), ("func", ctypes.c_void_p)]


def run(cfg: Config) -> dict[str, Any]:
    blocks, n = cfg.pick((15, 2000), (3, 200))
    out: dict[str, Any] = {"kernel": "empty", "blocks": blocks, "per_block": n, "methods": {}}
    m = out["methods"]
    try:
        raw = get_raw()
        m["raw_ctypes"] = _measure_baseline(blocks, n, raw_launcher(raw), raw.sync)
        m["raw_ctypes"]["what"] = "ctypes cuLaunchKernel (prepared arig.cuda.Launch) in a loop, no event loop"
    except Exception as exc:  # noqa: BLE001
        m["raw_ctypes"] = error_record(exc)

    with tempfile.TemporaryDirectory(prefix="arig-bench-") as tmp:
        try:
            so: str | None = _compile_c_fill(tmp)
        except Exception as exc:  # noqa: BLE001
            so = None
            m["arig_c_fill"] = {"skipped": f"cannot compile the C fill: {type(exc).__name__}: {exc}"}
        # Each arig method in a fresh default loop with a fresh device (one failing cannot spoil the next).
        for name in ARIG_METHODS:
            if name == "arig_c_fill" and so is None:
                continue
            try:
                m[name] = run_in_loop("asyncio", _arig_method, name, blocks, n, so)
            except Exception as exc:  # noqa: BLE001
                m[name] = error_record(exc)
                log(f"  {name}: {m[name]['error']}")

    _baselines(blocks, n, m)
    out["versions"] = versions()
    floor = m.get("raw_ctypes", {}).get("cpu_us_per_submit")
    for r in m.values():
        if "cpu_us_per_submit" in r and floor:
            r["vs_raw_ctypes"] = ratio(r["cpu_us_per_submit"], floor)
    return out


async def _ameasure(blocks: int, n: int, fn: Any) -> dict[str, Any]:
    proc, thr, wall = [], [], []
    await fn(min(n, 200))
    for _ in range(blocks):
        c0, t0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
        await fn(n)
        c1, t1, w1 = time.process_time(), time.thread_time(), time.perf_counter()
        proc.append((c1 - c0) / n)
        thr.append((t1 - t0) / n)
        wall.append((w1 - w0) / n)
    return {"cpu_us_per_submit": summarize(proc, 1e6), "loop_thread_cpu_us_per_submit": summarize(thr, 1e6), "wall_us_per_submit": summarize(wall, 1e6), "blocks": blocks, "per_block": n}


def _compile_c_fill(tmp: str) -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise FileNotFoundError("no C compiler (cc, gcc or clang) on PATH")
    src = os.path.join(tmp, "fill.c")
    lib = os.path.join(tmp, "libbenchfill.so")
    with open(src, "w") as f:
        f.write(C_FILL)
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", lib, src], check=True, capture_output=True, timeout=60)
    return lib


#: arig's ways to submit, each measured in a fresh loop with a fresh device.
ARIG_METHODS = {
    "arig_launch": "await dev.submit(Launch) x N, then await dev.wait(last): a prepared arig.cuda.Launch (launched by the native core)",
    "arig_c_fill": "await dev.submit(C fill calling cuLaunchKernel via record.symbol(), arg) x N (called by the native core)",
    "arig_graph": "await dev.submit(graph) x N: a 1-kernel arig.cuda_abi.Graph (launched by the native core)",
    "arig_python_fill": "await dev.submit(py_fill, Launch) x N, then await dev.wait(last): a Python fill",
    "arig_graph_fill": "await dev.submit(py_fill calling Graph.launch of a 1-kernel graph) x N: a Python fill",
}


async def _arig_method(name: str, blocks: int, n: int, so: str | None) -> dict[str, Any]:
    import arig.cuda_abi as abi
    from arig.cuda import FILL, Launch

    async with open_arig() as a:
        dev = a.dev
        submit, wait = dev.submit, dev.wait
        fill: Any
        arg: Any = None
        keep: list[Any] = []
        if name == "arig_launch":
            fill = Launch(a.funcs["empty"], 1, 1)
        elif name == "arig_python_fill":
            fill, arg = launch_fill, Launch(a.funcs["empty"], 1, 1)
        elif name in ("arig_graph", "arig_graph_fill"):
            g = await dev.capability(abi.KEY).graph_async([abi.Kernel(a.funcs["empty"], 1, 1)])
            fill, arg = (g, None) if name == "arig_graph" else (graph_fill, g)
            keep.append(g)
        elif name == "arig_c_fill":
            assert so is not None
            clib = ctypes.CDLL(so)
            addr = ctypes.cast(clib.fill, ctypes.c_void_p).value
            assert addr, "the compiled C fill has no address"
            fill = FILL(addr)
            arg = _FillArg(dev.capability(abi.KEY).symbol("cuLaunchKernel"), a.funcs["empty"])
            keep.append(clib)
        else:
            raise ValueError(name)

        if arg is None:

            async def body(k: int) -> None:
                v = 0
                for _ in range(k):
                    v = await submit(fill)
                await wait(v)

        else:

            async def body(k: int) -> None:
                v = 0
                for _ in range(k):
                    v = await submit(fill, arg)
                await wait(v)

        r = await asyncio.wait_for(_ameasure(blocks, n, body), 120)
        r["what"] = ARIG_METHODS[name]
        r["completion"] = gpu_facts(dev).get("completion")
        del keep
        return r


def raw_launcher(raw: Any) -> Any:
    launch, stream, check = raw.launch("empty"), raw.stream, raw.check

    def loop(k: int) -> None:
        for _ in range(k):
            rc = launch(stream)
            if rc:
                check(rc, "cuLaunchKernel")

    return loop


def _measure_baseline(blocks: int, n: int, launch_loop: Any, drain: Any) -> dict[str, Any]:
    """CPU over the launch loop only; the stream is drained between blocks, uncounted."""
    proc, thr, wall = [], [], []
    launch_loop(min(n, 200))
    drain()
    for _ in range(blocks):
        c0, t0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
        launch_loop(n)
        c1, t1, w1 = time.process_time(), time.thread_time(), time.perf_counter()
        drain()
        proc.append((c1 - c0) / n)
        thr.append((t1 - t0) / n)
        wall.append((w1 - w0) / n)
    return {"cpu_us_per_submit": summarize(proc, 1e6), "loop_thread_cpu_us_per_submit": summarize(thr, 1e6), "wall_us_per_submit": summarize(wall, 1e6), "blocks": blocks, "per_block": n}


def _baselines(blocks: int, n: int, m: dict[str, Any]) -> None:
    try:
        c = cupy_lib()
    except ImportError as exc:
        m["cupy_rawmodule"] = {"skipped": f"not importable: {exc}"}
    except Exception as exc:  # noqa: BLE001
        m["cupy_rawmodule"] = error_record(exc)
    else:
        try:
            fn = c.empty

            def cupy_loop(k: int) -> None:
                with c.stream:
                    for _ in range(k):
                        fn((1,), (1,), ())

            m["cupy_rawmodule"] = _measure_baseline(blocks, n, cupy_loop, c.stream.synchronize)
            m["cupy_rawmodule"]["what"] = "cupy.RawModule(path=cubin).get_function('empty')((1,), (1,), ()) in a loop"
        except Exception as exc:  # noqa: BLE001
            m["cupy_rawmodule"] = error_record(exc)
    try:
        t = torch_lib()
    except ImportError as exc:
        m["torch_sleep0"] = m["torch_add_"] = {"skipped": f"not importable: {exc}"}
        return
    except Exception as exc:  # noqa: BLE001
        m["torch_sleep0"] = m["torch_add_"] = error_record(exc)
        return
    torch = t.torch
    try:

        def sleep_loop(k: int) -> None:
            with torch.cuda.stream(t.stream):
                for _ in range(k):
                    torch.cuda._sleep(0)

        m["torch_sleep0"] = _measure_baseline(blocks, n, sleep_loop, t.synchronize)
        m["torch_sleep0"]["what"] = "torch.cuda._sleep(0) in a loop (one spin kernel of 0 cycles each)"
    except Exception as exc:  # noqa: BLE001
        m["torch_sleep0"] = error_record(exc)
    try:
        x = torch.zeros(1, device="cuda")
        torch.cuda.synchronize()

        def add_loop(k: int) -> None:
            with torch.cuda.stream(t.stream):
                for _ in range(k):
                    x.add_(1)

        m["torch_add_"] = _measure_baseline(blocks, n, add_loop, t.synchronize)
        m["torch_add_"]["what"] = "x.add_(1) on a 1-element CUDA tensor in a loop"
    except Exception as exc:  # noqa: BLE001
        m["torch_add_"] = error_record(exc)
    log("  submit baselines done")
