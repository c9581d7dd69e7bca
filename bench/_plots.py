"""The plots of a results dict: at most three PNGs (latency, concurrency, overhead), each
drawn only from figures the run has; any panel without data says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._stats import dig, fmt

__all__ = ["plots", "PLOT_FILES", "SWEEP_FILE"]

PLOT_FILES = ("latency.png", "concurrency.png", "overhead.png")
#: The length sweep's plot, written only where ``bench.sweep`` ran.
SWEEP_FILE = "sweep.png"

#: One colour per method in every panel.
COLORS = {"arig": "tab:blue", "arig GPU": "tab:blue", "arig host": "tab:cyan", "raw_floor": "tab:gray", "raw_ctypes": "tab:gray",
          "torch_executor": "tab:orange", "torch_poll": "tab:red", "cupy_hostfunc": "tab:purple", "arig_update": "tab:blue",
          "arig_reinstantiate": "tab:green", "torch_cudagraph": "tab:orange", "arig_pyfill": "tab:olive", "arig_pyfill_inline": "yellowgreen", "arig_uvloop": "tab:green",
          "arig_spinloop": "navy", "torch_poll_uvloop": "tab:pink"}


def plots(results: dict[str, Any], out_dir: Path) -> dict[str, str]:
    """Write the PNGs that have data; return {file: "ok" or why not}."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401 - fails here, once, if pyplot cannot load
    except Exception as exc:  # noqa: BLE001
        return {f: f"skipped: matplotlib not importable ({exc})" for f in PLOT_FILES}
    status = {}
    # sweep.png only where the sweep ran: a run without it writes no more files than before.
    extra = (SWEEP_FILE,) if isinstance(dig(results, "benchmarks", "sweep", "rows"), dict) else ()
    for fname, fn in zip(PLOT_FILES + extra, (_plot_latency, _plot_concurrency, _plot_overhead, _plot_sweep)):
        try:
            status[fname] = fn(results, out_dir / fname)
        except Exception as exc:  # noqa: BLE001
            status[fname] = f"error: {type(exc).__name__}: {exc}"
    return status


def _empty(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no data\n({what})", ha="center", va="center", transform=ax.transAxes, color="gray")
    ax.set_xticks([])
    ax.set_yticks([])


def _loglog(ax: Any, xlabel: str, title: str, legend: int = 8) -> None:
    """Log axes, grid, title and legend of a panel against kernel length."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=legend)


def _errbar(ax: Any, x: list[Any], summaries: list[dict[str, Any]], label: str, **kw: Any) -> None:
    if label in COLORS:
        kw.setdefault("color", COLORS[label])
    med = [s.get("median", float("nan")) for s in summaries]
    lo = [max(0.0, s.get("median", 0) - s.get("q1", s.get("median", 0))) for s in summaries]
    hi = [max(0.0, s.get("q3", s.get("median", 0)) - s.get("median", 0)) for s in summaries]
    line = ax.errorbar(x, med, yerr=[lo, hi], capsize=3, marker="o", label=label, **kw)
    p99 = [s.get("p99", float("nan")) for s in summaries]
    ax.plot(x, p99, linestyle="none", marker="_", markersize=10, color=line[0].get_color())


def _plot_latency(results: dict[str, Any], path: Path) -> str:
    import matplotlib.pyplot as plt

    b = results.get("benchmarks", {})
    methods = dig(b, "latency", "methods") or {}
    host = dig(b, "host", "latency") or {}
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    (a1, a2), (a3, a4) = axes
    have = {n: m["by_kernel_us"] for n, m in methods.items() if m.get("by_kernel_us")}
    if have:
        for name, per in have.items():
            us = list(per)
            x = [int(u) for u in us]
            xs = [max(v, 1) for v in x]
            ov = []
            for u in us:
                s = dict(per[u]["latency_us"])
                for k in ("median", "q1", "q3", "p99"):
                    if k in s:
                        s[k] = s[k] - int(u)
                ov.append(s)
            _errbar(a1, xs, ov, name)
            _errbar(a2, xs, [per[u]["cpu_us_per_wait"] for u in us], name)
        for ax, t in ((a1, "completion latency − kernel time (µs): p50, IQR bars, p99 dash"), (a2, "process CPU per wait (µs, all threads; median of blocks)")):
            _loglog(ax, "kernel µs (0 plotted at 1: the empty kernel)", t)
        names = [n for n in have if n != "arig" and methods[n].get("vs_arig")]
        if names:
            us = list(have.get("arig", {}))
            width = 0.8 / max(1, len(names))
            for i, n in enumerate(names):
                vals = [dig(methods[n], "vs_arig", u, "latency") or 0 for u in us]
                a3.bar([j + i * width for j in range(len(us))], vals, width, label=n, color=COLORS.get(n))
            a3.axhline(1.0, color="k", lw=0.8)
            a3.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(us))], [f"{u} µs" for u in us])
            a3.set_title("median latency ÷ arig's (same run)", fontsize=10)
            a3.legend(fontsize=8)
        else:
            _empty(a3, "no baseline ran")
    else:
        _empty(a1, "no GPU latency run")
        _empty(a2, "no GPU latency run")
        _empty(a3, "no GPU latency run")
    if "latency_us" in host:
        s, c = host["latency_us"], host["cpu_us_per_wait"]
        a4.bar([0, 1], [s["median"], c["median"]], yerr=[[s["median"] - s["q1"], c["median"] - c["q1"]], [s["q3"] - s["median"], c["q3"] - c["median"]]], capsize=4)
        a4.plot([0, 1], [s["p99"], c["p99"]], linestyle="none", marker="_", markersize=14, color="k")
        a4.set_xticks([0, 1], ["latency µs", "CPU/wait µs"])
        a4.set_title("host device, no-op fill (p50, IQR, p99 dash)", fontsize=10)
    else:
        _empty(a4, "no host run")
    return _save(fig, results, path, bottom=0.03)


def _plot_concurrency(results: dict[str, Any], path: Path) -> str:
    import matplotlib.pyplot as plt

    b = results.get("benchmarks", {})
    series = {}
    gpu = [r for r in (dig(b, "concurrency", "arig") or []) if "completions_per_s" in r]
    host = [r for r in (dig(b, "host", "concurrency") or []) if isinstance(r, dict) and "completions_per_s" in r]
    if gpu:
        series["arig GPU"] = gpu
    if host:
        series["arig host"] = host
    base = {n: r for group in ("variants", "baselines") for n, r in (dig(b, "concurrency", group) or {}).items() if "completions_per_s" in r}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
    if not series and not base:
        for ax in axes:
            _empty(ax, "no concurrency run")
    _sweeps_and_points(axes, series, base)
    titles = ("completions/s (p50 of 10 windows, IQR bars)", "latency per completion (µs): p50, IQR bars, p99 dash", "event loop's longest stall (ms)")
    for ax, t in zip(axes, titles):
        if series or base:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("concurrent tasks")
            ax.set_title(t, fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
    return _save(fig, results, path, bottom=0.05)


def _sweeps_and_points(axes: Any, series: dict[str, list[dict[str, Any]]], base: dict[str, dict[str, Any]]) -> None:
    """arig's sweeps as lines, each baseline (run at one task count) as a point."""
    for name, rs in series.items():
        x = [r["tasks"] for r in rs]
        _errbar(axes[0], x, [r["completions_per_s_windows"] for r in rs], name)
        _errbar(axes[1], x, [r["latency_us"] for r in rs], name)
        axes[2].plot(x, [r["longest_stall_ms"] for r in rs], marker="o", label=name, color=COLORS.get(name))
    for name, r in base.items():
        t = r.get("tasks", 64)
        c = COLORS.get(name)
        axes[0].plot([t], [r["completions_per_s_windows"]["median"]], marker="s", linestyle="none", label=name, color=c)
        axes[1].plot([t], [r["latency_us"]["median"]], marker="s", linestyle="none", label=name, color=c)
        axes[1].plot([t], [r["latency_us"]["p99"]], marker="_", markersize=10, linestyle="none", color=c)
        axes[2].plot([t], [r["longest_stall_ms"]], marker="s", linestyle="none", label=name, color=c)


def _plot_overhead(results: dict[str, Any], path: Path) -> str:
    import matplotlib.pyplot as plt

    b = results.get("benchmarks", {})
    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    (a1, a2), (a3, a4) = axes
    _submit_panel(a1, b)
    _stall_panel(a2, b)
    _replay_panel(a3, b)
    _gpu_time_and_fault_panel(a4, b)
    return _save(fig, results, path, bottom=0.03)


def _submit_panel(ax: Any, b: dict[str, Any]) -> None:
    sub = {n: r for n, r in (dig(b, "submit", "methods") or {}).items() if "cpu_us_per_submit" in r}
    if not sub:
        _empty(ax, "no submit run")
        return
    names = list(sub)
    s = [sub[n]["cpu_us_per_submit"] for n in names]
    ax.barh(range(len(names)), [x["median"] for x in s], xerr=[[x["median"] - x["q1"] for x in s], [x["q3"] - x["median"] for x in s]], capsize=3)
    ax.plot([x["p99"] for x in s], range(len(names)), linestyle="none", marker="|", markersize=12, color="k")
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.set_xlabel("process CPU µs per submit (p50, IQR bars, p99 tick)")
    ax.set_title("3. submit overhead, empty kernel", fontsize=10)


def _stall_panel(ax: Any, b: dict[str, Any]) -> None:
    lp = b.get("loop") if isinstance(b.get("loop"), dict) else {}
    bars = []
    for n, res in (lp.get("graphs") or {}).items():
        for mode in ("graph_async", "graph_on_loop"):
            if "longest_stall_ms" in res.get(mode, {}):
                bars.append((f"{mode} {int(n) // 1000}k", res[mode]["longest_stall_ms"]))
    for mode in ("pinned_arig", "pinned_on_loop"):
        r = (lp.get("pinned") or {}).get(mode, {})
        if "longest_stall_ms" in r:
            bars.append((mode, r["longest_stall_ms"]))
    if not bars:
        _empty(ax, "no loop run")
        return
    ax.bar(range(len(bars)), [max(x[1]["median"], 1e-3) for x in bars], color=["tab:green" if ("async" in n or "arig" in n) else "tab:red" for n, _ in bars])
    ax.plot(range(len(bars)), [max(x[1]["max"], 1e-3) for x in bars], linestyle="none", marker="_", markersize=14, color="k")
    ax.set_xticks(range(len(bars)), [n for n, _ in bars], rotation=25, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("ms")
    ax.set_title("4. longest event-loop stall (p50 bar, max dash)", fontsize=10)


def _replay_panel(ax: Any, b: dict[str, Any]) -> None:
    nodes = dig(b, "replay", "nodes") or {}
    plotted = False
    for mode in ("arig_update", "arig_reinstantiate", "torch_cudagraph"):
        pts = [(int(n), res[mode]["cpu_us_per_replay"]) for n, res in nodes.items() if "cpu_us_per_replay" in res.get(mode, {})]
        if pts:
            _errbar(ax, [p[0] for p in pts], [p[1] for p in pts], mode)
            plotted = True
    if not plotted:
        _empty(ax, "no replay run")
        return
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("kernels in the graph")
    ax.set_ylabel("CPU µs per replay")
    ax.set_title("5. replay with new arguments every run (p50, IQR, p99 dash)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def _gpu_time_and_fault_panel(ax: Any, b: dict[str, Any]) -> None:
    gt = dig(b, "replay", "gpu_time_per_kernel") or {}
    s = dig(b, "fault", "summary")
    if "graph_us_per_kernel" in gt:
        vals = [gt["graph_us_per_kernel"], gt.get("launches_us_per_kernel", {})]
        ax.bar([0, 1], [v.get("median", 0) for v in vals], color=["tab:green", "tab:gray"])
        ax.set_ylim(0, 1.8 * max([v.get("median", 0) for v in vals] + [1e-3]))
        ax.set_xticks([0, 1], ["graph of 1,000", "1,000 launches, one fill"])
        ax.set_ylabel("GPU µs per empty kernel")
        ax.set_title("5b. GPU time per kernel" + (" · 6. failure fan-out (text)" if s else ""), fontsize=10)
    elif not s:
        _empty(ax, "no replay or fault run")
    if s:
        text = "\n".join([
            "failure fan-out (100 waiters, subprocess)",
            f"first fail p50 {fmt(dig(s, 'first_fail_ms', 'median'))} ms",
            f"all failed p50 {fmt(dig(s, 'fanout_ms', 'median'))} ms (p99 {fmt(dig(s, 'fanout_ms', 'p99'))})",
            f"submit after loss {fmt(dig(s, 'submit_after_loss_us', 'median'))} µs",
            f"stop {fmt(dig(s, 'stop_ms', 'median'))} ms · reopen {fmt(dig(s, 'reopen_ms', 'median'))} ms",
            f"saxpy after reopen ok: {fmt(s.get('saxpy_after_reopen_ok'))}",
        ])
        ax.text(0.98, 0.97, text, transform=ax.transAxes, ha="right", va="top", fontsize=8, family="monospace",
                bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.9})


#: The sweep's lines: colour by event loop (or baseline), line style by device.
_SWEEP_COLORS = {"asyncio": "tab:blue", "uvloop": "tab:green", "spin": "navy", "torch_poll": "tab:red", "torch_executor": "tab:orange"}


def _sweep_series(sw: dict[str, Any]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """name -> (its row, matplotlib style), for every row and baseline with figures."""
    out = {}
    for group in ("rows", "baselines"):
        for name, r in (sw.get(group) or {}).items():
            if isinstance(r, dict) and r.get("by_length_us"):
                kind, _, loop = name.partition("/")
                style = {"color": _SWEEP_COLORS.get(loop or name, "tab:gray"), "linestyle": "--" if kind == "nv" else "-", "marker": "o"}
                out[name] = (r["by_length_us"], style)
    return out


def _plot_sweep(results: dict[str, Any], path: Path) -> str:
    import matplotlib.pyplot as plt

    sw = dig(results, "benchmarks", "sweep") or {}
    series = _sweep_series(sw)
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    (a1, a2), (a3, a4) = axes
    panels = ((a1, ("lateness_us", "p50"), "lateness p50 (µs): latency − the kernel's own GPU length"),
              (a2, ("lateness_us", "p99"), "lateness p99 (µs)"),
              (a3, ("cpu_us_per_wait",), "process CPU per wait (µs, all threads)"))
    for ax, key, title in panels:
        if not series:
            _empty(ax, "no sweep rows")
            continue
        for name, (per, style) in series.items():
            pts = [(max(int(us), 10), dig(x, *key)) for us, x in per.items()]
            pts = [(x, y) for x, y in pts if isinstance(y, (int, float)) and y > 0]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=name, **style)
        _loglog(ax, "kernel µs (the empty kernel plotted at 10)", title, legend=7)
    _tail_panel(a4, sw.get("tail") or {})
    return _save(fig, results, path, bottom=0.03)


def _tail_panel(ax: Any, tail: dict[str, Any]) -> None:
    runs = {n: r for n, r in tail.items() if isinstance(r, dict) and "p50" in r}
    if not runs:
        _empty(ax, "no tail run")
        return
    keys = ("p50", "p99", "p999", "max")
    for name, r in runs.items():
        kind, _, loop = name.partition("/")
        ax.plot(range(len(keys)), [max(float(r.get(k) or 0), 1e-3) for k in keys], marker="o", label=f"{name} (n {r.get('n', 0):,})",
                color=_SWEEP_COLORS.get(loop, "tab:gray"), linestyle="--" if kind == "nv" else "-")
    ax.axhline(1000.0, color="k", lw=0.8, linestyle=":")
    ax.set_xticks(range(len(keys)), ["p50", "p99", "p99.9", "max"])
    ax.set_yscale("log")
    ax.set_ylabel("lateness µs (dotted: 1 ms)")
    ax.set_title("tail: mixed lengths, lateness percentiles", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)


def _save(fig: Any, results: dict[str, Any], path: Path, bottom: float) -> str:
    """Caption ``fig``, lay it out above the caption (``bottom``: the share of the height the
    caption takes), write it to ``path`` and close it."""
    import matplotlib.pyplot as plt

    _caption(fig, results)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return "ok"


def _caption(fig: Any, results: dict[str, Any]) -> None:
    m = results.get("meta", {})
    fig.text(0.01, 0.005, f"arig {m.get('arig', '')} {m.get('git', '')} · {m.get('date', '')} · {m.get('host', '')} · GPU: {m.get('gpu', 'none')} · "
             f"{'quick' if m.get('quick') else 'full'} run · medians, ratios within this run", fontsize=7, color="gray")
