"""One Serve replica's logic, without Ray: the device, the model, the batcher, health and stop.

:class:`Replica` is what the Ray Serve deployment (``deployment.py``) wraps
and what ``replica_check`` drives directly on a GPU machine without Ray.
Every method runs on the replica's event loop (Serve runs a replica's
``__init__``, requests, ``check_health`` and ``__del__`` on one loop):

* ``start`` opens the device in this process (the host device, or visible
  GPU N, which under Serve's ``num_gpus`` is the replica's own GPU: Ray sets
  ``CUDA_VISIBLE_DEVICES`` and both ``arig.cuda.gpu`` and ``arig.nvrm.gpu``
  number visible GPUs) and starts the batcher of ``examples/serve``;
* ``infer`` awaits one row's answer through the batcher and the device;
* ``check_health`` raises :class:`Unhealthy` once the device is lost, by a
  fault, a failed launch or the hang watchdog (``dev.lost``), or stopped:
  Serve then replaces the replica;
* ``inject`` (only with ``debug_faults``) loses the device or stalls its
  queue past ``hang_ms``, through :mod:`arig.testing.faults`;
* ``stop`` refuses what is pending, lets running batches end, stops the
  device, and writes a report to ``report_dir`` if given.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from arig.testing import faults

from ..serve.batcher import Batcher
from ..serve.metrics import Metrics
from ..serve.model import IN

__all__ = ["ReplicaConfig", "Replica", "Unhealthy", "FaultsDisabled", "parse_device"]

KINDS = ("host", "cuda", "nv")
#: The saxpy model's largest batch: a row costs about 190 launches.
KERNEL_MAX_BATCH = 8


class Unhealthy(RuntimeError):
    """The replica cannot serve: its device is lost or stopped (Serve replaces it)."""


class FaultsDisabled(RuntimeError):
    """A fault was asked of a replica whose config has ``debug_faults`` off."""


@dataclass(frozen=True)
class ReplicaConfig:
    """How a replica serves; a plain dict of these fields is the deployment's argument."""

    device: str = "host"  # "host", "cuda:N", "nv:N" (N: a visible GPU), or "auto" (cuda:0 where libcuda sees a GPU)
    model: str = "auto"  # on cuda: "torch" (examples/serve's runner) or "kernels"; "auto": torch where it imports
    max_batch: int = 64
    max_wait_ms: float = 1.0
    max_queue: int = 1024
    max_inflight: int = 4
    hang_ms: int | None = 2000  # the watchdog of the host and CUDA devices (NV: the driver's own)
    debug_faults: bool = False  # whether inject() works: a test and load-test switch, never on in production
    report_dir: str | None = None  # where stop() writes <name>.json (what the replica served, whether its device stopped)


def parse_device(spec: str) -> tuple[str, int]:
    """``"host"`` -> ("host", 0); ``"cuda:N"``/``"nv:N"`` (or without ``:N``) -> (kind, N); else ValueError."""
    s = spec.strip().lower()
    kind, _, index = s.partition(":")
    if kind == "cpu":
        kind = "host"
    if kind in KINDS and (index == "" or (index.isdigit() and kind != "host")):
        return kind, int(index or 0)
    raise ValueError(f"device must be 'host', 'cuda:N', 'nv:N' or 'auto', not {spec!r}")


def _auto_device() -> str:
    """``cuda:0`` where libcuda sees a GPU, else ``host`` (blocking: libcuda calls; off the loop)."""
    try:
        import arig.cuda

        return "cuda:0" if arig.cuda.count() > 0 else "host"
    except Exception:  # noqa: BLE001 - no libcuda here: the host device
        return "host"


def _model_for(kind: str, model: str) -> str:
    """Which model serves on ``kind``: "numpy" (host), "kernels" (nv; cuda without PyTorch or when asked), "torch"."""
    if model not in ("auto", "torch", "kernels"):
        raise ValueError(f"model must be 'auto', 'torch' or 'kernels', not {model!r}")
    if kind == "host":
        return "numpy"
    if kind == "nv":
        return "kernels"
    if model == "auto":
        import importlib.util

        return "torch" if importlib.util.find_spec("torch") is not None else "kernels"
    return model


def _make_runner(cfg: ReplicaConfig, kind: str, index: int, model: str) -> Any:
    slots, max_batch = cfg.max_inflight, cfg.max_batch
    if model == "numpy":
        from ..serve.host_runners import ArigHost

        return ArigHost(hang_ms=cfg.hang_ms)
    if model == "torch":
        from ..serve.cuda_runners import ArigCuda

        runner = ArigCuda(index, slots=slots, max_batch=max_batch)
        runner.hang_ms = cfg.hang_ms
        return runner
    from .kernel_runner import ArigKernels

    if kind == "nv":
        import arig.nvrm

        return ArigKernels(arig.nvrm.gpu(index), f"nv:{index}", slots=slots, max_batch=max_batch)
    import arig.cuda

    return ArigKernels(arig.cuda.gpu(index, hang_ms=cfg.hang_ms), f"cuda:{index}", slots=slots, max_batch=max_batch)


class Replica:
    """The model served on one device of this process (see the module's docstring)."""

    def __init__(self, cfg: ReplicaConfig, name: str = "replica") -> None:
        self.cfg = cfg
        self.name = name
        self.metrics = Metrics()
        self.runner: Any = None
        self.batcher: Batcher | None = None
        self.injected: list[str] = []

    @property
    def device(self) -> str:
        return "unopened" if self.runner is None else str(self.runner.device)

    async def start(self) -> None:
        """Open the device and load the model; raises (the replica fails to start) if it cannot."""
        spec = self.cfg.device
        if spec.strip().lower() == "auto":
            spec = await asyncio.to_thread(_auto_device)
        kind, index = parse_device(spec)
        cfg, model = self.cfg, _model_for(kind, self.cfg.model)
        if model == "kernels":  # launches per row: keep its batches small
            cfg = ReplicaConfig(**{**asdict(cfg), "max_batch": min(cfg.max_batch, KERNEL_MAX_BATCH)})
        runner = _make_runner(cfg, kind, index, model)
        await runner.start()
        self.runner = runner
        self.batcher = Batcher(runner, self.metrics, max_batch=cfg.max_batch, max_wait_ms=cfg.max_wait_ms, max_queue=cfg.max_queue, max_inflight=cfg.max_inflight)
        self.batcher.start()

    async def infer(self, x: Any) -> np.ndarray:
        """The answer (OUT float32) to one input row (IN numbers); raises Unhealthy on a lost device."""
        row = np.asarray(x, np.float32)
        if row.shape != (IN,) or not np.isfinite(row).all():
            raise ValueError(f"x must be {IN} finite numbers, got shape {row.shape}")
        self.check_health()
        assert self.batcher is not None
        self.metrics.received += 1
        t0 = time.perf_counter()
        try:
            y = await self.batcher.infer(row)
        except Exception:
            self.metrics.errors += 1
            self.check_health()  # a lost device says so, rather than the batch's error
            raise
        self.metrics.completions += 1
        self.metrics.latency(time.perf_counter() - t0)
        return y

    def check_health(self) -> None:
        """Return while the device serves; raise :class:`Unhealthy` once it is lost or stopped."""
        runner = self.runner
        if runner is None or self.batcher is None:
            raise Unhealthy(f"{self.name}: not started")
        lost = runner.lost
        if lost is not None:
            raise Unhealthy(f"{self.name}: device {runner.device} lost: {type(lost).__name__}: {lost}")
        if runner.stopped:
            raise Unhealthy(f"{self.name}: device {runner.device} stopped")

    async def inject(self, what: str, seconds: float = 10.0) -> dict[str, Any]:
        """Lose the device (``"loss"``) or stall its queue for ``seconds`` (``"hang"``, lost once
        ``hang_ms`` passes without progress); only with ``debug_faults``."""
        if not self.cfg.debug_faults:
            raise FaultsDisabled(f"{self.name}: faults are off (debug_faults=False)")
        self.check_health()
        dev = self.runner.dev
        if what == "loss":
            await faults.lose(dev, RuntimeError(f"fault injected into {self.name}"))
        elif what == "hang":
            if dev.facts.get("hang_ms") is None:
                raise ValueError(f"{self.name}: {dev.name} has no hang watchdog (hang_ms None): a stall would not be seen")
            await faults.stall(dev, seconds)
        else:
            raise ValueError(f"what must be 'loss' or 'hang', not {what!r}")
        self.injected.append(what)
        return {"replica": self.name, "injected": what, "device": self.device}

    def stats(self) -> dict[str, Any]:
        lost = None if self.runner is None else self.runner.lost
        return self.metrics.snapshot() | {"replica": self.name, "device": self.device, "lost": None if lost is None else f"{type(lost).__name__}: {lost}",
                                           "stopped": self.runner is not None and bool(self.runner.stopped), "injected": list(self.injected)}

    async def stop(self) -> None:
        """Stop serving and stop the device (idempotent; also after a loss); then write the report."""
        try:
            if self.batcher is not None:
                await self.batcher.stop()
            if self.runner is not None:
                await self.runner.stop()
        finally:
            if self.cfg.report_dir is not None:
                self._report()

    def _report(self) -> None:
        path = Path(str(self.cfg.report_dir)) / f"{self.name}.json"
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.stats()))
        os.replace(tmp, path)  # a reader sees the whole report or none
