"""The Starlette app: ``POST /infer``, ``GET /healthz``, ``GET /metrics``; the device lives in the lifespan.

The app is the same for both servers; only its runner differs (``runners.py``).
Startup opens the device and loads the model (``runner.start()``) before the
first request is served; shutdown stops cutting batches, lets running ones
finish, and stops the device (``runner.stop()``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .batcher import Batcher, Overloaded, Stopped
from .body import DEFAULT_MAX_BODY_BYTES, BadBody, Gone, read_x
from .metrics import Metrics
from .runners import make_runner

__all__ = ["ServeConfig", "make_app"]


@dataclass(frozen=True)
class ServeConfig:
    """How a server batches and when it refuses work."""

    server: str = "arig"  # "arig" or "baseline"
    device: str = "auto"  # "host", "cuda:N" or "auto"
    max_batch: int = 64  # rows per batch (one submit)
    max_wait_ms: float = 1.0  # longest a request waits for its batch to fill
    max_queue: int = 1024  # requests pending beyond this are refused with 503
    max_inflight: int = 4  # batches running at once
    retry_after_s: int = 1  # the 503's Retry-After
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES  # larger request bodies get 413, unread


def make_app(cfg: ServeConfig, runner: Any = None, on_shutdown: Callable[[Any], None] | None = None) -> Starlette:
    """The server's app; ``runner`` overrides the one ``cfg`` names (tests pass their own).

    ``on_shutdown(runner)`` is called at the end of the lifespan, once the
    device was stopped (or failed to stop): the server reports there, since
    uvicorn may end the process by re-raising the signal that stopped it.
    """
    metrics = Metrics()
    if runner is None:
        runner = make_runner(cfg.server, cfg.device, slots=cfg.max_inflight, max_batch=cfg.max_batch)
    state: dict[str, Any] = {"batcher": None}
    busy_headers = {"Retry-After": str(cfg.retry_after_s)}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await runner.start()
        batcher = Batcher(runner, metrics, max_batch=cfg.max_batch, max_wait_ms=cfg.max_wait_ms, max_queue=cfg.max_queue, max_inflight=cfg.max_inflight)
        batcher.start()
        state["batcher"] = batcher
        try:
            yield
        finally:
            try:
                await batcher.stop()
                await runner.stop()
            finally:
                if on_shutdown is not None:
                    on_shutdown(runner)

    def unavailable(why: str, retry: bool) -> JSONResponse:
        return JSONResponse({"error": why}, status_code=503, headers=busy_headers if retry else None)

    async def infer(request: Request) -> JSONResponse:
        t0 = time.perf_counter()
        metrics.received += 1
        try:
            x = await read_x(request, cfg.max_body_bytes)
        except BadBody as exc:
            metrics.errors += 1
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        except Gone:
            metrics.errors += 1
            return Response(status_code=400)  # nobody reads it: the server only ends the request quietly
        batcher = state["batcher"]
        if runner.lost is not None or batcher is None:
            metrics.rejected += 1
            return unavailable(f"device lost: {runner.lost}" if runner.lost is not None else "not serving", retry=False)
        try:
            y = await batcher.infer(x)
        except Overloaded as exc:
            metrics.rejected += 1
            return unavailable(str(exc), retry=True)
        except Stopped as exc:
            metrics.rejected += 1
            return unavailable(str(exc), retry=True)
        except Exception as exc:  # noqa: BLE001 - the batch failed: say why, and 503 once the device is lost
            metrics.errors += 1
            if runner.lost is not None:
                return unavailable(f"device lost: {runner.lost}", retry=False)
            return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, status_code=500)
        if not np.isfinite(y).all():  # finite inputs so large that the model overflows float32
            metrics.errors += 1
            return JSONResponse({"error": "x is too large: the answer overflows float32"}, status_code=400)
        metrics.completions += 1
        metrics.latency(time.perf_counter() - t0)
        return JSONResponse({"y": y.tolist()})

    async def healthz(request: Request) -> JSONResponse:
        lost = runner.lost
        ok = lost is None and state["batcher"] is not None and not runner.stopped
        body = {"ok": ok, "server": runner.server, "device": runner.device}
        if lost is not None:
            body["lost"] = f"{type(lost).__name__}: {lost}"
        return JSONResponse(body, status_code=200 if ok else 503)

    async def metrics_view(request: Request) -> JSONResponse:
        batcher = state["batcher"]
        lost = runner.lost
        return JSONResponse(
            metrics.snapshot()
            | {
                "queue_depth": 0 if batcher is None else batcher.depth,
                "inflight_batches": 0 if batcher is None else batcher.inflight,
                "server": runner.server,
                "device": runner.device,
                "how": runner.how,
                "lost": None if lost is None else f"{type(lost).__name__}: {lost}",
                "config": asdict(cfg),
            }
        )

    app = Starlette(
        routes=[Route("/infer", infer, methods=["POST"]), Route("/healthz", healthz), Route("/metrics", metrics_view)],
        lifespan=lifespan,
    )
    app.state.runner = runner
    app.state.metrics = metrics
    app.state.serving = state
    return app
