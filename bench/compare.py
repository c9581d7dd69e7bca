"""``python -m bench.compare --base A.json [A2.json ...] --new B.json [B2.json ...]``: an A/B of two commits.

Both sides must come from one machine in one call (``scripts/ab_bench.sh`` runs them interleaved:
A, B, A, B), since figures from different VMs differ by up to 1.5x.  Every figure of
``results.json`` that has a median (a latency, a CPU cost, a throughput) is compared by its median;
a side run more than once gives its best and worst medians, and the run's own spread is the larger
of the two sides' relative spreads (worst/best - 1).  A figure is flagged worse when the new side's
best median is worse than the base side's worst by more than that spread.

Lower is better, except for throughputs (``..._per_s`` in the figure's path).  Prints a markdown
table (worst ratios first) and writes ``--json`` if asked.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def figures(results: dict[str, Any]) -> dict[str, float]:
    """path -> median of every statistic in a results.json's benchmarks."""
    out: dict[str, float] = {}

    def walk(x: Any, path: list[str]) -> Iterator[tuple[str, float]]:
        if isinstance(x, dict):
            if isinstance(x.get("median"), (int, float)) and "n" in x:
                yield "/".join(path), float(x["median"])
                return
            for k, v in x.items():
                if k in ("facts", "meta", "traceback", "error", "skipped"):
                    continue
                yield from walk(v, [*path, str(k)])
        elif isinstance(x, list):
            for i, v in enumerate(x):
                key = str(i)
                if isinstance(v, dict):  # rows named by what varies (tasks, kernel, method) read better than indices
                    for name in ("method", "tasks", "kernel_us", "name", "loop"):
                        if name in v and isinstance(v[name], (str, int, float)):
                            key = f"{name}={v[name]}"
                            break
                yield from walk(v, [*path, key])

    for path, value in walk(results.get("benchmarks", {}), []):
        out[path] = value
    return out


def higher_is_better(path: str) -> bool:
    return re.search(r"per_s(?![a-z])", path) is not None  # completions_per_s, not cpu_us_per_submit


def compare(base: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    fb = [figures(r) for r in base]
    fn = [figures(r) for r in new]
    rows = []
    for path in sorted(set.intersection(*(set(f) for f in fb + fn))):
        a = [f[path] for f in fb]
        b = [f[path] for f in fn]
        if min(a + b) <= 0:
            continue
        hib = higher_is_better(path)
        a_best, a_worst = (max(a), min(a)) if hib else (min(a), max(a))
        b_best, b_worst = (max(b), min(b)) if hib else (min(b), max(b))
        spread = max(abs(a_worst / a_best - 1), abs(b_worst / b_best - 1))
        # >1 means the new commit is worse, whichever the direction.
        ratio = (a_best / b_best) if hib else (b_best / a_best)
        worse = (b_best < a_worst * (1 - spread)) if hib else (b_best > a_worst * (1 + spread))
        rows.append({"figure": path, "base": a, "new": b, "ratio_new_over_base": ratio, "spread": spread, "worse": worse, "higher_is_better": hib})
    rows.sort(key=lambda r: -r["ratio_new_over_base"])
    return rows


#: Figures that run no arig code (libcuda called raw, PyTorch's and CuPy's own ways of waiting): how
#: much the machine itself drifted between the runs, whatever either commit does.
CONTROLS = ("raw_ctypes", "torch_", "cupy_", "baseline")


def drift(rows: list[dict[str, Any]]) -> float | None:
    """The median new/base ratio over the control figures (None if the runs had none)."""
    ratios = sorted(r["ratio_new_over_base"] for r in rows if any(c in r["figure"] for c in CONTROLS))
    return ratios[len(ratios) // 2] if ratios else None


def table(rows: list[dict[str, Any]], limit: int | None = None) -> str:
    lines = [
        "| figure | base medians | new medians | new/base (>1 worse) | run spread | worse beyond spread |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows[:limit]:
        lines.append(
            f"| {r['figure']} | {' / '.join(f'{x:.4g}' for x in r['base'])} | {' / '.join(f'{x:.4g}' for x in r['new'])} "
            f"| {r['ratio_new_over_base']:.3f} | {r['spread'] * 100:.1f} % | {'**yes**' if r['worse'] else 'no'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n\n")[0])
    p.add_argument("--base", nargs="+", required=True, help="results.json of the base commit (one or more runs)")
    p.add_argument("--new", nargs="+", required=True, help="results.json of the new commit (one or more runs)")
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--limit", type=int, default=None, help="print only the worst N rows")
    args = p.parse_args(argv)
    base_files, new_files = args.base, args.new
    base = [json.loads(Path(f).read_text()) for f in base_files]
    new = [json.loads(Path(f).read_text()) for f in new_files]
    rows = compare(base, new)
    worse = [r for r in rows if r["worse"]]
    print(table(rows, args.limit))
    print(f"\n{len(rows)} figures; {len(worse)} worse than the base beyond the run's own spread")
    d = drift(rows)
    if d is not None:
        print(f"machine drift: the figures that run no arig code ({', '.join(CONTROLS)}) read new/base {d:.3f} at the median")
    if args.json:
        meta = {"base": [r.get("meta", {}).get("git") for r in base], "new": [r.get("meta", {}).get("git") for r in new]}
        Path(args.json).write_text(json.dumps({"meta": meta, "drift": d, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
