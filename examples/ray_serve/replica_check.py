"""Drive the replica's own code path (:class:`Replica`) on one device, without Ray.

``python -m examples.ray_serve.replica_check --device host|cuda:0|nv:0`` runs,
for each fault (``--fault``, default: loss, and hang on host and CUDA): a
fresh replica opens the device, answers ``--requests`` concurrent requests
(each checked against the numpy reference), reports healthy, takes the fault,
reports unhealthy within ``--health-timeout`` seconds (a hang: once the
watchdog's ``hang_ms`` passes), refuses the next request at once, and stops
its device.  Every step is bounded; the exit status is 0 only if all held.
``--json PATH`` writes the results.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import numpy as np

from ..serve.model import ATOL, RTOL, inputs, reference, weights
from .replica import Replica, ReplicaConfig, Unhealthy, parse_device

__all__ = ["check", "main"]


async def _unhealthy_within(replica: Replica, seconds: float) -> float:
    """Seconds until check_health raises; AssertionError if it still passes after ``seconds``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        try:
            replica.check_health()
        except Unhealthy:
            return time.monotonic() - t0
        await asyncio.sleep(0.01)
    raise AssertionError(f"{replica.name} still healthy {seconds} s after the fault")


async def check(device: str, fault: str, *, requests: int = 64, model: str = "auto", hang_ms: int = 500,
                health_timeout: float = 30.0, step_timeout: float = 60.0) -> dict[str, Any]:
    """One replica through open, verified requests, a fault and stop; the results (``passed`` among them)."""
    cfg = ReplicaConfig(device=device, model=model, hang_ms=hang_ms, debug_faults=True)
    replica = Replica(cfg, name=f"check-{fault}")
    out: dict[str, Any] = {"device": device, "fault": fault, "requests": requests}
    x = inputs(requests, seed=11)
    want = reference(weights(), x)
    await asyncio.wait_for(replica.start(), step_timeout)
    try:
        out["opened"] = replica.device
        out["runner"] = replica.runner.how
        t0 = time.perf_counter()
        ys = await asyncio.wait_for(asyncio.gather(*(replica.infer(row) for row in x)), step_timeout)
        out["requests_s"] = round(time.perf_counter() - t0, 4)
        out["mismatches"] = sum(not np.allclose(y, w, rtol=RTOL, atol=ATOL) for y, w in zip(ys, want))
        replica.check_health()
        out["healthy_before"] = True
        await asyncio.wait_for(replica.inject(fault, seconds=4 * hang_ms / 1000), step_timeout)  # a stall well past hang_ms, short at stop
        out["unhealthy_after_s"] = round(await _unhealthy_within(replica, health_timeout), 4)
        try:
            await asyncio.wait_for(replica.infer(x[0]), step_timeout)
            out["refused_after"] = False
        except Unhealthy as exc:
            out["refused_after"], out["health"] = True, str(exc)
    finally:
        await asyncio.wait_for(replica.stop(), step_timeout)
    out["device_stopped"] = bool(replica.runner.stopped)
    out["passed"] = out["mismatches"] == 0 and out["refused_after"] and out["device_stopped"]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m examples.ray_serve.replica_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="host", help="host, cuda:N or nv:N (N: a visible GPU)")
    p.add_argument("--model", default="auto", choices=("auto", "torch", "kernels"), help="on cuda: PyTorch or arig's saxpy kernels")
    p.add_argument("--fault", action="append", choices=("loss", "hang"), help="repeatable; default: loss, and hang except on nv")
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--hang-ms", type=int, default=500)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    kind, _ = parse_device(args.device)
    chosen = args.fault or (["loss"] if kind == "nv" else ["loss", "hang"])
    results = []
    for fault in chosen:
        r = asyncio.run(check(args.device, fault, requests=args.requests, model=args.model, hang_ms=args.hang_ms))
        results.append(r)
        print(f"{r['fault']:5} on {r['opened']}: {r['requests'] - r['mismatches']}/{r['requests']} verified in {r['requests_s']} s; "
              f"healthy, then unhealthy {r['unhealthy_after_s']} s after the fault; next request refused: {r['refused_after']}; "
              f"device stopped: {r['device_stopped']} -> {'PASS' if r['passed'] else 'FAIL'}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0 if all(r["passed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
