"""What runs a batch: one runner per (server kind, device), all with one interface.

The batcher hands a runner a float32 batch ``x`` (n, IN) and awaits the
float32 answers (n, OUT).  The arig runners and the baseline runners do the
same work on the same device and differ only in how the event loop awaits
it: through an arig device (no thread hop, no polling), or through
``loop.run_in_executor`` (a thread per waiting batch).
"""

from __future__ import annotations

import importlib.util
from typing import Any, Protocol

import numpy as np

__all__ = ["Runner", "SERVERS", "parse_device", "resolve_device", "make_runner"]

SERVERS = ("arig", "baseline")


class Runner(Protocol):
    """One model on one device, as the server uses it (all methods on the event loop)."""

    #: "arig" or "baseline"
    server: str
    #: "host" or "cuda:N"
    device: str
    #: How the batch is awaited, for /metrics and the bench table.
    how: str

    async def start(self) -> None:
        """Open the device and load the model; raises with a clear message if it cannot."""

    async def infer(self, x: np.ndarray) -> np.ndarray:
        """The answers to the batch ``x``: a new (n, OUT) float32 array."""

    async def stop(self) -> None:
        """Release the device (idempotent; also after a loss)."""

    @property
    def lost(self) -> BaseException | None:
        """None while the device works; else what broke it (``dev.lost`` on arig)."""

    @property
    def stopped(self) -> bool:
        """True once ``stop`` released the device."""


def parse_device(spec: str) -> tuple[str, int]:
    """``"host"`` -> ("host", 0); ``"cuda"``/``"cuda:N"`` -> ("cuda", N); anything else raises ValueError."""
    s = spec.strip().lower()
    if s in ("host", "cpu"):
        return "host", 0
    if s == "cuda":
        return "cuda", 0
    if s.startswith("cuda:") and s[5:].isdigit():
        return "cuda", int(s[5:])
    raise ValueError(f"device must be 'host', 'cuda' or 'cuda:N' (or 'auto'), not {spec!r}")


def resolve_device(spec: str) -> str:
    """The device ``spec`` names, with ``"auto"`` resolved: ``cuda:0`` where PyTorch sees a GPU, else ``host``."""
    if spec.strip().lower() != "auto":
        kind, index = parse_device(spec)
        return "host" if kind == "host" else f"cuda:{index}"
    if importlib.util.find_spec("torch") is None:
        return "host"
    import torch

    return "cuda:0" if torch.cuda.is_available() else "host"


def make_runner(server: str, device: str, *, slots: int, max_batch: int) -> Any:
    """The runner of ``server`` ("arig" or "baseline") on ``device`` ("host", "cuda:N", "auto").

    ``slots`` is how many batches may be in flight at once (the batcher's
    bound), ``max_batch`` the largest batch: the CUDA runners preallocate
    that much pinned and device memory per slot.
    """
    if server not in SERVERS:
        raise ValueError(f"server must be one of {SERVERS}, not {server!r}")
    kind, index = parse_device(resolve_device(device))
    if kind == "host":
        from .host_runners import ArigHost, BaselineHost

        return ArigHost() if server == "arig" else BaselineHost()
    from .cuda_runners import ArigCuda, BaselineCuda

    cls = ArigCuda if server == "arig" else BaselineCuda
    return cls(index, slots=slots, max_batch=max_batch)
