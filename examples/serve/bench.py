"""Benchmark: the arig server against the ``run_in_executor`` baseline, in one run.

    python3 -m examples.serve.bench --device cuda:0 --out DIR

For each concurrency level and repeat it load-tests both servers with the
same settings (the order alternates between repeats, so drift favours
neither), every answer checked.  It writes ``DIR/serve_bench.json`` (every
run's full result, the medians and the ratios) and ``DIR/serve_bench.md``
(the table, also printed), and exits 1 if any run failed its checks.

Ratios are arig / baseline: requests/s (higher is better), p99 latency and
server CPU per request (lower is better).  The goal on a GPU: requests/s
ratio >= 1.5 at a p99 ratio <= 1 and a CPU ratio < 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from .app import ServeConfig
from .loadtest import LoadConfig, add_load_args, run, summary
from .runners import resolve_device
from .server import add_serve_args, config_from_args

__all__ = ["bench", "table", "main"]

GOAL = {"requests_per_s": 1.5, "p99": 1.0, "cpu_per_request": 1.0}


def _median(runs: list[dict[str, Any]], get: Any) -> float | None:
    vals = [v for v in (get(r) for r in runs) if v is not None]
    return statistics.median(vals) if vals else None


def _level(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    med: dict[str, dict[str, Any]] = {
        s: {
            "requests_per_s": _median(rs, lambda r: r["requests_per_s"]),
            "p50_ms": _median(rs, lambda r: r["latency_ms"]["p50"]),
            "p99_ms": _median(rs, lambda r: r["latency_ms"]["p99"]),
            "cpu_ms_per_request": _median(rs, lambda r: r["server_cpu_ms_per_request"]),
            "mean_batch": _median(rs, lambda r: r["server_metrics"]["mean_batch"]),
            "passed": all(r["passed"] for r in rs),
        }
        for s, rs in runs.items()
    }
    a, b = med["arig"], med["baseline"]

    def ratio(k: str) -> float | None:
        x, y = a[k], b[k]
        return None if x is None or not y else float(x / y)

    ratios = {"requests_per_s": ratio("requests_per_s"), "p99": ratio("p99_ms"), "cpu_per_request": ratio("cpu_ms_per_request")}
    rps, p99, cpu = ratios["requests_per_s"], ratios["p99"], ratios["cpu_per_request"]
    met = (rps is not None and p99 is not None and cpu is not None
           and rps >= GOAL["requests_per_s"] and p99 <= GOAL["p99"] and cpu < GOAL["cpu_per_request"])
    return {"median": med, "ratio_arig_over_baseline": ratios, "goal_met": met}


def bench(base: LoadConfig, levels: list[int], repeats: int, log: Any = print) -> dict[str, Any]:
    """Run both servers at each concurrency level, ``repeats`` times; results, medians and ratios."""
    out: dict[str, Any] = {"levels": []}
    for conc in levels:
        runs: dict[str, list[dict[str, Any]]] = {"arig": [], "baseline": []}
        for rep in range(repeats):
            order = ("baseline", "arig") if rep % 2 == 0 else ("arig", "baseline")
            for server in order:
                cfg = replace(base, concurrency=conc, serve=replace(base.serve, server=server))
                try:
                    r = run(cfg)
                except RuntimeError as exc:
                    r = {"server": server, "passed": False, "error": str(exc), "requests_per_s": None,
                         "latency_ms": {"p50": None, "p99": None}, "server_cpu_ms_per_request": None, "server_metrics": {"mean_batch": None}}
                    log(f"[c={conc}] {server}: FAILED: {exc}")
                else:
                    log(f"[c={conc}] {summary(r)}")
                runs[server].append(r)
        out["levels"].append({"concurrency": conc, "runs": runs, **_level(runs)})
    return out


def _f(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def table(result: dict[str, Any]) -> str:
    m = result["meta"]
    lines = [
        f"## Example inference server: arig vs run_in_executor ({m['device']})",
        "",
        f"Model: MLP {m['model']}, float32.  Batching: max_batch {m['serve']['max_batch']}, max_wait {m['serve']['max_wait_ms']} ms, "
        f"max_inflight {m['serve']['max_inflight']}.  Load: {m['requests']} requests per run (at most {m['max_seconds']} s), "
        f"{m['clients']} client process(es), {m['repeats']} repeat(s) (medians).  Every answer checked against numpy "
        f"(rtol {m['tolerance']['rtol']}, atol {m['tolerance']['atol']}).",
        "",
        "| concurrency | server | req/s | p50 ms | p99 ms | server CPU ms/req | mean batch | checks |",
        "|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for lvl in result["levels"]:
        for s in ("baseline", "arig"):
            md = lvl["median"][s]
            lines.append(f"| {lvl['concurrency']} | {s} | {_f(md['requests_per_s'], '.0f')} | {_f(md['p50_ms'], '.2f')} | {_f(md['p99_ms'], '.2f')} | "
                         f"{_f(md['cpu_ms_per_request'], '.3f')} | {_f(md['mean_batch'], '.1f')} | {'pass' if md['passed'] else 'FAIL'} |")
        r = lvl["ratio_arig_over_baseline"]
        lines.append(f"| {lvl['concurrency']} | **arig / baseline** | **{_f(r['requests_per_s'], '.2f')}x** | | **{_f(r['p99'], '.2f')}x** | "
                     f"**{_f(r['cpu_per_request'], '.2f')}x** | | goal {'met' if lvl['goal_met'] else 'not met'} |")
    lines += ["", f"Goal: req/s ratio >= {GOAL['requests_per_s']}, p99 ratio <= {GOAL['p99']}, CPU ratio < {GOAL['cpu_per_request']}.",
              "", "- arig: " + str(m["how"].get("arig")), "- baseline: " + str(m["how"].get("baseline")), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m examples.serve.bench", description="Both example servers under the same load; a table and JSON.")
    add_serve_args(p)
    add_load_args(p)
    p.set_defaults(requests=20000, clients=max(1, min(4, (os.cpu_count() or 2) // 4)), max_seconds=30.0, warmup=500)
    p.add_argument("--levels", default="64,256", help="concurrency levels, comma-separated (default %(default)s); --concurrency is ignored")
    p.add_argument("--repeats", type=int, default=1, help="runs per server and level; medians are reported (default %(default)s)")
    p.add_argument("--out", type=Path, required=True, help="directory for serve_bench.json and serve_bench.md")
    a = p.parse_args(argv)
    serve: ServeConfig = config_from_args(a)
    serve = replace(serve, device=resolve_device(serve.device))
    base = LoadConfig(serve, a.requests, 0, a.clients, a.max_seconds, a.warmup, a.startup_timeout, a.loop)
    levels = [int(c) for c in a.levels.split(",") if c.strip()]
    t0 = time.monotonic()
    result = bench(base, levels, a.repeats)
    from .model import HIDDEN, IN, OUT

    hows = {s: next((r.get("how") for lvl in result["levels"] for r in lvl["runs"][s] if r.get("how")), None) for s in ("arig", "baseline")}
    first: dict[str, Any] = next((r for lvl in result["levels"] for rs in lvl["runs"].values() for r in rs if "tolerance" in r), {})
    result["meta"] = {
        "device": serve.device, "serve": asdict(serve), "model": f"{IN}-{HIDDEN}-{OUT}", "requests": a.requests, "max_seconds": a.max_seconds,
        "clients": a.clients, "repeats": a.repeats, "levels": levels, "how": hows, "tolerance": first.get("tolerance", {}),
        "python": sys.version.split()[0], "platform": platform.platform(), "cpu_count": os.cpu_count(), "seconds": time.monotonic() - t0,
    }
    a.out.mkdir(parents=True, exist_ok=True)
    md = table(result)
    (a.out / "serve_bench.md").write_text(md)
    (a.out / "serve_bench.json").write_text(json.dumps(result, indent=2) + "\n")
    print(md)
    return 0 if all(lvl["median"][s]["passed"] for lvl in result["levels"] for s in ("arig", "baseline")) else 1


if __name__ == "__main__":
    sys.exit(main())
