"""A bounded load test through Serve's HTTP proxy, with a loss and a hang injected into one replica.

``python -m examples.ray_serve.loadtest`` starts a local Ray cluster
(``--num-cpus``), Serve's proxy on 127.0.0.1, and the deployment with
``debug_faults`` on; ``--concurrency`` httpx workers send ``POST /infer``
and check every 200 answer against the numpy reference.  Once every replica
has answered, each ``--fault`` in turn (default: loss, then hang) is sent to
``POST /debug/lose`` or ``/debug/hang``: the proxy routes it to one replica,
whose answer names it.  The load goes on until a replica that had not
answered before the fault answers (the replacement Serve started once the
victim's ``check_health`` failed), or ``--fault-timeout`` passes.  Then Serve
shuts down and every replica's report (written by its ``stop``) must say its
device stopped.

Reported: requests served (verified) and failed (by status), wrong answers
(must be 0), and per fault the victim, its replacement and the seconds from
the fault to the replacement's first answer.  Every request has a timeout,
every wait a bound.  Exit status 0 only if no answer was wrong, every fault
was followed by a replacement and every device stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from ..serve.model import ATOL, RTOL, inputs, reference, weights
from .replica import ReplicaConfig

__all__ = ["Load", "start_cluster", "deploy", "run_faults", "stop_reports", "main"]

ROOT = Path(__file__).resolve().parents[2]
ROUTE = "/arig"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_cluster(num_cpus: int = 2, port: int | None = None) -> str:
    """A local Ray cluster and Serve's proxy on 127.0.0.1; returns the application's base URL.

    The replicas' processes import ``examples`` from this checkout: Ray ships
    the package to them (``py_modules``), and they import arig as this
    process does (the installed one, or the ``PYTHONPATH`` they inherit).
    """
    import ray
    from ray import serve

    port = port or free_port()
    ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level="WARNING", log_to_driver=False,
             runtime_env={"py_modules": [str(ROOT / "examples")], "excludes": ["__pycache__"]})
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    return f"http://127.0.0.1:{port}{ROUTE}"


def deploy(cfg: ReplicaConfig, **options: Any) -> None:
    """Run the deployment of ``cfg`` (waits until every replica is up)."""
    from ray import serve

    from .deployment import app

    serve.run(app(cfg, **options), name="arig", route_prefix=ROUTE)


@dataclass
class Load:
    """``concurrency`` workers sending verified requests until ``stop()``."""

    client: httpx.AsyncClient
    url: str
    concurrency: int = 8
    served: int = 0
    wrong: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    first_answer: dict[str, float] = field(default_factory=dict)  # replica -> when it first answered 200
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _stopping: bool = False

    def __post_init__(self) -> None:
        self.x = inputs(256, seed=3)
        self.want = reference(weights(), self.x)
        self.answered = asyncio.Event()

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._worker(k)) for k in range(self.concurrency)]

    async def _worker(self, k: int) -> None:
        i = k
        while not self._stopping:
            i = (i + self.concurrency) % len(self.x)
            try:
                r = await self.client.post(f"{self.url}/infer", json={"x": self.x[i].tolist()})
            except httpx.HTTPError as exc:
                self.failed[type(exc).__name__] += 1
                await asyncio.sleep(0.05)
                continue
            if r.status_code != 200:
                self.failed[str(r.status_code)] += 1
                await asyncio.sleep(0.01)  # a failing replica answers at once: do not spin on it
                continue
            body = r.json()
            if not np.allclose(np.asarray(body["y"]), self.want[i], rtol=RTOL, atol=ATOL):
                self.wrong += 1
                continue
            self.served += 1
            self.first_answer.setdefault(body["replica"], time.monotonic())
            self.answered.set()

    async def until(self, pred: Any, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until ``pred()`` holds; whether it does."""
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() >= deadline:
                return False
            self.answered.clear()
            try:
                await asyncio.wait_for(self.answered.wait(), max(0.0, min(0.5, deadline - time.monotonic())))
            except TimeoutError:
                pass
        return True

    async def stop(self) -> None:
        self._stopping = True
        await asyncio.wait_for(asyncio.gather(*self._tasks, return_exceptions=True), 30)


async def _inject(client: httpx.AsyncClient, url: str, fault: str, hang_s: float) -> dict[str, Any]:
    route = "lose" if fault == "loss" else "hang"
    r = await client.post(f"{url}/debug/{route}", params={"seconds": hang_s})
    if r.status_code != 200:
        raise RuntimeError(f"/debug/{route} answered {r.status_code}: {r.text}")
    out: dict[str, Any] = r.json()
    return out


async def run_faults(url: str, *, replicas: int, faults: list[str], concurrency: int = 8, warmup_timeout: float = 60.0,
                     fault_timeout: float = 90.0, settle_s: float = 1.0, hang_s: float = 10.0, load_s: float = 0.0) -> dict[str, Any]:
    """The load (``load_s`` seconds once every replica answered), each fault in turn, and the replacement after each; the report."""
    report: dict[str, Any] = {"replicas": replicas, "concurrency": concurrency, "faults": []}
    async with httpx.AsyncClient(timeout=httpx.Timeout(15.0)) as client:
        load = Load(client, url, concurrency)
        t0 = time.monotonic()
        load.start()
        try:
            if not await load.until(lambda: len(load.first_answer) >= replicas, warmup_timeout):
                raise RuntimeError(f"only {sorted(load.first_answer)} of {replicas} replicas answered in {warmup_timeout} s")
            report["warmup_s"] = round(time.monotonic() - t0, 3)
            await asyncio.sleep(load_s)
            for fault in faults:
                known = set(load.first_answer)
                served_before, failed_before = load.served, sum(load.failed.values())
                t_fault = time.monotonic()
                hit = await _inject(client, url, fault, hang_s)
                replaced = await load.until(lambda n=len(known): len(load.first_answer) > n, fault_timeout)
                new = sorted(set(load.first_answer) - known)
                report["faults"].append({
                    "fault": fault, "replica": hit["replica"], "replacement": new[0] if new else None,
                    "s_to_replacement": round(load.first_answer[new[0]] - t_fault, 3) if replaced else None,
                    "served_meanwhile": load.served - served_before, "failed_meanwhile": sum(load.failed.values()) - failed_before,
                })
                await asyncio.sleep(settle_s)  # the load goes on a while on the new set of replicas
        finally:
            await load.stop()
    report.update(seconds=round(time.monotonic() - t0, 3), served=load.served, failed=sum(load.failed.values()),
                  failed_by=dict(load.failed), wrong=load.wrong)
    report["replaced"] = all(f["replacement"] is not None for f in report["faults"])
    return report


def stop_reports(report_dir: str, timeout: float = 30.0, expect: int = 1) -> list[dict[str, Any]]:
    """The replicas' stop reports in ``report_dir``, waiting (bounded) until at least ``expect`` are there."""
    deadline = time.monotonic() + timeout
    while True:
        found = [json.loads(p.read_text()) for p in sorted(Path(report_dir).glob("*.json"))]
        if len(found) >= expect or time.monotonic() >= deadline:
            return found
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m examples.ray_serve.loadtest", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="host", help="each replica's device: host, cuda:0 or nv:0 (with --gpus-per-replica 1)")
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--num-cpus", type=int, default=2, help="the local Ray cluster's CPUs")
    p.add_argument("--cpus-per-replica", type=float, default=0.5)
    p.add_argument("--gpus-per-replica", type=float, default=0)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--fault", action="append", choices=("loss", "hang"), help="repeatable; default: loss, then hang")
    p.add_argument("--hang-ms", type=int, default=1000)
    p.add_argument("--fault-timeout", type=float, default=90.0)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    import ray
    from ray import serve

    report_dir = tempfile.mkdtemp(prefix="arig-ray-serve-")
    cfg = ReplicaConfig(device=args.device, hang_ms=args.hang_ms, debug_faults=True, report_dir=report_dir)
    t0 = time.monotonic()
    try:
        url = start_cluster(args.num_cpus)
        deploy(cfg, num_replicas=args.replicas, health_check_period_s=1.0, health_check_timeout_s=10.0, graceful_shutdown_timeout_s=10.0,
               ray_actor_options={"num_cpus": args.cpus_per_replica, "num_gpus": args.gpus_per_replica})
        started = time.monotonic() - t0
        report = asyncio.run(run_faults(url, replicas=args.replicas, faults=args.fault or ["loss", "hang"], concurrency=args.concurrency,
                                        fault_timeout=args.fault_timeout, hang_s=max(10.0, 5 * args.hang_ms / 1000)))
        serve.shutdown()
        stops = stop_reports(report_dir, expect=args.replicas + len(report["faults"]))
    finally:
        ray.shutdown()
    report.update(device=args.device, cluster_start_s=round(started, 3), stops=[{k: s[k] for k in ("replica", "stopped", "lost", "completions")} for s in stops])
    report["devices_stopped"] = len(stops) >= args.replicas + len(report["faults"]) and all(s["stopped"] for s in stops)
    report["passed"] = report["wrong"] == 0 and report["replaced"] and report["devices_stopped"]
    for f in report["faults"]:
        print(f"{f['fault']:5} in {f['replica']}: replaced by {f['replacement']} after {f['s_to_replacement']} s "
              f"({f['served_meanwhile']} served, {f['failed_meanwhile']} failed meanwhile)")
    print(f"served {report['served']} verified, failed {report['failed']} {report['failed_by']}, wrong {report['wrong']}; "
          f"{len(stops)} replicas stopped their device: {report['devices_stopped']} -> {'PASS' if report['passed'] else 'FAIL'}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
