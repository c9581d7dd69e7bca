"""Counters and latencies for ``/metrics``: cheap to record (no lock: one event loop writes them)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

__all__ = ["Metrics"]


class Metrics:
    """What the server did: requests answered, refused and failed, batches, and recent latencies.

    Latencies (arrival of the request body to its answer being ready, in
    seconds) are kept in a ring of the last ``window`` requests, so the
    percentiles describe recent traffic and memory stays bounded.
    """

    def __init__(self, window: int = 1 << 16) -> None:
        self.received = 0
        self.completions = 0
        self.rejected = 0
        self.errors = 0
        self.batches = 0
        self.batched_rows = 0
        self._lat = np.zeros(window, np.float64)
        self._n = 0
        self.started = time.perf_counter()

    def latency(self, seconds: float) -> None:
        self._lat[self._n % len(self._lat)] = seconds
        self._n += 1

    def batch(self, rows: int) -> None:
        self.batches += 1
        self.batched_rows += rows

    def snapshot(self) -> dict[str, Any]:
        lat = self._lat[: min(self._n, len(self._lat))]
        pct = {f"p{p}": float(np.percentile(lat, p) * 1000.0) for p in (50, 90, 99)} if len(lat) else {"p50": None, "p90": None, "p99": None}
        return {
            "received": self.received,
            "completions": self.completions,
            "rejected": self.rejected,
            "errors": self.errors,
            "batches": self.batches,
            "mean_batch": self.batched_rows / self.batches if self.batches else 0.0,
            "latency_ms": pct | {"window": len(lat)},
            "uptime_s": time.perf_counter() - self.started,
            # The whole server process (every thread): what the load test divides by completions.
            "process_cpu_s": time.process_time(),
        }
