"""Load test: start a server on localhost, drive it over HTTP, check every answer, report.

    python3 -m examples.serve.loadtest --server arig --device host --requests 2000 --concurrency 32 --json out.json

The server runs as a subprocess (``python3 -m examples.serve --fd N``) on a
socket this process bound to a free port and hands over, so no port is
raced for and the server's CPU is its own: the server reports
``time.process_time()`` (every thread of its process) in ``/metrics``, read
before and after the measured phase.  A warm-up (verified, not timed) runs
first.  At the end the server is stopped with SIGINT, as uvicorn is stopped
by hand, and must print that its device stopped.

Reported: requests/s (verified answers over the measured window), client
latency p50/p90/p99 in ms (of verified answers), server CPU ms per request,
the server's /metrics, and counts of mismatches, 503s and errors.  Exit
status 0 only if every answer checked out and the device stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from . import client
from .app import ServeConfig
from .model import ATOL, RTOL
from .runners import resolve_device
from .server import add_serve_args, config_from_args, serve_argv

__all__ = ["LoadConfig", "run", "main"]

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class LoadConfig:
    """One load test: which server, how much load, and its bounds."""

    serve: ServeConfig = field(default_factory=ServeConfig)
    requests: int = 2000  # measured requests (at most)
    concurrency: int = 32  # requests in flight (over all client processes)
    clients: int = 1  # client processes (1: in this process)
    max_seconds: float = 60.0  # the measured phase ends by then, however many were sent
    warmup: int = 100  # verified, not timed
    startup_timeout: float = 120.0  # for the server to answer /healthz (a GPU's first use takes seconds)
    loop: str = "auto"  # the server's event loop
    seed: int = 1


class ServerProcess:
    """``python3 -m examples.serve`` on a listening socket bound here; stopped with SIGINT."""

    def __init__(self, serve: ServeConfig, loop: str) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=4096)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        # The server's output, read after it exits (files, not pipes: a full pipe would stall the server).
        self.out = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in stop()
        self.err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in stop()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
        fd = self.sock.fileno()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "examples.serve", "--fd", str(fd), *serve_argv(serve, loop)],
            cwd=ROOT, env=env, pass_fds=(fd,), stdout=self.out, stderr=self.err, stdin=subprocess.DEVNULL,
        )
        self.sock.close()  # the server holds its own copy; connections wait in the backlog until it serves

    def stderr_tail(self, n: int = 4000) -> str:
        self.err.seek(0)
        return self.err.read()[-n:]

    async def ready(self, http: httpx.AsyncClient, timeout: float) -> dict[str, Any]:
        """Wait (bounded) until /healthz answers 200: the lifespan opened the device."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with status {self.proc.returncode} before serving:\n{self.stderr_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not answer /healthz within {timeout} s:\n{self.stderr_tail()}")
            try:
                r = await http.get("/healthz", timeout=2.0)
            except httpx.TimeoutException:
                continue  # still starting: the request waits in the backlog, and is asked again
            except httpx.TransportError:
                # The connection was reset: the server is exiting (reported above, once it has), or it was refused.
                await asyncio.to_thread(_wait_quietly, self.proc, 2.0)
                continue
            if r.status_code != 200:
                raise RuntimeError(f"/healthz answered {r.status_code}: {r.text}")
            return dict(r.json())

    def stop(self, timeout: float = 60.0) -> dict[str, Any]:
        """SIGINT, as a person stops uvicorn; the server's exit line says whether its device stopped."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.out.seek(0)
        exit_line: dict[str, Any] = {}
        for line in self.out.read().splitlines():
            if line.startswith('{"event": "exit"'):
                exit_line = json.loads(line)
        out = {"code": code, "device_stopped": bool(exit_line.get("device_stopped")), "lost": exit_line.get("lost")}
        if code != 0:
            out["stderr"] = self.stderr_tail()
        self.out.close()
        self.err.close()
        return out


def _wait_quietly(proc: subprocess.Popen[Any], timeout: float) -> None:
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pass


async def _measure(cfg: LoadConfig, url: str, work: client.Workload) -> dict[str, Any]:
    if cfg.clients == 1:
        return client.merge([await client.drive(url, work, cfg.requests, cfg.concurrency, cfg.max_seconds)])
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(cfg.clients), ctx.Queue()
    share = [(cfg.requests + i) // cfg.clients for i in range(cfg.clients)]
    conc = [max(1, (cfg.concurrency + i) // cfg.clients) for i in range(cfg.clients)]
    procs = [ctx.Process(target=client.drive_process, args=(url, cfg.seed + 1 + i, share[i], conc[i], cfg.max_seconds, barrier, results), daemon=True)
             for i in range(cfg.clients)]
    for p in procs:
        p.start()
    parts: list[dict[str, Any]] = []
    deadline = time.monotonic() + cfg.max_seconds + 180
    try:
        while len(parts) < len(procs):
            try:
                parts.append(await asyncio.to_thread(results.get, True, 1.0))
            except queue.Empty:
                if time.monotonic() > deadline or not any(p.is_alive() for p in procs):
                    raise RuntimeError(f"{len(procs) - len(parts)} of {len(procs)} client processes gave no result") from None
    finally:
        for p in procs:
            await asyncio.to_thread(p.join, 10)
            if p.is_alive():
                p.kill()
    return client.merge(parts)


def _percentiles(lat_s: list[float]) -> dict[str, float | None]:
    if not lat_s:
        return {"p50": None, "p90": None, "p99": None, "mean": None, "max": None}
    a = np.asarray(lat_s) * 1000.0
    return {"p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)), "p99": float(np.percentile(a, 99)),
            "mean": float(a.mean()), "max": float(a.max())}


async def _drive_server(cfg: LoadConfig, srv: ServerProcess) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=srv.url, timeout=30.0) as http:
        health = await srv.ready(http, cfg.startup_timeout)
        work = client.Workload(cfg.seed)
        warm = client.merge([await client.drive(srv.url, work, cfg.warmup, min(cfg.concurrency, 64), cfg.max_seconds)]) if cfg.warmup else None
        before = (await http.get("/metrics")).json()
        got = await _measure(cfg, srv.url, work)
        after = (await http.get("/metrics")).json()
        health_after = await http.get("/healthz")
    wall = max(got["end"] - got["start"], 1e-9)
    server_cpu = after["process_cpu_s"] - before["process_cpu_s"]
    lat = got.pop("latencies_s")
    return {
        "health": health,
        "healthz_after": health_after.status_code,
        "warmup": None if warm is None else {k: warm[k] for k in ("ok", "mismatches", "rejected", "errors")},
        **got,
        "wall_s": wall,
        "requests_per_s": got["ok"] / wall,
        "latency_ms": _percentiles(lat),
        "server_cpu_s": server_cpu,
        "server_cpu_ms_per_request": server_cpu / got["ok"] * 1000.0 if got["ok"] else None,
        "client_cpu_per_process": got["cpu_s"] / wall / got["clients"],
        "server_metrics": after,
    }


def run(cfg: LoadConfig) -> dict[str, Any]:
    """Start the server, warm it up, measure, stop it; the result as a JSON-able dict."""
    serve = cfg.serve
    device = resolve_device(serve.device)
    serve = ServeConfig(**(asdict(serve) | {"device": device}))
    srv = ServerProcess(serve, cfg.loop)
    failure = None
    try:
        r = asyncio.run(_drive_server(cfg, srv))
    except BaseException as exc:
        failure = exc
        r = {}
    finally:
        exit_info = srv.stop()
    if failure is not None:
        raise RuntimeError(f"load test of the {serve.server} server failed: {type(failure).__name__}: {failure}\nserver: {exit_info}") from failure
    r["server_exit"] = exit_info
    warm = r["warmup"] or {"mismatches": 0, "errors": 0}
    r["verified"] = (r["mismatches"] == 0 and r["errors"] == 0 and r["retry_after_missing"] == 0 and r["ok"] > 0
                     and warm["mismatches"] == 0 and warm["errors"] == 0)
    r["passed"] = r["verified"] and exit_info["code"] == 0 and exit_info["device_stopped"]
    meta = {"server": serve.server, "device": device, "how": r["server_metrics"].get("how"), "tolerance": {"rtol": RTOL, "atol": ATOL},
            "config": asdict(cfg) | {"serve": asdict(serve)}, "python": sys.version.split()[0]}
    return meta | r


def summary(r: dict[str, Any]) -> str:
    lat = r["latency_ms"]

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    cpu = r["server_cpu_ms_per_request"]
    return (f"{r['server']:>8} on {r['device']}: {r['ok']}/{r['sent']} verified, {r['rejected']} x 503, {r['mismatches']} mismatches, {r['errors']} errors; "
            f"{r['requests_per_s']:.0f} req/s, p50 {fmt(lat['p50'])} p90 {fmt(lat['p90'])} p99 {fmt(lat['p99'])} ms, "
            f"server CPU {fmt(cpu)} ms/request, mean batch {r['server_metrics']['mean_batch']:.1f}; "
            f"device stopped: {r['server_exit']['device_stopped']}")


def add_load_args(p: argparse.ArgumentParser) -> None:
    d = LoadConfig()
    p.add_argument("--requests", type=int, default=d.requests, help="measured requests (default %(default)s)")
    p.add_argument("--concurrency", type=int, default=d.concurrency, help="requests in flight (default %(default)s)")
    p.add_argument("--clients", type=int, default=d.clients, help="client processes sharing the load (default %(default)s)")
    p.add_argument("--max-seconds", type=float, default=d.max_seconds, help="bound of the measured phase (default %(default)s)")
    p.add_argument("--warmup", type=int, default=d.warmup, help="verified warm-up requests, not timed (default %(default)s)")
    p.add_argument("--startup-timeout", type=float, default=d.startup_timeout, help="seconds for the server to start (default %(default)s)")


def load_config_from_args(a: argparse.Namespace, serve: ServeConfig | None = None) -> LoadConfig:
    return LoadConfig(serve or config_from_args(a), a.requests, a.concurrency, a.clients, a.max_seconds, a.warmup, a.startup_timeout, a.loop)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m examples.serve.loadtest", description="Load-test the example server over HTTP; every answer is checked.")
    add_serve_args(p)
    add_load_args(p)
    p.add_argument("--json", type=Path, default=None, help="write the result here")
    a = p.parse_args(argv)
    try:
        r = run(load_config_from_args(a))
    except (RuntimeError, ValueError) as exc:
        print(f"loadtest: {exc}", file=sys.stderr)
        return 1
    print(summary(r))
    if r["client_cpu_per_process"] > 0.85:
        print(f"loadtest: note: each client process used {r['client_cpu_per_process']:.0%} of a core: the client may limit the rate; try --clients N", file=sys.stderr)
    if r["first_error"] or r["first_mismatch"]:
        print(f"loadtest: first error: {r['first_error']}; first mismatch: {r['first_mismatch']}", file=sys.stderr)
    if a.json is not None:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(r, indent=2) + "\n")
    return 0 if r["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
