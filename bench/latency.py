"""Benchmark 1: completion latency and CPU per wait, kernels of 0, 50, 200 and 1,000 µs.

One task launches one kernel and awaits its completion, again and again.
Methods (``bench._methods``): arig (``v = await dev.submit(fill); await
dev.wait(v)``, a Python fill launching a prepared ``arig.cuda.Launch``),
PyTorch executor (``run_in_executor(None, ev.synchronize)``), PyTorch
polling (``while not ev.query(): await asyncio.sleep(0)``), CuPy host
function (``launch_host_func`` + ``call_soon_threadsafe``) and the raw floor
(ctypes launch + ``cuStreamSynchronize``, no event loop).

Rounds interleave the methods (round r runs every method at every length),
so drift of the machine spreads over all of them.  Latency: submit to
resumed coroutine.  CPU per wait: process CPU (all threads) over a block /
its waits, the launch included.  Ratios are each method's median over
arig's, from this same run.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ._common import KERNEL_US, Config, error_record, latency_block, log
from ._cuda import get_raw
from ._methods import CupyHostFunc, RawFloor, TorchExecutor, TorchPoll, cupy_lib, gpu_facts, open_arig, torch_lib, versions
from ._stats import ratio, summarize

__all__ = ["run"]

#: Samples per block for each kernel length: full and quick.
PER_BLOCK = {0: (600, 60), 50: (400, 40), 200: (250, 25), 1000: (80, 10)}


def run(cfg: Config) -> dict[str, Any]:
    return asyncio.run(_run(cfg))


def _setup_methods(out: dict[str, Any]) -> list[Any]:
    methods: list[Any] = []
    for name, make in (
        ("raw_floor", lambda: RawFloor(get_raw())),
        ("torch_executor", lambda: TorchExecutor(torch_lib())),
        ("torch_poll", lambda: TorchPoll(torch_lib())),
        ("cupy_hostfunc", lambda: CupyHostFunc(cupy_lib())),
    ):
        try:
            methods.append(make())
        except ImportError as exc:
            out["methods"][name] = {"skipped": f"not importable: {exc}"}
        except Exception as exc:  # noqa: BLE001
            out["methods"][name] = error_record(exc)
    return methods


async def _run(cfg: Config) -> dict[str, Any]:
    rounds = cfg.pick(5, 2)
    out: dict[str, Any] = {"kernel_us": list(KERNEL_US), "rounds": rounds, "methods": {}}
    async with open_arig() as a:
        out["device"] = gpu_facts(a.dev)
        methods = [a] + _setup_methods(out)
        out["versions"] = versions()
        ops = {m.name: {us: m.make_op(us) for us in KERNEL_US} for m in methods}
        acc: dict[str, dict[int, dict[str, list[float]]]] = {m.name: {us: {"lat": [], "cpu": [], "resume": []} for us in KERNEL_US} for m in methods}
        live = {m.name for m in methods}
        for m in methods:  # warm-up, discarded
            try:
                for us in KERNEL_US:
                    await asyncio.wait_for(latency_block(ops[m.name][us], cfg.pick(30, 5)), 60)
            except Exception as exc:  # noqa: BLE001
                out["methods"][m.name] = error_record(exc)
                live.discard(m.name)
        t0 = time.perf_counter()
        for r in range(rounds):
            for m in methods:
                if m.name not in live:
                    continue
                try:
                    for us in KERNEL_US:
                        b = await asyncio.wait_for(latency_block(ops[m.name][us], PER_BLOCK[us][1 if cfg.quick else 0]), 120)
                        acc[m.name][us]["lat"] += b["lat"]
                        acc[m.name][us]["resume"] += b["resume"]
                        acc[m.name][us]["cpu"].append(b["cpu_per_op"])
                except Exception as exc:  # noqa: BLE001
                    out["methods"][m.name] = error_record(exc)
                    live.discard(m.name)
            log(f"  latency round {r + 1}/{rounds} done ({time.perf_counter() - t0:.1f} s)")
    for m in methods:
        if m.name not in live:
            continue
        per = {}
        for us in KERNEL_US:
            d = acc[m.name][us]
            lat = summarize(d["lat"], 1e6)
            per[str(us)] = {
                "latency_us": lat,
                "overhead_us": (lat["median"] - us) if lat.get("n") else None,
                "cpu_us_per_wait": summarize(d["cpu"], 1e6),
            }
            if d["resume"]:
                per[str(us)]["report_to_resume_us"] = summarize(d["resume"], 1e6)
        out["methods"][m.name] = {"what": (type(m).__doc__ or "").strip().splitlines()[0], "by_kernel_us": per}
    _ratios(out)
    return out


def _ratios(out: dict[str, Any]) -> None:
    """Each method's median latency and CPU per wait over arig's, per kernel length."""
    base = out["methods"].get("arig", {}).get("by_kernel_us")
    if not base:
        return
    for name, m in out["methods"].items():
        per = m.get("by_kernel_us")
        if name == "arig" or not per:
            continue
        m["vs_arig"] = {
            us: {
                "latency": ratio(per[us]["latency_us"], base[us]["latency_us"]),
                "cpu_per_wait": ratio(per[us]["cpu_us_per_wait"], base[us]["cpu_us_per_wait"]),
            }
            for us in per
            if us in base
        }
