"""Which devices the pytest plugin opens, by name: ``host``, ``cuda:i``, ``nv:i``, ``fake``.

A *spec* is the lower-case name a user writes (``--arig-device host,cuda:0``)
and the test id pytest shows.  ``available()`` is every device this machine
can open, found once per process: probing a GPU costs a driver call, and the
answer does not change while tests run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import threading
from collections.abc import AsyncIterator
from typing import Any

import arig

__all__ = ["available", "cuda_count", "have_gpu", "missing", "nv_indices", "opened", "parse"]

_SPEC = re.compile(r"^(host|fake|cuda:\d+|nv:\d+)$")
_cache: dict[str, Any] = {}
_lock = threading.Lock()


def parse(text: str) -> list[str]:
    """The specs of a ``--arig-device`` value (comma list); ValueError naming a bad one.

    ``cuda`` and ``nv`` alone mean index 0; ``all`` means every available device.
    """
    out: list[str] = []
    for raw in text.split(","):
        spec = raw.strip().lower()
        if not spec:
            continue
        if spec == "all":
            out.extend(s for s in available() if s not in out)
            continue
        spec = {"cuda": "cuda:0", "nv": "nv:0", "cpu": "host"}.get(spec, spec)
        if not _SPEC.match(spec):
            raise ValueError(f"--arig-device: unknown device {raw.strip()!r}; use host, cuda:i, nv:i, fake or all")
        if spec not in out:
            out.append(spec)
    return out


def cuda_count() -> int:
    """GPUs libcuda sees (0 without a driver); asked once, only when a test needs to know."""
    with _lock:
        if "cuda" not in _cache:
            try:
                import arig.cuda as cuda

                _cache["cuda"] = cuda.count()
            except Exception:  # noqa: BLE001 - no libcuda, a broken driver: no GPU for tests
                _cache["cuda"] = 0
        n: int = _cache["cuda"]
        return n


def have_gpu() -> bool:
    """Is there an NVIDIA GPU, for the ``gpu`` marker: libcuda sees one, or NVIDIA's kernel
    driver is loaded (as arig's own suite decides: its kernel-driver tests need no libcuda)."""
    return cuda_count() > 0 or os.path.exists("/dev/nvidiactl")


def nv_indices() -> list[int]:
    """GPUs that ``arig.nvrm.gpu(i)`` opens.  Probed by opening each: today the NV
    path refuses every GPU (it cannot run work yet), so this is empty until it can."""
    with _lock:
        if "nv" not in _cache:
            _cache["nv"] = _probe_nv()
        found: list[int] = _cache["nv"]
        return found


def _probe_nv() -> list[int]:
    try:
        import arig.nvrm as nvrm

        n = nvrm.count()
    except Exception:  # noqa: BLE001 - no PCI tree, no driver
        return []
    if n == 0:
        return []

    async def opens(i: int) -> bool:
        nv: Any = nvrm.gpu(i)  # typed as making an object: it refuses with OpenError for now
        try:
            dev = await arig.open(nv)
        except arig.OpenError:
            return False
        await dev.stop()
        return True

    found: list[int] = []

    def probe() -> None:  # its own thread and loop: pytest may be inside a running loop
        for i in range(n):
            if asyncio.run(opens(i)):
                found.append(i)

    t = threading.Thread(target=probe, name="arig-nv-probe", daemon=True)
    t.start()
    t.join(30.0)
    return found


def available() -> list[str]:
    """Every device this machine opens: ``host``, then ``cuda:i``, then ``nv:i``."""
    return ["host", *(f"cuda:{i}" for i in range(cuda_count())), *(f"nv:{i}" for i in nv_indices())]


def missing(spec: str) -> str | None:
    """Why ``spec`` cannot be opened here (a skip reason), or None if it can."""
    if spec in ("host", "fake"):
        return None
    kind, _, index = spec.partition(":")
    i = int(index)
    if kind == "cuda":
        n = cuda_count()
        return None if i < n else f"no CUDA GPU {i} here (libcuda sees {n})"
    return None if i in nv_indices() else f"no NV device {i} here (arig.nvrm.gpu({i}) does not open)"


@contextlib.asynccontextmanager
async def opened(spec: str, **kw: Any) -> AsyncIterator[arig.Device]:
    """Open the device ``spec`` names on the running loop; stop it on the way out.

    ``fake`` installs a fresh ``FakeCuda`` (one GPU) for the device's
    lifetime and opens its GPU 0 through the real CUDA backend.
    """
    if spec == "fake":
        import arig.cuda as cuda

        from .fake_cuda import FakeCuda

        with FakeCuda().installed():
            dev = await arig.open(cuda.gpu(0), **kw)
            try:
                yield dev
            finally:
                await dev.stop()
        return
    kind, _, index = spec.partition(":")
    if kind == "host":
        opener: Any = arig.host.cpu()
    elif kind == "cuda":
        import arig.cuda as cuda

        opener = cuda.gpu(int(index))
    else:
        import arig.nvrm as nvrm

        opener = nvrm.gpu(int(index))  # typed as making an object: arig.open refuses one that cannot open
    dev = await arig.open(opener, **kw)
    try:
        yield dev
    finally:
        await dev.stop()
