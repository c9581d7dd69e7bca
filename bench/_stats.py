"""Summaries: every figure is a median over many runs, with p99 and IQR; ``dig`` reads one
back out of the nested results, ``fmt`` writes one as the table and the plots print it."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = ["summarize", "ratio", "windows_rate", "dig", "fmt"]


def summarize(samples: Iterable[float], scale: float = 1.0) -> dict[str, Any]:
    """``n``, ``median``, ``p99``, ``q1``, ``q3``, ``iqr``, ``min``, ``max``, ``mean`` of ``samples * scale``.

    ``scale=1e6`` turns seconds into microseconds.  An empty input gives ``{"n": 0}``.
    """
    a = np.asarray(list(samples), dtype=np.float64) * scale
    a = a[np.isfinite(a)]
    if a.size == 0:
        return {"n": 0}
    q1, med, q3, p99 = np.percentile(a, [25, 50, 75, 99])
    return {
        "n": int(a.size),
        "median": float(med),
        "p99": float(p99),
        "q1": float(q1),
        "q3": float(q3),
        "iqr": float(q3 - q1),
        "min": float(a.min()),
        "max": float(a.max()),
        "mean": float(a.mean()),
    }


def ratio(a: Any, b: Any) -> float | None:
    """``a / b`` for two summaries' medians (or two numbers); None where either is missing or b is 0."""
    if isinstance(a, dict):
        a = a.get("median")
    if isinstance(b, dict):
        b = b.get("median")
    if a is None or b is None or not b or (isinstance(a, float) and math.isnan(a)):
        return None
    return float(a) / float(b)


def windows_rate(done_times: Sequence[float], start: float, end: float, windows: int) -> list[float]:
    """Completions per second in each of ``windows`` equal slices of [start, end)."""
    if end <= start or windows < 1:
        return []
    width = (end - start) / windows
    counts = np.histogram(np.asarray(done_times, dtype=np.float64), bins=windows, range=(start, end))[0]
    return [float(c) / width for c in counts]


def dig(d: Any, *path: Any) -> Any:
    """``d[path[0]][path[1]]...``, or None where a step is missing or not a dict."""
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def fmt(x: Any) -> str:
    """A figure as the table and the plots print it: thousands separated, three significant
    digits or so, "–" for none, "yes"/"NO" for a flag."""
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "NO"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        a = abs(x)
        if a >= 1000:
            return f"{x:,.0f}"
        if a >= 100:
            return f"{x:.0f}"
        if a >= 10:
            return f"{x:.1f}"
        return f"{x:.2f}"
    return str(x)
