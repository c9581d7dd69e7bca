"""Run a server: ``python3 -m examples.serve --server arig --device auto --port 8000``.

uvicorn serves the app (uvloop where installed, httptools where installed;
access log off: both servers pay the same HTTP cost, and as little as
uvicorn allows).  ``--fd N`` serves on an already listening socket that the
load test bound and handed over, so it never races for a port.  On exit the
server prints one JSON line, ``{"event": "exit", "device_stopped": ..., ...}``,
at the end of the app's lifespan (uvicorn re-raises the SIGINT or SIGTERM
that stopped it once it has shut down, so nothing after ``server.run`` is
sure to run); the load test reads it to check that the device stopped.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from dataclasses import fields
from typing import Any

from .app import ServeConfig, make_app
from .runners import SERVERS, parse_device, resolve_device

__all__ = ["add_serve_args", "config_from_args", "serve_argv", "precheck", "main"]


def add_serve_args(p: argparse.ArgumentParser) -> None:
    """The flags of ServeConfig (shared by the server, the load test and the bench)."""
    d = ServeConfig()
    p.add_argument("--server", choices=SERVERS, default=d.server, help="arig, or the run_in_executor baseline (default %(default)s)")
    p.add_argument("--device", default=d.device, help="host, cuda:N or auto (cuda:0 where PyTorch sees a GPU, else host; default %(default)s)")
    p.add_argument("--max-batch", type=int, default=d.max_batch, help="rows per batch (default %(default)s)")
    p.add_argument("--max-wait-ms", type=float, default=d.max_wait_ms, help="longest wait for a batch to fill (default %(default)s)")
    p.add_argument("--max-queue", type=int, default=d.max_queue, help="pending requests beyond this get 503 (default %(default)s)")
    p.add_argument("--max-inflight", type=int, default=d.max_inflight, help="batches running at once (default %(default)s)")
    p.add_argument("--retry-after-s", type=int, default=d.retry_after_s, help="the 503's Retry-After (default %(default)s)")
    p.add_argument("--max-body-bytes", type=int, default=d.max_body_bytes, help="larger request bodies get 413 (default %(default)s)")
    p.add_argument("--loop", choices=("auto", "asyncio", "uvloop"), default="auto", help="uvicorn's event loop (auto: uvloop where installed)")


def config_from_args(a: argparse.Namespace) -> ServeConfig:
    return ServeConfig(a.server, a.device, a.max_batch, a.max_wait_ms, a.max_queue, a.max_inflight, a.retry_after_s, a.max_body_bytes)


def serve_argv(cfg: ServeConfig, loop: str = "auto") -> list[str]:
    """The server's command-line flags for ``cfg``."""
    argv = []
    for f in fields(cfg):
        argv += ["--" + f.name.replace("_", "-"), str(getattr(cfg, f.name))]
    return argv + ["--loop", loop]


def precheck(cfg: ServeConfig) -> None:
    """Fail fast, in one line, where the server could not start (before uvicorn and its traceback)."""
    kind, index = parse_device(resolve_device(cfg.device))
    if kind == "cuda":
        from .cuda_runners import import_torch

        import_torch(index)
        if cfg.server == "arig":
            import arig

            if not hasattr(arig.Device, "adopt"):
                raise RuntimeError(f"this arig ({arig.__file__}) has no Device.adopt(stream), which the arig CUDA server needs")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m examples.serve", description="The example inference server (Starlette on uvicorn).")
    add_serve_args(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--fd", type=int, default=None, help="serve on this listening socket (inherited) instead of --host/--port")
    a = p.parse_args(argv)
    cfg = config_from_args(a)
    import uvicorn

    try:
        precheck(cfg)
    except (RuntimeError, ValueError) as exc:
        print(f"serve: {exc}", file=sys.stderr)
        return 1
    app = make_app(cfg, on_shutdown=_report_exit)
    ucfg = uvicorn.Config(app, host=a.host, port=a.port, loop=a.loop, lifespan="on", log_level="warning", access_log=False)
    server = uvicorn.Server(ucfg)
    sockets = None
    if a.fd is not None:
        sockets = [socket.socket(fileno=a.fd)]  # family and type read from the descriptor
    else:
        print(f"serve: {cfg.server} server on http://{a.host}:{a.port} (device {resolve_device(cfg.device)})", file=sys.stderr, flush=True)
    try:
        server.run(sockets=sockets)
    except KeyboardInterrupt:
        pass  # uvicorn re-raised the SIGINT it shut down on: the lifespan already reported
    runner: Any = app.state.runner
    return 0 if server.started and runner.stopped else 3


def _report_exit(runner: Any) -> None:
    lost = runner.lost
    print(json.dumps({"event": "exit", "device_stopped": runner.stopped, "lost": None if lost is None else repr(lost)}), flush=True)
