"""The table (stdout and ``table.md``) and the goals of a results dict (the plots: ``_plots``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ._stats import dig, fmt

__all__ = ["table", "goals", "GOALS"]

PLOT_FILES = ("latency.png", "concurrency.png", "overhead.png")

def _ratio(x: Any) -> str:
    return "–" if x is None else f"{x:.2f}×"


def _md(title: str, head: list[str], rows: Iterable[list[Any]]) -> list[str]:
    rows = [[fmt(c) if not isinstance(c, str) else c for c in r] for r in rows]
    if not rows:
        return []
    out = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


# -- sections ------------------------------------------------------------------------


def _latency_rows(methods: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for name, m in methods.items():
        per = m.get("by_kernel_us")
        if not per:
            continue
        for us, r in per.items():
            lat = r["latency_us"]
            rows.append([name, us, lat.get("median"), lat.get("p99"), lat.get("iqr"), r.get("overhead_us"),
                         dig(r, "cpu_us_per_wait", "median"), _ratio(dig(m, "vs_arig", us, "latency")), _ratio(dig(m, "vs_arig", us, "cpu_per_wait"))])
    return rows


_LAT_HEAD = ["method", "kernel µs", "latency p50 µs", "p99", "IQR", "p50 − kernel µs", "CPU/wait µs", "latency ×arig", "CPU ×arig"]
_CONC_HEAD = ["device / method", "tasks", "completions/s (p50 of windows)", "IQR", "latency p50 µs", "p99 µs", "longest loop stall ms", "CPU/completion µs", "GPU idle (est.)", "/s ×arig"]


def _conc_row(name: str, r: dict[str, Any]) -> list[Any]:
    if "error" in r:
        return [name, r.get("tasks"), "error: " + r["error"][:60], "", "", "", "", "", "", ""]
    idle = r.get("gpu_idle_share_est")
    return [name, r["tasks"], dig(r, "completions_per_s_windows", "median"), dig(r, "completions_per_s_windows", "iqr"),
            dig(r, "latency_us", "median"), dig(r, "latency_us", "p99"), r.get("longest_stall_ms"), r.get("cpu_us_per_completion"),
            "–" if idle is None else f"{idle * 100:.1f} %", _ratio(dig(r, "vs_arig", "completions_per_s"))]


def table(results: dict[str, Any]) -> str:
    b = results.get("benchmarks", {})
    meta = results.get("meta", {})
    lines = [f"# arig benchmarks ({'quick' if meta.get('quick') else 'full'} run)", "",
             f"{meta.get('date', '')} · {meta.get('host', '')} · {meta.get('cpu', '')} · Python {meta.get('python', '')} · GPU: {meta.get('gpu', 'none')}", "",
             "Medians over many runs; p99 and IQR beside them; ratios are measured in this same run.", ""]
    for section in _SECTIONS:
        lines += section(b)
    problems = []
    for name, r in b.items():
        problems += [f"- {name}{p}" for p in _problems(r, "")]
    if problems:
        lines += ["### Errors and skips", ""] + problems + [""]
    gl = results.get("goals")
    if not isinstance(gl, list):
        try:
            gl = goals(results)
        except Exception as exc:  # noqa: BLE001
            gl = [{"error": f"{type(exc).__name__}: {exc}"}]
    lines += _goals_md(gl)
    return "\n".join(lines)


def _latency_section(b: dict[str, Any]) -> list[str]:
    lat = dig(b, "latency", "methods")
    lines = _md("1. Completion latency and CPU per wait (GPU, one task)", _LAT_HEAD, _latency_rows(lat)) if lat else []
    return lines + _latency_notes(lat or {})


def _concurrency_section(b: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    rows = [_conc_row("arig (GPU)", r) for r in dig(b, "concurrency", "arig") or []]
    for group in ("variants", "baselines"):
        for name, r in (dig(b, "concurrency", group) or {}).items():
            if "tasks" in r or "error" in r:
                rows.append(_conc_row(name, {"tasks": 64, **r}))
    if rows:
        lines += _md("2. Concurrency sweep (GPU, empty kernel; arig: native Launch on the default loop unless named)", _CONC_HEAD, rows)
    vs = dig(b, "concurrency", "arig_over_torch_poll")
    if vs:
        lines += ["arig ÷ torch_poll at 64 tasks (same run), completions/s and CPU per completion: "
                  + "; ".join(f"{n} {_ratio(v.get('completions_per_s'))} /s, {_ratio(v.get('cpu_per_completion'))} CPU" for n, v in vs.items()), ""]
    gk = dig(b, "concurrency", "gpu_time_per_kernel", "graph_us_per_kernel", "median")
    if gk is not None:
        lines += [f"GPU idle share estimated with {gk:.3f} µs of GPU time per empty kernel (in-graph, this run): an upper bound.", ""]
    return lines


def _submit_section(b: dict[str, Any]) -> list[str]:
    sub = dig(b, "submit", "methods")
    if not sub:
        return []
    rows = []
    for name, r in sub.items():
        if "cpu_us_per_submit" in r:
            rows.append([name, dig(r, "cpu_us_per_submit", "median"), dig(r, "cpu_us_per_submit", "p99"), dig(r, "cpu_us_per_submit", "iqr"),
                         dig(r, "loop_thread_cpu_us_per_submit", "median"), dig(r, "wall_us_per_submit", "median"), _ratio(r.get("vs_raw_ctypes"))])
    lines = _md("3. Submit overhead (empty kernel, CPU µs per launch; median over blocks)",
                ["method", "CPU µs/submit p50", "p99", "IQR", "loop-thread CPU µs", "wall µs", "×raw ctypes"], rows)
    paths = sorted({str(r["completion"]) for r in sub.values() if isinstance(r, dict) and r.get("completion")})
    if paths:
        lines += [f"arig's completion path: {'; '.join(paths)}", ""]
    return lines


def _loop_section(b: dict[str, Any]) -> list[str]:
    lp = b.get("loop")
    if not (isinstance(lp, dict) and ("graphs" in lp or "pinned" in lp)):
        return []
    rows = []
    for n, res in (lp.get("graphs") or {}).items():
        for mode in ("graph_async", "graph_on_loop"):
            r = res.get(mode, {})
            if "longest_stall_ms" in r:
                rows.append([mode, f"{int(n):,} kernels", dig(r, "longest_stall_ms", "median"), dig(r, "longest_stall_ms", "max"), dig(r, "action_ms", "median"),
                             dig(r, "submitter_max_us", "median"), _ratio(res.get("stall_on_loop_over_async")) if mode == "graph_on_loop" else ""])
    pn = lp.get("pinned") or {}
    for mode in ("pinned_arig", "pinned_on_loop"):
        r = pn.get(mode, {})
        if "longest_stall_ms" in r:
            rows.append([mode, f"{pn.get('buffers')} × {pn.get('bytes_each', 0) >> 20} MiB", dig(r, "longest_stall_ms", "median"), dig(r, "longest_stall_ms", "max"),
                         dig(r, "action_ms", "median"), dig(r, "submitter_max_us", "median"), _ratio(pn.get("stall_on_loop_over_arig")) if mode == "pinned_on_loop" else ""])
    return _md("4. Event-loop responsiveness (another task keeps submitting meanwhile)",
               ["action", "size", "longest stall ms p50", "max", "action ms p50", "submitter worst latency µs p50", "stall ×arig"], rows)


def _replay_section(b: dict[str, Any]) -> list[str]:
    rp = b.get("replay")
    if not (isinstance(rp, dict) and rp.get("nodes")):
        return []
    rows = []
    for n, res in rp["nodes"].items():
        for mode in ("arig_update", "arig_reinstantiate", "torch_cudagraph"):
            r = res.get(mode, {})
            if "cpu_us_per_replay" in r:
                rows.append([n, mode, dig(r, "cpu_us_per_replay", "median"), dig(r, "cpu_us_per_replay", "p99"), dig(r, "cpu_us_per_replay", "iqr"),
                             _ratio(dig(res, "vs_arig_update", mode)) if mode != "arig_update" else "", r.get("verified")])
            elif r:
                rows.append([n, mode, "error" if "error" in r else "skipped", "", "", "", ""])
    lines = _md("5. Graph replay with arguments changing every run (store kernels; CPU µs per replay)",
                ["nodes", "method", "CPU µs/replay p50", "p99", "IQR", "×arig update", "verified"], rows)
    gt = rp.get("gpu_time_per_kernel") or {}
    if "graph_us_per_kernel" in gt:
        lines += _md("5b. GPU time per empty kernel (events, 1,000 kernels)", ["how", "µs/kernel p50", "p99", "IQR", "ratio"],
                     [["graph of 1,000", dig(gt, "graph_us_per_kernel", "median"), dig(gt, "graph_us_per_kernel", "p99"), dig(gt, "graph_us_per_kernel", "iqr"), ""],
                      ["1,000 launches in one fill", dig(gt, "launches_us_per_kernel", "median"), dig(gt, "launches_us_per_kernel", "p99"),
                       dig(gt, "launches_us_per_kernel", "iqr"), _ratio(gt.get("launches_over_graph"))]])
    return lines


def _fault_section(b: dict[str, Any]) -> list[str]:
    ft = b.get("fault")
    if not (isinstance(ft, dict) and "summary" in ft):
        return []
    s = ft["summary"]
    rows = [[k, dig(s, k, "median"), dig(s, k, "p99"), dig(s, k, "iqr"), dig(s, k, "n")] for k in
            ("first_fail_ms", "fanout_ms", "submit_after_loss_us", "stop_ms", "reopen_ms", "saxpy_after_reopen_ms") if isinstance(s.get(k), dict)]
    refused = s.get("reopen_refused")
    reopen = (f"reopen in the process that faulted: refused ({str(refused)[:160]})" if refused
              else f"saxpy correct after reopen: {fmt(s.get('saxpy_after_reopen_ok'))}")
    return _md("6. Failure fan-out (illegal address, 100 waiters; subprocess)", ["figure", "p50", "p99", "IQR", "cycles"], rows) + [
        f"all waiters failed with DeviceLost: {fmt(s.get('all_waiters_lost'))}; submit after loss raised: {s.get('submit_after_loss_raised')}; "
        f"{reopen}; cold open {fmt(s.get('cold_open_ms'))} ms", ""]


def _idle_section(b: dict[str, Any]) -> list[str]:
    idle = dig(b, "idle", "cases")
    if not isinstance(idle, dict):
        return []
    rows = []
    for case, r in idle.items():
        if "process_cpu_pct" in r:
            busy = ", ".join(f"{t['name']} {fmt(t['sched_ms'] if t.get('sched_ms') is not None else t['cpu_ms'])}" for t in r.get("threads", [])
                             if (t.get("sched_ms") or 0) > 0.5 or t.get("cpu_ms", 0) > 0) or "none"
            rows.append([case, r.get("completion") or "–", r.get("loop"), f"{r['process_cpu_pct']:.2f} %", r.get("thread_count"),
                         r.get("max_thread_cpu_pct"), busy])
        elif r:
            rows.append([case, "error: " + r["error"][:60] if "error" in r else "skipped", r.get("loop") or "", "", "", "", ""])
    return _md(f"8. Idle: {fmt(dig(b, 'idle', 'sleep_s'))} s asleep with nothing pending, after {dig(b, 'idle', 'kernels_before')} kernels",
               ["case", "completion", "loop", "process CPU (% of a core)", "threads", "busiest thread %", "threads on CPU (ms over the sleep)"], rows)


def _host_section(b: dict[str, Any]) -> list[str]:
    h = b.get("host")
    if not isinstance(h, dict):
        return []
    lines: list[str] = []
    hl = h.get("latency") or {}
    if "latency_us" in hl:
        lines += _md("7. Host device (arig.host.cpu()): no-op fill, one task", ["figure", "p50", "p99", "IQR", "n"],
                     [["latency µs", dig(hl, "latency_us", "median"), dig(hl, "latency_us", "p99"), dig(hl, "latency_us", "iqr"), dig(hl, "latency_us", "n")],
                      ["CPU/wait µs", dig(hl, "cpu_us_per_wait", "median"), dig(hl, "cpu_us_per_wait", "p99"), dig(hl, "cpu_us_per_wait", "iqr"), dig(hl, "cpu_us_per_wait", "n")]])
    hc = h.get("concurrency")
    if isinstance(hc, list):
        lines += _md("7b. Host device concurrency sweep", _CONC_HEAD, [_conc_row("arig (host)", r) for r in hc])
    return lines


def _trio_section(b: dict[str, Any]) -> list[str]:
    t = b.get("trio")
    if not (isinstance(t, dict) and t.get("rows")):
        return []
    rounds = t.get("rounds", 1)
    lines = _md(f"7c. The same devices under trio beside asyncio (anyio.run, each library's own run; each figure the median of {rounds} alternating round(s))",
                ["device/library", "empty p50 µs", "p99", "CPU/wait µs", "64 tasks /s", "CPU/completion µs", "1 ms late p50 µs", "10 ms late p50 µs"],
                [_trio_row(name, r) for name, r in t["rows"].items()])
    ratios = t.get("ratio")
    if isinstance(ratios, dict) and ratios:
        lines += _md("7c, ratios: trio without its spin (ARIG_TRIO_SPIN=0, rows …/trio), its figure over asyncio's (the median of the rounds' ratios; 64 tasks: completions/s, below 1 is slower)",
                     ["device", "empty p50", "64 tasks /s", "1 ms late p50", "10 ms late p50"],
                     [[kind, r.get("empty_p50"), r.get("tasks_64"), r.get("late_1ms"), r.get("late_10ms")] for kind, r in ratios.items() if isinstance(r, dict)])
    spun = t.get("ratio_spin")
    if isinstance(spun, dict) and spun:
        lines += _md("7c, ratios with trio's spin before it blocks (the default, rows …/trio+spin): its figure over asyncio's, the same rounds",
                     ["device", "empty p50", "64 tasks /s", "1 ms late p50", "10 ms late p50"],
                     [[kind, r.get("empty_p50"), r.get("tasks_64"), r.get("late_1ms"), r.get("late_10ms")] for kind, r in spun.items() if isinstance(r, dict)])
    for name, r in t["rows"].items():
        for key, what in ((("empty", "per_wait"), "one task, empty kernel, the native core's counters per wait"),
                          (("tasks_64", "per_completion"), "64 tasks, the native core's counters per completion")):
            per = dig(r, *key) if isinstance(r, dict) else None
            if isinstance(per, dict) and per:
                lines.append(f"{name}, {what}: " + ", ".join(f"{k} {v:.3f}" for k, v in per.items()))
                lines.append("")
    return lines


def _trio_row(name: str, r: dict[str, Any]) -> list[Any]:
    if "empty" not in r:
        return [name, "error: " + str(r.get("error", ""))[:60], "", "", "", "", "", ""]
    m = r.get("tasks_64", {})
    return [name, dig(r, "empty", "latency_us", "median"), dig(r, "empty", "latency_us", "p99"), dig(r, "empty", "cpu_us_per_wait"),
            m.get("completions_per_s"), m.get("cpu_us_per_completion"), dig(r, "late_1ms", "lateness_us", "p50"), dig(r, "late_10ms", "lateness_us", "p50")]


def _interop_section(b: dict[str, Any]) -> list[str]:
    io = b.get("interop")
    if not (isinstance(io, dict) and io.get("methods")):
        return []
    lines = _md(f"9. Awaiting a PyTorch stream ({io.get('work', '')})",
                ["method", "1 task p50 µs", "p99", "CPU µs/wait", "64 tasks /s", "p99 µs", "CPU µs/completion", "/s ×arig_adopt"],
                [_interop_row(name, r) for name, r in io["methods"].items()])
    for name, r in io["methods"].items():
        per = r.get("per_wait_one_task") if isinstance(r, dict) else None
        if per:
            lines.append(f"{name}, the native core's counters per wait (one task): " + ", ".join(f"{k} {v:.2f}" for k, v in per.items()))
            lines.append("")
    loops = {"asyncio": io["methods"], **(io.get("loops") or {})}
    lines += _md("9b. The adopted stream beside busy polling, on each loop (arig_adopt over torch_poll)",
                 ["loop", "arig_adopt p50 µs", "torch_poll p50 µs", "p50 ×poll", "arig_adopt 64 tasks /s", "torch_poll 64 tasks /s", "/s ×poll"],
                 [_loop_row(kind, rows) for kind, rows in loops.items()])
    return lines


def _loop_row(kind: str, rows: dict[str, Any]) -> list[Any]:
    a, p = rows.get("arig_adopt"), rows.get("torch_poll")
    if not (isinstance(a, dict) and isinstance(p, dict) and "latency_us" in a and "latency_us" in p):
        why = rows.get("error") or (a or {}).get("error") or (p or {}).get("error") or "skipped"
        return [kind, "error: " + str(why)[:60], "", "", "", "", ""]
    am, pm = a.get("tasks_64", {}), p.get("tasks_64", {})
    p50 = dig(a, "latency_us", "median"), dig(p, "latency_us", "median")
    rate = am.get("completions_per_s"), pm.get("completions_per_s")
    return [kind, p50[0], p50[1], _ratio(p50[0] / p50[1] if p50[0] and p50[1] else None), _rate_or_why(am), _rate_or_why(pm),
            _ratio(rate[0] / rate[1] if rate[0] and rate[1] else None)]


def _rate_or_why(level: dict[str, Any]) -> Any:
    """A concurrency level's completions/s, or the name of the error that left it without one
    (e.g. "starved": ``bench._common.Starved``)."""
    return str(level["error"]).split(":")[0].lower() if "error" in level else level.get("completions_per_s")


def _interop_row(name: str, r: dict[str, Any]) -> list[Any]:
    if "latency_us" not in r:
        return [name, "error" if "error" in r else "skipped", "", "", "", "", "", ""]
    m = r.get("tasks_64", {})
    vs = r.get("vs_arig_adopt", {})
    return [name, dig(r, "latency_us", "median"), dig(r, "latency_us", "p99"), r.get("cpu_us_per_wait"), _rate_or_why(m),
            dig(m, "latency_us", "p99"), m.get("cpu_us_per_completion"), _ratio(vs.get("completions_per_s")) if name != "arig_adopt" else ""]


def _nv_section(b: dict[str, Any]) -> list[str]:
    nvb = b.get("nv")
    if not (isinstance(nvb, dict) and nvb.get("devices")):
        return []
    return _md("10. The NV device (kernel driver, no libcuda) beside the CUDA device (same cubin)",
               ["device", "empty p50 µs", "CPU/wait µs", "1 ms: p50 − kernel µs", "1 ms: CPU/wait µs", "64 tasks /s", "CPU/completion µs", "submit CPU µs"],
               [_nv_row(kind, r) for kind, r in nvb["devices"].items()])


def _nv_row(kind: str, r: dict[str, Any]) -> list[Any]:
    if "empty" not in r:
        return [kind, "error: " + str(r.get("error", ""))[:60], "", "", "", "", "", ""]
    m = r.get("tasks_64", {})
    return [r.get("device", kind), dig(r, "empty", "latency_us", "median"), dig(r, "empty", "cpu_us_per_wait"), dig(r, "spin_1ms", "over_kernel_us"),
            dig(r, "spin_1ms", "cpu_us_per_wait"), m.get("completions_per_s"), m.get("cpu_us_per_completion"), dig(r, "submit_cpu_us", "median")]


def _sweep_section(b: dict[str, Any]) -> list[str]:
    from ._report_sweep import sweep_section

    return sweep_section(b, _md)


def _peers_section(b: dict[str, Any]) -> list[str]:
    r = b.get("peers")
    if not isinstance(r, dict) or "after" not in r:
        return []
    head = ["hand-off", "pair", "median µs (GPU stamps)", "p99 µs", "wall median µs", "stamps missing"]
    pairs = [(str(r.get("pair", "")), r), *((name, x) for name, x in (r.get("pairs") or {}).items() if isinstance(x, dict))]
    rows = [[m, name, dig(x, m, "handoff_us", "median"), dig(x, m, "handoff_us", "p99"), dig(x, m, "wall_us", "median"), dig(x, m, "stamps_missing")]
            for name, x in pairs for m in ("after", "round_trip") if m in x]  # fmt: skip
    lines = _md("Across devices: A's kernel done to B's kernel started", head, rows)
    skipped = (r.get("nv") or {}).get("skipped")
    return lines + ([f"NV pairs not measured: {skipped}", ""] if skipped else [])


#: The table's sections, in the order they print (the host device's, 7, follows the idle one, 8).
_SECTIONS: tuple[Callable[[dict[str, Any]], list[str]], ...] = (
    _latency_section, _concurrency_section, _submit_section, _loop_section, _replay_section,
    _fault_section, _idle_section, _host_section, _trio_section, _interop_section, _nv_section, _sweep_section,
    _peers_section,
)

def _latency_notes(methods: dict[str, Any]) -> list[str]:
    """Which event loop and completion path each latency row ran on."""
    loops: list[str] = []
    paths: dict[str, list[str]] = {}
    for name, m in methods.items():
        if not isinstance(m, dict) or "by_kernel_us" not in m:
            continue
        cls = str(m.get("loop_class") or m.get("loop") or "?")
        loops.append(f"{name} {cls.replace('asyncio.unix_events.', '')}")
        if m.get("completion"):
            paths.setdefault(str(m["completion"]), []).append(name)
    if not loops:
        return []
    text = "Event loops: " + ", ".join(loops) + "."
    if paths:
        text += " arig's completion path: " + "; ".join(f"{p} ({', '.join(n)})" for p, n in paths.items()) + "."
    return [text, ""]


# -- goals ---------------------------------------------------------------------------

#: (id, goal, path into results["benchmarks"] (a "tasks=N" step picks that list entry), op, limit, unit)
GOALS: tuple[tuple[str, str, tuple[str, ...], str, float, str], ...] = (
    ("rt_p50_asyncio", "empty round trip p50, asyncio default loop (latency: arig, 0 µs)",
     ("latency", "methods", "arig", "by_kernel_us", "0", "latency_us", "median"), "<=", 30.0, "µs"),
    ("rt_p50_uvloop", "empty round trip p50, uvloop (latency: arig_uvloop, 0 µs)",
     ("latency", "methods", "arig_uvloop", "by_kernel_us", "0", "latency_us", "median"), "<=", 25.0, "µs"),
    ("cpu_wait_empty", "CPU per wait, empty kernel (latency: arig, 0 µs)",
     ("latency", "methods", "arig", "by_kernel_us", "0", "cpu_us_per_wait", "median"), "<=", 45.0, "µs"),
    ("cpu_wait_1ms", "CPU per wait, 1 ms kernel (latency: arig, 1,000 µs)",
     ("latency", "methods", "arig", "by_kernel_us", "1000", "cpu_us_per_wait", "median"), "<=", 80.0, "µs"),
    ("overhead_200us", "p50 − kernel at 200 µs (latency: arig)",
     ("latency", "methods", "arig", "by_kernel_us", "200", "overhead_us"), "<=", 40.0, "µs"),
    ("overhead_1ms", "p50 − kernel at 1 ms (latency: arig)",
     ("latency", "methods", "arig", "by_kernel_us", "1000", "overhead_us"), "<=", 40.0, "µs"),
    ("conc64_rate", "64 tasks: completions/s (concurrency: arig)",
     ("concurrency", "arig", "tasks=64", "completions_per_s"), ">=", 150_000.0, "/s"),
    ("conc64_vs_torch_poll", "64 tasks: completions/s ÷ torch busy poll's (concurrency)",
     ("concurrency", "arig_over_torch_poll", "arig", "completions_per_s"), ">=", 1.8, "×"),
    ("conc64_cpu", "64 tasks: CPU per completion (concurrency: arig)",
     ("concurrency", "arig", "tasks=64", "cpu_us_per_completion"), "<=", 8.0, "µs"),
    ("submit_loop_launch", "loop-thread CPU per submit, Launch (submit: arig_launch)",
     ("submit", "methods", "arig_launch", "loop_thread_cpu_us_per_submit", "median"), "<=", 3.0, "µs"),
    ("submit_loop_c_fill", "loop-thread CPU per submit, C fill (submit: arig_c_fill)",
     ("submit", "methods", "arig_c_fill", "loop_thread_cpu_us_per_submit", "median"), "<=", 3.0, "µs"),
    ("submit_loop_graph", "loop-thread CPU per submit, graph (submit: arig_graph)",
     ("submit", "methods", "arig_graph", "loop_thread_cpu_us_per_submit", "median"), "<=", 3.0, "µs"),
    ("submit_total_launch", "total CPU per submit ÷ raw ctypes cuLaunchKernel, Launch (submit: arig_launch)",
     ("submit", "methods", "arig_launch", "vs_raw_ctypes"), "<=", 1.5, "×"),
    ("submit_total_c_fill", "total CPU per submit ÷ raw ctypes cuLaunchKernel, C fill (submit: arig_c_fill)",
     ("submit", "methods", "arig_c_fill", "vs_raw_ctypes"), "<=", 1.5, "×"),
    ("submit_total_graph", "total CPU per submit ÷ raw ctypes cuLaunchKernel, graph (submit: arig_graph)",
     ("submit", "methods", "arig_graph", "vs_raw_ctypes"), "<=", 1.5, "×"),
    ("idle_cpu", "idle process CPU, CUDA device open, nothing pending (idle: cuda)",
     ("idle", "cases", "cuda", "process_cpu_pct"), "<=", 1.0, "% of a core"),
    ("spin_rt_p50", "spin loop: empty round trip p50 (latency: arig_spinloop, 0 µs)",
     ("latency", "methods", "arig_spinloop", "by_kernel_us", "0", "latency_us", "median"), "<=", 15.0, "µs"),
    ("spin_vs_torch_poll", "spin loop: empty round trip p50 ÷ torch busy poll's (latency: arig_spinloop / torch_poll, 0 µs)",
     ("latency", "methods", "arig_spinloop", "vs_torch_poll_0us"), "<=", 1.0, "×"),
    ("pyfill_inline_rt", "Python fill run inside submit (inline=True): empty round trip p50 ÷ the Launch's (latency: arig_pyfill_inline / arig, 0 µs)",
     ("latency", "methods", "arig_pyfill_inline", "vs_arig_0us"), "<=", 1.5, "×"),
    ("pyfill_inline_conc64", "Python fill run inside submit: 64 tasks, completions/s ÷ torch busy poll's (concurrency)",
     ("concurrency", "arig_over_torch_poll", "arig_pyfill_inline", "completions_per_s"), ">=", 1.0, "×"),
    ("graph_async_stall_10k", "10,000-kernel graph_async: longest loop stall p50 (loop)",
     ("loop", "graphs", "10000", "graph_async", "longest_stall_ms", "median"), "<", 5.0, "ms"),
)


def _walk(b: Any, path: tuple[str, ...]) -> tuple[Any, str | None]:
    """The value at ``path`` and, where it is missing, why (the nearest error or skip on the way)."""
    d = b
    why = None
    for p in path:
        if isinstance(d, dict):
            if isinstance(d.get("error"), str):
                why = "error: " + d["error"]
            elif isinstance(d.get("skipped"), str):
                why = "skipped: " + d["skipped"]
        if p.startswith("tasks=") and isinstance(d, list):
            n = int(p.split("=", 1)[1])
            d = next((x for x in d if isinstance(x, dict) and x.get("tasks") == n), None)
        elif isinstance(d, dict):
            d = d.get(p)
        else:
            d = None
        if d is None:
            return None, why or f"not in results ({'.'.join(path[: path.index(p) + 1])})"
    if isinstance(d, dict):
        if isinstance(d.get("error"), str):
            return None, "error: " + d["error"]
        return None, "not a figure"
    return d, None


def _derived(b: dict[str, Any]) -> dict[str, Any]:
    """Figures the goals need that no benchmark stores: the spin loop over torch poll, and the
    inline Python fill over the Launch, at 0 µs."""
    b = dict(b)
    lat = b.get("latency")
    p50 = lambda name: dig(lat, "methods", name, "by_kernel_us", "0", "latency_us", "median")  # noqa: E731
    for name, base, key in (("arig_spinloop", "torch_poll", "vs_torch_poll_0us"), ("arig_pyfill_inline", "arig", "vs_arig_0us")):
        mine, theirs = p50(name), p50(base)
        if isinstance(lat, dict) and mine is not None and theirs:
            lat = dict(lat)
            lat["methods"] = dict(lat["methods"])
            lat["methods"][name] = {**lat["methods"][name], key: mine / theirs}
            b["latency"] = lat
    return b


def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal with the figure of this run and met (True/False) or None (not measured, with why)."""
    b = _derived(results.get("benchmarks", {}) or {})
    out = []
    for gid, text, path, op, limit, unit in GOALS:
        v, why = _walk(b, path)
        met = None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            met = bool(v <= limit if op == "<=" else v >= limit if op == ">=" else v < limit)
        else:
            v = None
        out.append({"id": gid, "goal": text, "target": f"{op} {fmt(limit)} {unit}", "figure": v, "unit": unit, "met": met,
                    "where": ".".join(path), **({"why": why} if met is None else {})})
    return out


def _goals_md(gl: list[dict[str, Any]]) -> list[str]:
    rows = []
    for g in gl:
        if "id" not in g:
            rows.append(["(goals)", "", "", "error: " + str(g.get("error"))[:80]])
            continue
        fig = "–" if g["figure"] is None else f"{fmt(g['figure'])} {g['unit']}"
        status = "met" if g["met"] else ("not measured: " + str(g.get("why"))[:80] if g["met"] is None else "MISSED")
        rows.append([g["goal"], fig, g["target"], status])
    met = sum(1 for g in gl if g.get("met") is True)
    missed = sum(1 for g in gl if g.get("met") is False)
    unmeasured = sum(1 for g in gl if "id" in g and g.get("met") is None)
    return _md(f"Goals: {met} met, {missed} missed, {unmeasured} not measured", ["goal", "figure", "target", "status"], rows)


def _problems(d: Any, path: str) -> list[str]:
    if not isinstance(d, dict):
        if isinstance(d, list):
            return [p for i, x in enumerate(d) for p in _problems(x, f"{path}[{i}]")]
        return []
    out = []
    if "error" in d and isinstance(d["error"], str):
        out.append(f"{path}: error: {d['error']}")
    if "skipped" in d and isinstance(d["skipped"], str):
        out.append(f"{path}: skipped: {d['skipped']}")
    for k, v in d.items():
        if k in ("error", "skipped", "traceback"):
            continue
        out += _problems(v, f"{path}.{k}")
    return out
