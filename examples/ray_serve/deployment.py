"""The Ray Serve deployment: one :class:`~examples.ray_serve.replica.Replica` per Serve replica.

Routes, under the application's route prefix:

* ``POST /infer`` with ``{"x": [64 numbers]}``: ``{"y": [16 numbers], "replica": id}``;
  400/413 for a bad body (``examples/serve/body.py``), 503 with ``Retry-After``
  when the replica's queue is full, 503 once its device is lost;
* ``GET /healthz``: the replica's counters, its device and whether it is lost;
* ``POST /debug/lose`` and ``POST /debug/hang?seconds=S``: a fault in the one
  replica the proxy routed the request to (the answer names it), only when
  the config's ``debug_faults`` is on; 404 otherwise.

Serve calls ``check_health`` every ``health_check_period_s``; it raises once
the device is lost (a fault, a failed launch, or arig's hang watchdog), so
Serve stops the replica, which runs ``__del__`` (the device stops there), and
starts another.  Every method runs on the replica's one user event loop.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..serve.batcher import Overloaded, Stopped
from ..serve.body import DEFAULT_MAX_BODY_BYTES, BadBody, Gone, read_x
from .replica import FaultsDisabled, Replica, ReplicaConfig, Unhealthy

__all__ = ["ArigModel", "app", "DEFAULTS"]

#: The deployment's options unless the caller overrides them (see README.md for autoscaling).
DEFAULTS: dict[str, Any] = {
    "num_replicas": 2,
    "max_ongoing_requests": 256,  # what the batcher cuts into batches; its own max_queue refuses beyond
    "health_check_period_s": 2.0,
    "health_check_timeout_s": 30.0,
    "graceful_shutdown_timeout_s": 20.0,
    "ray_actor_options": {"num_cpus": 1, "num_gpus": 0},
}


class ArigModel:
    """A Serve replica: the device opens in ``__init__``, stops in ``__del__``."""

    async def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        try:
            name = serve.get_replica_context().replica_id.unique_id
        except Exception:  # noqa: BLE001 - constructed outside Serve (a test)
            name = "local"
        self.replica = Replica(ReplicaConfig(**(cfg or {})), name=name)
        await self.replica.start()

    async def __call__(self, request: Request) -> Response:
        path = request.url.path.rstrip("/")
        name = self.replica.name
        if path.endswith("/infer") and request.method == "POST":
            return await self._infer(request)
        if path.endswith("/healthz"):
            stats = self.replica.stats()
            return JSONResponse(stats, status_code=200 if stats["lost"] is None else 503)
        if path.endswith(("/debug/lose", "/debug/hang")) and request.method == "POST":
            what = "loss" if path.endswith("/lose") else "hang"
            try:
                done = await self.replica.inject(what, seconds=float(request.query_params.get("seconds", "10")))
            except FaultsDisabled as exc:
                return JSONResponse({"error": str(exc), "replica": name}, status_code=404)
            except (Unhealthy, ValueError) as exc:
                return JSONResponse({"error": str(exc), "replica": name}, status_code=409)
            return JSONResponse(done)
        return JSONResponse({"error": f"no route {request.method} {path}"}, status_code=404)

    async def _infer(self, request: Request) -> Response:
        name = self.replica.name
        try:
            x = await read_x(request, DEFAULT_MAX_BODY_BYTES)
            y = await self.replica.infer(x)
        except BadBody as exc:
            return JSONResponse({"error": str(exc), "replica": name}, status_code=exc.status)
        except Gone:
            return Response(status_code=400)
        except (Overloaded, Stopped) as exc:
            return JSONResponse({"error": str(exc), "replica": name}, status_code=503, headers={"Retry-After": "1"})
        except Unhealthy as exc:
            return JSONResponse({"error": str(exc), "replica": name}, status_code=503)
        return JSONResponse({"y": y.tolist(), "replica": name})

    async def check_health(self) -> None:
        """Serve's health check: raises once the device is lost or stopped, and Serve replaces the replica.

        Async, so that it runs on the replica's loop, where the device lives, even where Serve runs
        sync methods in a thread pool."""
        self.replica.check_health()

    async def __del__(self) -> None:
        """Serve's shutdown hook: refuse what is pending, finish running batches, stop the device."""
        await self.replica.stop()


def app(cfg: ReplicaConfig | None = None, **options: Any) -> Any:
    """The Serve application of ``cfg`` (``ReplicaConfig()`` if None), with :data:`DEFAULTS` updated by ``options``.

    ``options`` are ``serve.deployment``'s (``num_replicas``, ``autoscaling_config``,
    ``ray_actor_options={"num_gpus": 1}`` for a GPU per replica, ...).
    """
    opts = {**DEFAULTS, **options}
    if "autoscaling_config" in options:
        opts.pop("num_replicas")  # Serve takes one or the other
    return serve.deployment(ArigModel, name="ArigModel", **opts).bind(asdict(cfg or ReplicaConfig()))
