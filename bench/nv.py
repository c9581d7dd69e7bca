"""The NV device (``arig.nvrm.gpu(0)``: NVIDIA's kernel driver, no libcuda) beside the CUDA device.

The same sm_90 cubin (``arig/kernels/kernels.cubin``: ``empty``, ``spin``) on both devices, in one run:

* round trip of one task: ``v = await dev.submit(launch); await dev.wait(v)`` for an empty kernel and
  a 1 ms ``spin``: p50, p50 − kernel, CPU per wait;
* 64 tasks submitting and awaiting empty kernels: completions/s, CPU per completion;
* submit CPU per prepared launch: the process CPU of 2,000 submits of an empty kernel, before the wait.

Ratios are NV over CUDA from this same run.  The issue's goals: submit CPU ≤ 3 µs, empty round trip
≤ 20 µs and below CUDA's, 64 tasks above CUDA's, 1 ms kernel p50 − kernel ≤ 40 µs with ≤ 80 µs CPU.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np

import arig

from ._common import Config, concurrency_level, error_record, latency_block, log
from ._stats import ratio, summarize

__all__ = ["run"]

CUBIN = Path(__file__).resolve().parent.parent / "arig" / "kernels" / "kernels.cubin"
TASKS = 64


def _launch_type(kind: str) -> Any:
    if kind == "nv":
        import arig.nvrm

        return arig.nvrm.Launch
    import arig.cuda

    return arig.cuda.Launch


def _opener(kind: str) -> Any:
    if kind == "nv":
        import arig.nvrm

        return arig.nvrm.gpu(0)
    import arig.cuda

    return arig.cuda.gpu(0)


async def _device(kind: str, cfg: Config) -> dict[str, Any]:
    from arig.cuda import pack

    Launch = _launch_type(kind)
    dev = await arig.open(_opener(kind))
    out: dict[str, Any] = {"device": dev.name}
    try:
        img = await dev.load(CUBIN.read_bytes())
        empty = Launch(img.function("empty"), 1, 1, b"")
        spin = Launch(img.function("spin"), 1, 1, pack(np.uint64(1_000_000)))

        async def once(launch: Any) -> None:
            await dev.wait(await dev.submit(launch))

        await latency_block(lambda: once(empty), 200)  # warm-up: estimates learned
        one = await latency_block(lambda: once(empty), cfg.pick(1000, 100))
        out["empty"] = {"latency_us": summarize(one["lat"], 1e6), "cpu_us_per_wait": one["cpu_per_op"] * 1e6}
        await latency_block(lambda: once(spin), 20)
        ms = await latency_block(lambda: once(spin), cfg.pick(200, 20))
        lat = summarize(ms["lat"], 1e6)
        out["spin_1ms"] = {"latency_us": lat, "over_kernel_us": lat["median"] - 1000.0 if lat.get("n") else None, "cpu_us_per_wait": ms["cpu_per_op"] * 1e6}
        many = await asyncio.wait_for(concurrency_level(lambda _k: lambda: once(empty), TASKS, cfg.pick(0.5, 0.2), cfg.pick(2.0, 0.5)), 120)
        out[f"tasks_{TASKS}"] = many
        n = cfg.pick(2000, 200)
        per: list[float] = []
        for _ in range(5):
            c0 = time.process_time()
            for _ in range(n):
                v = await dev.submit(empty)
            per.append((time.process_time() - c0) / n)
            await dev.wait(v)
        out["submit_cpu_us"] = summarize(per, 1e6)
    finally:
        await dev.stop()
    return out


def run(cfg: Config) -> dict[str, Any]:
    out: dict[str, Any] = {"cubin": str(CUBIN.relative_to(CUBIN.parent.parent.parent)), "devices": {}}
    for kind in ("cuda", "nv"):
        try:
            r = asyncio.run(_device(kind, cfg))
        except Exception as exc:  # noqa: BLE001 - one device's failure is reported, the other still runs
            r = error_record(exc)
        out["devices"][kind] = r
        if "error" in r:
            log(f"  nv bench {kind}: {r['error']}")
        else:
            m = r[f"tasks_{TASKS}"]
            log(
                f"  nv bench {kind}: empty p50 {r['empty']['latency_us']['median']:.1f} us cpu {r['empty']['cpu_us_per_wait']:.1f}; "
                f"1 ms over {r['spin_1ms']['over_kernel_us']:.1f} us cpu {r['spin_1ms']['cpu_us_per_wait']:.1f}; "
                f"{TASKS} tasks {m['completions_per_s']:.0f}/s cpu {m['cpu_us_per_completion'] or 0:.1f}; submit {r['submit_cpu_us']['median']:.2f} us"
            )
    nv, cu = out["devices"].get("nv", {}), out["devices"].get("cuda", {})
    if "error" not in nv and "error" not in cu:
        out["nv_over_cuda"] = {
            "empty_p50": ratio(nv["empty"]["latency_us"], cu["empty"]["latency_us"]),
            "empty_cpu": ratio(nv["empty"]["cpu_us_per_wait"], cu["empty"]["cpu_us_per_wait"]),
            "completions_per_s": ratio(nv[f"tasks_{TASKS}"]["completions_per_s"], cu[f"tasks_{TASKS}"]["completions_per_s"]),
            "submit_cpu": ratio(nv["submit_cpu_us"], cu["submit_cpu_us"]),
        }
    return out
