"""Benchmark 5: graph replay with arguments that change on every run, and GPU time per kernel.

A graph of N ``store(out, i, value)`` kernels (N = 10, 100, 1,000); every
replay writes new values.  CPU µs per replay (process CPU, all threads),
one sample per replay, median over many:

* ``arig_update``: one fill calls ``graph.update(i, args=...)`` on every
  node, then ``graph.launch(queue)``; submit + wait.  (Argument buffers are
  packed with ``struct`` in the fill; ``fill_cpu_us`` is the submit
  thread's own CPU inside the fill.)
* ``arig_reinstantiate``: a new graph every replay
  (``await record.graph_async(kernels)``, i.e. ``record.graph`` in a worker
  thread), then a fill launching it; submit + wait.
* ``torch_cudagraph``: ``torch.cuda.CUDAGraph`` capturing N
  ``torch.add(in_i, 1, out=out_i)`` on 1-element tensors; per replay
  ``in_i.copy_(src_i)`` for every input then ``g.replay()``.  CPU counts the
  issue only (the wait after it is not counted: a lower bound for torch).

Every method's last replay is checked on the host (``verified``).

GPU time per kernel: events around a graph of 1,000 empty kernels vs 1,000
``cuLaunchKernel`` from one fill, divided by 1,000.
"""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

import numpy as np

from ._common import Config, aguarded, error_record, graph_fill, log
from ._cuda import get_raw
from ._methods import gpu_time_per_kernel, open_arig, torch_lib, versions
from ._stats import ratio, summarize

__all__ = ["run"]

NODES = (10, 100, 1000)
#: store(uint64_t *out, uint32_t index, uint64_t value): offsets 0, 8, 16.
STORE_ARGS = struct.Struct("<QI4xQ")


def run(cfg: Config) -> dict[str, Any]:
    return asyncio.run(_run(cfg))


def _replays(cfg: Config, n: int, reinst: bool = False) -> int:
    full = {10: 300, 100: 100, 1000: 20}[n]
    if reinst:
        full = {10: 100, 100: 50, 1000: 10}[n]
    return cfg.pick(full, {10: 20, 100: 10, 1000: 3}[n])


def _value(r: int, i: int) -> int:
    return (r + 1) * 1_000_003 + i


def _update_fill(stream: int, arg: Any, v: int) -> int:
    g, r, addr, cpu = arg
    t = time.thread_time()
    update, pack = g.update, STORE_ARGS.pack
    base = (r + 1) * 1_000_003
    for i in range(len(g.nodes)):
        rc = update(i, args=pack(addr, i, base + i))
        if rc:
            return int(rc)
    rc = g.launch(stream)
    cpu.append(time.thread_time() - t)
    return int(rc)


async def _check(dev: Any, buf: Any, n: int, r: int) -> bool:
    got = np.empty(n, dtype=np.uint64)
    await dev.download(buf, got)
    return bool(np.array_equal(got, np.array([_value(r, i) for i in range(n)], dtype=np.uint64)))


async def _arig(cfg: Config, a: Any, n: int) -> dict[str, Any]:
    import arig.cuda_abi as abi

    dev, store = a.dev, a.funcs["store"]
    rec = dev.capability(abi.KEY)
    buf = await dev.alloc(8 * n)
    await dev.upload(buf, np.zeros(n, dtype=np.uint64))
    out: dict[str, Any] = {}
    pc, pt = time.perf_counter, time.process_time

    async def update() -> dict[str, Any]:
        g = await rec.graph_async([abi.Kernel(store, 1, 1, STORE_ARGS.pack(buf.address, i, 0)) for i in range(n)])
        fill_cpu: list[float] = []
        cpu, wall = [], []
        reps = _replays(cfg, n)
        await dev.run(_update_fill, (g, -1, buf.address, []), keep=g)  # warm: the first launch uploads the graph
        for r in range(reps):
            c0, w0 = pt(), pc()
            v = await dev.submit(_update_fill, (g, r, buf.address, fill_cpu), keep=g)
            await dev.wait(v)
            cpu.append(pt() - c0)
            wall.append(pc() - w0)
        return {"replays": reps, "cpu_us_per_replay": summarize(cpu, 1e6), "wall_us_per_replay": summarize(wall, 1e6),
                "fill_cpu_us": summarize(fill_cpu, 1e6), "verified": await _check(dev, buf, n, reps - 1)}

    async def reinstantiate() -> dict[str, Any]:
        cpu, wall = [], []
        reps = _replays(cfg, n, reinst=True)
        for r in range(reps):
            c0, w0 = pt(), pc()
            base = (r + 1) * 1_000_003
            g = await rec.graph_async([abi.Kernel(store, 1, 1, STORE_ARGS.pack(buf.address, i, base + i)) for i in range(n)])
            v = await dev.submit(graph_fill, g)
            await dev.wait(v)
            cpu.append(pt() - c0)
            wall.append(pc() - w0)
            del g
        return {"replays": reps, "cpu_us_per_replay": summarize(cpu, 1e6), "wall_us_per_replay": summarize(wall, 1e6),
                "verified": await _check(dev, buf, n, reps - 1)}

    await aguarded(out, "arig_update", update(), timeout=120)
    await aguarded(out, "arig_reinstantiate", reinstantiate(), timeout=120)
    buf.close()
    return out


def _torch(cfg: Config, n: int) -> dict[str, Any]:
    t = torch_lib()
    torch = t.torch
    dev = torch.device("cuda")
    ins = [torch.zeros(1, dtype=torch.int64, device=dev) for _ in range(n)]
    outs = [torch.zeros(1, dtype=torch.int64, device=dev) for _ in range(n)]
    srcs = [[torch.full((1,), _value(r, i), dtype=torch.int64, device=dev) for i in range(n)] for r in range(2)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            for i in range(n):
                torch.add(ins[i], 1, out=outs[i])
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(n):
            torch.add(ins[i], 1, out=outs[i])
    torch.cuda.synchronize()
    reps = _replays(cfg, n)
    cpu, wall = [], []
    stream = torch.cuda.current_stream()
    pc, pt = time.perf_counter, time.process_time
    for r in range(reps + 1):  # the first is a warm-up
        src = srcs[r % 2]
        c0, w0 = pt(), pc()
        for i in range(n):
            ins[i].copy_(src[i])
        g.replay()
        c1, w1 = pt(), pc()
        stream.synchronize()
        if r:
            cpu.append(c1 - c0)
            wall.append(w1 - w0)
    last = srcs[reps % 2]
    got = torch.cat(outs).cpu().numpy()
    want = torch.cat(last).cpu().numpy() + 1
    return {"replays": reps, "cpu_us_per_replay": summarize(cpu, 1e6), "wall_us_per_replay": summarize(wall, 1e6),
            "verified": bool(np.array_equal(got, want)), "capture": "torch.add(in_i, 1, out=out_i) x N; per replay in_i.copy_(src_i) x N + g.replay()"}


async def _run(cfg: Config) -> dict[str, Any]:
    out: dict[str, Any] = {"kernel": "store(out, i, value)", "nodes": {}}
    async with open_arig() as a:
        await aguarded(out, "gpu_time_per_kernel", gpu_time_per_kernel(a, get_raw(), 1000, cfg.pick(10, 2)), timeout=60)
        for n in NODES:
            try:
                out["nodes"][str(n)] = await asyncio.wait_for(_arig(cfg, a, n), 300)
            except Exception as exc:  # noqa: BLE001
                out["nodes"][str(n)] = error_record(exc)
    for n in NODES:
        res = out["nodes"].setdefault(str(n), {})
        try:
            res["torch_cudagraph"] = _torch(cfg, n)
        except ImportError as exc:
            res["torch_cudagraph"] = {"skipped": f"not importable: {exc}"}
        except Exception as exc:  # noqa: BLE001
            res["torch_cudagraph"] = error_record(exc)
        base = res.get("arig_update", {}).get("cpu_us_per_replay")
        res["vs_arig_update"] = {k: ratio(v.get("cpu_us_per_replay"), base) for k, v in res.items()
                                 if isinstance(v, dict) and k != "arig_update" and "cpu_us_per_replay" in v}
        u = res.get("arig_update", {}).get("cpu_us_per_replay", {}).get("median")
        log(f"  replay N={n}: arig update {u if u is None else round(u)} us/replay; ratios {res['vs_arig_update']}")
    out["versions"] = versions()
    return out
