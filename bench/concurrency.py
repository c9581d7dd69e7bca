"""Benchmark 2: concurrency sweep, 1 … 1024 tasks each submitting empty kernels and awaiting them.

Each task loops ``v = await dev.submit(launch); await dev.wait(v)`` (the
native fast path, ``launch`` a prepared ``arig.cuda.Launch`` of the empty
kernel) for a warm-up then a measured window.  Per task count:
completions/s (the median over 10 slices of the window, with spread),
latency p50/p99, the event loop's longest stall (``arig._stall.StallMeter``)
and process CPU per completion.  The sweep runs on the default asyncio loop
with one device.  At 64 tasks, each in a fresh loop of its own (arig with a
fresh device): arig on uvloop (``arig_uvloop``) and on ``arig.new_event_loop()``
(``arig_spinloop``), arig through a Python fill (``arig_pyfill``; run inside ``submit``: ``arig_pyfill_inline``), and the
baselines: the PyTorch executor and polling patterns (polling also on
uvloop) and CuPy's host function (same empty kernel; see ``bench._methods``).
``arig_over_torch_poll``: each arig row's completions/s and CPU per
completion over the PyTorch busy poll's, at 64 tasks in this run.

GPU idle share is an *estimate*: ``1 - completions/s x t_kernel`` where
``t_kernel`` is the GPU time of one empty kernel measured in the same run
inside a graph of 1,000 of them (back-to-back, the least a kernel occupies
the GPU).  A kernel launched alone occupies the GPU somewhat longer, so
the figure is an upper bound of the idle share.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ._common import LOOPS, TASKS, Config, LoopUnavailable, aguarded, concurrency_level, error_record, log, loop_name, loop_versions, run_in_loop
from ._cuda import get_raw
from ._methods import cupy_lib, gpu_facts, gpu_time_per_kernel, open_arig, open_method, torch_lib, versions
from ._stats import dig, ratio

__all__ = ["run", "VARIANTS", "BASELINES"]

BASELINE_TASKS = 64

#: arig at ``BASELINE_TASKS`` tasks on other loops or paths: name -> (method kind, loop).
VARIANTS = {
    "arig_uvloop": ("arig", "uvloop"),
    "arig_spinloop": ("arig", "spin"),
    "arig_pyfill": ("arig_pyfill", "asyncio"),
    "arig_pyfill_inline": ("arig_pyfill_inline", "asyncio"),
}
#: Baselines at ``BASELINE_TASKS`` tasks: name -> (method kind, loop).
BASELINES = {
    "torch_executor": ("torch_executor", "asyncio"),
    "torch_poll": ("torch_poll", "asyncio"),
    "torch_poll_uvloop": ("torch_poll", "uvloop"),
    "cupy_hostfunc": ("cupy_hostfunc", "asyncio"),
}


def run(cfg: Config) -> dict[str, Any]:
    warm, duration = cfg.pick((0.3, 1.5), (0.05, 0.25))
    out: dict[str, Any] = {"warm_s": warm, "window_s": duration, "kernel": "empty", "loops": loop_versions(),
                           "arig": [], "variants": {}, "baselines": {}}
    try:
        run_in_loop("asyncio", _arig_sweep, cfg, out, warm, duration)
    except Exception as exc:  # noqa: BLE001 - the device did not open: every level failed
        out["arig_error"] = error_record(exc)
        log(f"  arig sweep: {out['arig_error']['error']}")
    g = out.get("gpu_time_per_kernel") or {}
    t_kernel = dig(g, "graph_us_per_kernel", "median") if "error" not in g else None
    for group, table in (("variants", VARIANTS), ("baselines", BASELINES)):
        for name, (kind, loop) in table.items():
            out[group][name] = _level(name, kind, loop, warm, duration, t_kernel)
            if kind in ("torch_executor", "torch_poll", "cupy_hostfunc"):
                _sync_baselines()
    out["versions"] = versions()
    at = next((r for r in out["arig"] if r.get("tasks") == BASELINE_TASKS and "error" not in r), None)
    if at:
        for b in list(out["variants"].values()) + list(out["baselines"].values()):
            if "completions_per_s" in b:
                b["vs_arig"] = {
                    "completions_per_s": ratio(b["completions_per_s"], at["completions_per_s"]),
                    "p99_latency": ratio(b["latency_us"].get("p99"), at["latency_us"].get("p99")),
                    "cpu_per_completion": ratio(b.get("cpu_us_per_completion"), at.get("cpu_us_per_completion")),
                }
    # arig (each loop / path) over the PyTorch busy poll at 64 tasks: completions/s and CPU per completion.
    poll = out["baselines"].get("torch_poll", {})
    if "completions_per_s" in poll:
        rows = {"arig": at or {}, **out["variants"]}
        out["arig_over_torch_poll"] = {
            name: {
                "completions_per_s": ratio(r.get("completions_per_s"), poll["completions_per_s"]),
                "cpu_per_completion": ratio(r.get("cpu_us_per_completion"), poll.get("cpu_us_per_completion")),
            }
            for name, r in rows.items()
            if "completions_per_s" in r
        }
    return out


async def _arig_sweep(cfg: Config, out: dict[str, Any], warm: float, duration: float) -> None:
    """arig (native Launch) at every task count, one fresh device on the default loop."""
    async with open_arig() as a:
        out["loop_class"] = loop_name()
        out["completion"] = gpu_facts(a.dev).get("completion")
        out["what"] = a.what
        try:
            raw = get_raw()
        except Exception as exc:  # noqa: BLE001 - no events to time with: no idle estimate, the sweep still runs
            out["gpu_time_per_kernel"] = error_record(exc)
        else:
            await aguarded(out, "gpu_time_per_kernel", gpu_time_per_kernel(a, raw, 1000, cfg.pick(5, 2), separate=False), timeout=60)
        g = out["gpu_time_per_kernel"]
        t_kernel = g.get("graph_us_per_kernel", {}).get("median") if "error" not in g else None
        for tasks in TASKS:
            try:
                r = await asyncio.wait_for(concurrency_level(lambda _k: a.make_op(0), tasks, warm, duration), 60 + warm + duration)
            except Exception as exc:  # noqa: BLE001
                r = {"tasks": tasks, **error_record(exc)}
            _idle(r, t_kernel)
            _log(f"arig {tasks}", r)
            out["arig"].append(r)


def _level(name: str, kind: str, loop: str, warm: float, duration: float, t_kernel: float | None) -> dict[str, Any]:
    """One method at ``BASELINE_TASKS`` tasks in a fresh loop of its own (and, for arig, a fresh device)."""

    async def measure() -> dict[str, Any]:
        async with open_method(kind, name) as m:
            m.make_op(0)  # fail here, not inside 64 tasks
            r = await asyncio.wait_for(concurrency_level(lambda _k: m.make_op(0), BASELINE_TASKS, warm, duration), 60 + warm + duration)
            r["what"] = f"{m.what} [loop: {LOOPS[loop]}]"
            r["loop"], r["loop_class"] = loop, m.loop
            if m.facts:
                r["completion"] = m.facts.get("completion")
            return r

    try:
        r = run_in_loop(loop, measure)
    except LoopUnavailable as exc:
        return {"skipped": f"loop {loop!r}: {exc}", "loop": loop}
    except ImportError as exc:
        return {"skipped": f"not importable: {exc}", "loop": loop}
    except Exception as exc:  # noqa: BLE001
        r = {"tasks": BASELINE_TASKS, "loop": loop, **error_record(exc)}
        log(f"  {name} {BASELINE_TASKS}: {r['error']}")
        return r
    _idle(r, t_kernel)
    _log(f"{name} {BASELINE_TASKS}", r)
    return r


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
