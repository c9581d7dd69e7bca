"""The length sweep's section of the table (``bench.sweep``): one row per device × loop and per
baseline (lateness p50 / p99 and CPU per wait at each length), then the never-seen series, then
the tail runs with the engine's counters that explain them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ._stats import dig, fmt

__all__ = ["sweep_section", "length_label"]

Md = Callable[[str, list[str], Iterable[list[Any]]], list[str]]


def length_label(us: int | str) -> str:
    us = int(us)
    return "empty" if us == 0 else f"{us // 1000} ms" if us >= 1000 else f"{us} µs"


def _problem(r: dict[str, Any]) -> str | None:
    if "error" in r:
        return "error: " + str(r["error"])[:70]
    if "skipped" in r:
        return "skipped: " + str(r["skipped"])[:70]
    return None


def _cell(x: dict[str, Any] | None) -> str:
    if not x:
        return "–"
    late = x.get("lateness_us") or {}
    return f"{fmt(late.get('p50'))} / {fmt(late.get('p99'))} ({fmt(x.get('cpu_us_per_wait'))})"


def _length_rows(groups: Iterable[tuple[str, dict[str, Any]]], lengths: list[str]) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for name, r in groups:
        why = _problem(r)
        if why:
            rows.append([name, why] + [""] * (len(lengths) - 1))
            continue
        per = r.get("by_length_us") or {}
        rows.append([name] + [_cell(per.get(us)) for us in lengths])
    return rows


def _gpu_line(rows: dict[str, Any], lengths: list[str]) -> list[str]:
    ref = next((r for r in rows.values() if isinstance(r, dict) and r.get("by_length_us")), None)
    if ref is None:
        return []
    per = ref["by_length_us"]
    got = ", ".join(f"{length_label(us)} {fmt(dig(per, us, 'kernel_gpu_us'))}" for us in lengths if us != "0")
    missing = sum(int(dig(x, "stamps_missing") or 0) for r in rows.values() if isinstance(r, dict) for x in (r.get("by_length_us") or {}).values())
    return [f"Kernel GPU length from the stamps, median µs ({ref.get('kind', '')}/{ref.get('loop', '')}): {got}; samples without stamps in all rows: {missing}.", ""]


def _never_seen_rows(ns: dict[str, Any], rows: dict[str, Any]) -> list[list[Any]]:
    out: list[list[Any]] = []
    for kind, r in ns.items():
        why = _problem(r)
        if why:
            out.append([kind, why, "", "", "", "", ""])
            continue
        for us, x in (r.get("by_length_us") or {}).items():
            late = x.get("lateness_us") or {}
            seen = dig(rows, f"{kind}/asyncio", "by_length_us", us, "lateness_us", "p50")
            grids = x.get("grids") or ["?", "?"]
            out.append([r.get("device", kind), length_label(us), f"{x.get('n')} (grids {grids[0]}–{grids[1]})", late.get("p50"), late.get("max"), seen,
                        x.get("cpu_us_per_wait")])
    return out


def _counters(c: dict[str, Any] | None) -> str:
    if not c:
        return "–"
    keys = ("spin_hits", "spin_misses", "mode_turns", "close_watches", "nudges", "early", "prewakes", "prewakes_again", "idle_spins", "idle_spin_hits", "park_ready", "park_done", "park_far", "park_looks",
            "eventfd_writes", "futex_wakes", "host_functions")
    return ", ".join(f"{k} {c[k]:,}" for k in keys if k in c)


def _tail_rows(tail: dict[str, Any]) -> list[list[Any]]:
    out: list[list[Any]] = []
    for name, r in tail.items():
        why = _problem(r)
        if why:
            out.append([name, why, "", "", "", "", "", "", ""])
            continue
        n = r.get("n")
        label = f"{n:,}" + (f" ({r['note']})" if r.get("note") else "")
        out.append([name, label, r.get("p50"), r.get("p99"), r.get("p999"), r.get("max"), r.get("late_over_1ms"), r.get("cpu_us_per_wait"), _counters(r.get("counters"))])
    return out


def sweep_section(b: dict[str, Any], md: Md) -> list[str]:
    sw = b.get("sweep")
    if not (isinstance(sw, dict) and isinstance(sw.get("rows"), dict)):
        return []
    lengths = [str(us) for us in sw.get("lengths_us") or []]
    rows: dict[str, Any] = sw["rows"]
    groups = list(rows.items()) + list((sw.get("baselines") or {}).items())
    lines = md("11. Length sweep: lateness (latency − the kernel's own GPU length) p50 / p99 µs, (CPU µs per wait), one task",
               ["device/loop or baseline"] + [length_label(us) for us in lengths], _length_rows(groups, lengths))
    lines += _gpu_line(rows, lengths)
    lines += md("11b. Work never seen before: first waits of a grid the engine has no prediction for (asyncio)",
                ["device", "kernel", "first waits", "lateness p50 µs", "max", "seen p50 µs (11)", "CPU/wait µs"], _never_seen_rows(sw.get("never_seen") or {}, rows))
    lines += md("11c. Tail: mixed lengths (mean " + fmt(sw.get("tail_mix_mean_us")) + " µs, fixed seed), lateness µs",
                ["device/loop", "waits", "p50", "p99", "p99.9", "max", "> 1 ms", "CPU/wait µs", "engine counters over the run"], _tail_rows(sw.get("tail") or {}))
    return lines
