"""Benchmark 2: concurrency sweep, 1 … 1024 tasks each submitting small fills and awaiting them.

Each task loops ``v = await dev.submit(fill, empty); await dev.wait(v)``
for a warm-up then a measured window.  Per task count: completions/s (the
median over 10 slices of the window, with spread), latency p50/p99, the
event loop's longest stall (``arig._stall.StallMeter``) and process CPU per
completion.  Baselines at 64 tasks: the PyTorch executor and polling
patterns and CuPy's host function (same empty kernel; see ``bench._methods``).

GPU idle share is an *estimate*: ``1 - completions/s x t_kernel`` where
``t_kernel`` is the GPU time of one empty kernel measured in the same run
inside a graph of 1,000 of them (back-to-back, the least a kernel occupies
the GPU).  A kernel launched alone occupies the GPU somewhat longer, so
the figure is an upper bound of the idle share.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ._common import TASKS, Config, aguarded, concurrency_level, error_record, log
from ._cuda import get_raw
from ._methods import CupyHostFunc, TorchExecutor, TorchPoll, cupy_lib, gpu_time_per_kernel, open_arig, torch_lib, versions
from ._stats import ratio

__all__ = ["run"]

BASELINE_TASKS = 64


def run(cfg: Config) -> dict[str, Any]:
    return asyncio.run(_run(cfg))


async def _run(cfg: Config) -> dict[str, Any]:
    warm, duration = cfg.pick((0.3, 1.5), (0.05, 0.25))
    out: dict[str, Any] = {"warm_s": warm, "window_s": duration, "kernel": "empty", "arig": [], "baselines": {}}
    async with open_arig() as a:
        await aguarded(out, "gpu_time_per_kernel", gpu_time_per_kernel(a, get_raw(), 1000, cfg.pick(5, 2), separate=False), timeout=60)
        t_kernel = out["gpu_time_per_kernel"].get("graph_us_per_kernel", {}).get("median") if "error" not in out["gpu_time_per_kernel"] else None
        for tasks in TASKS:
            try:
                r = await asyncio.wait_for(concurrency_level(lambda _k: a.make_op(0), tasks, warm, duration), 60 + warm + duration)
            except Exception as exc:  # noqa: BLE001
                r = {"tasks": tasks, **error_record(exc)}
            _idle(r, t_kernel)
            _log(f"arig {tasks}", r)
            out["arig"].append(r)
    await _baselines(cfg, out, warm, duration, t_kernel)
    out["versions"] = versions()
    at = next((r for r in out["arig"] if r.get("tasks") == BASELINE_TASKS and "error" not in r), None)
    if at:
        for b in out["baselines"].values():
            if "completions_per_s" in b:
                b["vs_arig"] = {
                    "completions_per_s": ratio(b["completions_per_s"], at["completions_per_s"]),
                    "p99_latency": ratio(b["latency_us"].get("p99"), at["latency_us"].get("p99")),
                    "cpu_per_completion": ratio(b.get("cpu_us_per_completion"), at.get("cpu_us_per_completion")),
                }
    return out


async def _baselines(cfg: Config, out: dict[str, Any], warm: float, duration: float, t_kernel: float | None) -> None:
    for name, make in (
        ("torch_executor", lambda: TorchExecutor(torch_lib())),
        ("torch_poll", lambda: TorchPoll(torch_lib())),
        ("cupy_hostfunc", lambda: CupyHostFunc(cupy_lib())),
    ):
        try:
            m = make()
        except ImportError as exc:
            out["baselines"][name] = {"skipped": f"not importable: {exc}"}
            continue
        except Exception as exc:  # noqa: BLE001
            out["baselines"][name] = error_record(exc)
            continue
        try:
            m.make_op(0)  # fail here, not inside 64 tasks
            r = await asyncio.wait_for(concurrency_level(lambda _k, m=m: m.make_op(0), BASELINE_TASKS, warm, duration), 60 + warm + duration)
            r["what"] = (type(m).__doc__ or "").strip().splitlines()[0]
            _idle(r, t_kernel)
            _log(f"{name} {BASELINE_TASKS}", r)
            out["baselines"][name] = r
        except Exception as exc:  # noqa: BLE001
            out["baselines"][name] = error_record(exc)
        finally:
            _sync_baselines()


def _sync_baselines() -> None:
    """Let every baseline stream drain before the next measurement."""
    for get in (torch_lib, cupy_lib):
        try:
            lib = get()
        except Exception:  # noqa: BLE001
            continue
        try:
            lib.stream.synchronize()
        except Exception:  # noqa: BLE001
            pass


def _idle(r: dict[str, Any], t_kernel_us: float | None) -> None:
    if t_kernel_us is None or "completions_per_s" not in r:
        r["gpu_idle_share_est"] = None
        return
    r["gpu_idle_share_est"] = max(0.0, 1.0 - r["completions_per_s"] * t_kernel_us * 1e-6)


def _log(name: str, r: dict[str, Any]) -> None:
    if "error" in r:
        log(f"  {name}: {r['error']}")
        return
    log(f"  {name:>20} tasks: {r['completions_per_s']:9.0f}/s, p99 {r['latency_us'].get('p99', 0):8.0f} us, stall {r['longest_stall_ms']:.2f} ms")
