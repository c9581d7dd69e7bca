"""The load generator: httpx.AsyncClient workers that send requests and check every answer.

Inputs come from a fixed pool with their float64 reference answers computed
up front (``model.reference``), and their JSON bodies serialized up front,
so the client spends its CPU on HTTP, not on the model.  Every 200 answer
is checked with ``np.allclose(y, reference, rtol=RTOL, atol=ATOL)``; every
503 must carry ``Retry-After``.

``drive`` runs in the load test's own process (one client) or in each of
``--clients`` processes (``drive_process``), so that on a machine with many
cores the client is not what limits the server.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import numpy as np

from .model import ATOL, OUT, RTOL, inputs, reference, weights

__all__ = ["Workload", "drive", "drive_process", "merge"]

POOL = 1024
_JSON = {"content-type": "application/json"}


class Workload:
    """A pool of inputs, their JSON bodies and reference answers."""

    def __init__(self, seed: int, pool: int = POOL) -> None:
        x = inputs(pool, seed)
        self.bodies = [json.dumps({"x": row.tolist()}).encode() for row in x]
        self.expected = reference(weights(), x)


def _empty() -> dict[str, Any]:
    return {"sent": 0, "ok": 0, "mismatches": 0, "rejected": 0, "errors": 0, "retry_after_missing": 0,
            "latencies_s": [], "first_error": None, "first_mismatch": None}


async def drive(url: str, work: Workload, requests: int, concurrency: int, max_seconds: float, timeout_s: float = 30.0) -> dict[str, Any]:
    """Send up to ``requests`` requests from ``concurrency`` workers within ``max_seconds``; check each answer.

    Returns counts, the latencies of the verified answers (seconds), the
    wall-clock window (``start``/``end`` on ``time.monotonic``, comparable
    across processes) and this process's CPU seconds over it.
    """
    r = _empty()
    nxt = 0
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout_s) as client:
        start, cpu0 = time.monotonic(), time.process_time()
        stop_at = start + max_seconds

        async def worker() -> None:
            nonlocal nxt
            lat = r["latencies_s"]
            while nxt < requests and time.monotonic() < stop_at:
                k = nxt % len(work.bodies)
                nxt += 1
                r["sent"] += 1
                t0 = time.perf_counter()
                try:
                    resp = await client.post("/infer", content=work.bodies[k], headers=_JSON)
                except httpx.HTTPError as exc:
                    r["errors"] += 1
                    r["first_error"] = r["first_error"] or f"{type(exc).__name__}: {exc}"
                    continue
                dt = time.perf_counter() - t0
                if resp.status_code == 200:
                    y = np.asarray(resp.json().get("y"), dtype=np.float64)
                    if y.shape == (OUT,) and np.allclose(y, work.expected[k], rtol=RTOL, atol=ATOL):
                        r["ok"] += 1
                        lat.append(dt)
                    else:
                        r["mismatches"] += 1
                        if r["first_mismatch"] is None:
                            err = float(np.max(np.abs(y - work.expected[k]))) if y.shape == (OUT,) else None
                            r["first_mismatch"] = {"input": k, "shape": list(y.shape), "max_abs_error": err}
                elif resp.status_code == 503:
                    r["rejected"] += 1
                    if "retry-after" not in resp.headers:
                        r["retry_after_missing"] += 1
                else:
                    r["errors"] += 1
                    r["first_error"] = r["first_error"] or f"HTTP {resp.status_code}: {resp.text[:300]}"

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        r["start"], r["end"], r["cpu_s"] = start, time.monotonic(), time.process_time() - cpu0
    return r


def drive_process(url: str, seed: int, requests: int, concurrency: int, max_seconds: float, barrier: Any, results: Any) -> None:
    """A client process: build the workload, wait at ``barrier`` for the others, drive, put the result."""
    work = Workload(seed)
    try:
        barrier.wait(timeout=120)
        results.put(asyncio.run(drive(url, work, requests, concurrency, max_seconds)))
    except BaseException as exc:  # noqa: BLE001 - the parent reports it
        r = _empty()
        r.update(errors=1, first_error=f"client process: {type(exc).__name__}: {exc}", start=time.monotonic(), end=time.monotonic(), cpu_s=0.0)
        results.put(r)


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One result of several clients' (the window from the first start to the last end)."""
    out = _empty()
    for p in parts:
        for k in ("sent", "ok", "mismatches", "rejected", "errors", "retry_after_missing"):
            out[k] += p[k]
        out["latencies_s"] += p["latencies_s"]
        out["first_error"] = out["first_error"] or p["first_error"]
        out["first_mismatch"] = out["first_mismatch"] or p["first_mismatch"]
    out["start"] = min(p["start"] for p in parts)
    out["end"] = max(p["end"] for p in parts)
    out["cpu_s"] = sum(p["cpu_s"] for p in parts)
    out["clients"] = len(parts)
    return out
