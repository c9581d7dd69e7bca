"""Every ``ARIG_*`` environment variable arig reads, in one place.

Read at import.  The code reads them through this module at the moment it
decides (an open, a load), never caches them elsewhere; which completion
engine a device gets, ``ARIG_PURE`` and ``ARIG_NO_MEMOPS`` included, is
decided in ``arig._engine``, where tests choose one explicitly
(``_engine.using``) rather than changing these attributes.

| variable | effect |
|---|---|
| ``ARIG_PURE=1`` | run the pure-Python submit and completion path instead of the native core |
| ``ARIG_NO_MEMOPS=1`` | never use stream memory operations: completions come from host functions only |
| ``ARIG_NO_GPU_STAMPS=1`` | CUDA: signal long work with stream memory operations, without the GPU's time (no stamp kernel) |
| ``ARIG_CUDA_BACKSTOP=poll[:us]``, ``early`` or ``event`` | CUDA on the native core, long work: the native thread's sleep cut into naps of at least ``us`` (default 500) and a tenth of the predicted length, each ending in a look at the words (``poll``, the default); or one sleep with a host function enqueued behind the work before it (``early``: it holds the stream until libcuda's callback thread has run it, which delays the next work); or one sleep with a blocking-sync event recorded behind the work, on which a waiter thread of the lane sits in ``cuEventSynchronize`` (``event``: it holds nothing up; every backstop, the one after a missed spin too, is then such an event) |
| ``ARIG_TRIO_SPIN=0`` | trio, native core: no spin before trio blocks.  By default the waiter that leads the run's fd spins up to 30 µs for a completion predicted near before it waits on the fd, where it is the one task of trio's pass and none is runnable, as asyncio's loops spin before they block, and a wait that its spin resolved yields where anything else is due (the bench's trio rows measure trio with and without it) |
| ``ARIG_LIBCUDA=path`` | the libcuda to load (default ``libcuda.so.1``) |
| ``ARIG_GPU_REQUIRED=1`` | tests: fail, rather than skip, GPU tests where no GPU opens |
"""

from __future__ import annotations

import os

__all__ = ["PURE", "NO_MEMOPS", "NO_GPU_STAMPS", "CUDA_BACKSTOP", "TRIO_SPIN", "LIBCUDA", "GPU_REQUIRED", "describe"]


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def _on_unless_zero(name: str) -> bool:
    return os.environ.get(name, "") != "0"


PURE: bool = _flag("ARIG_PURE")
NO_MEMOPS: bool = _flag("ARIG_NO_MEMOPS")
NO_GPU_STAMPS: bool = _flag("ARIG_NO_GPU_STAMPS")
LIBCUDA: str = os.environ.get("ARIG_LIBCUDA") or "libcuda.so.1"
CUDA_BACKSTOP: str = os.environ.get("ARIG_CUDA_BACKSTOP") or "poll"
TRIO_SPIN: bool = _on_unless_zero("ARIG_TRIO_SPIN")
GPU_REQUIRED: bool = _flag("ARIG_GPU_REQUIRED")


def describe() -> dict[str, object]:
    """The variables' values as arig sees them (``arig info``)."""
    return {"ARIG_PURE": PURE, "ARIG_NO_MEMOPS": NO_MEMOPS, "ARIG_NO_GPU_STAMPS": NO_GPU_STAMPS, "ARIG_CUDA_BACKSTOP": CUDA_BACKSTOP, "ARIG_TRIO_SPIN": TRIO_SPIN, "ARIG_LIBCUDA": LIBCUDA, "ARIG_GPU_REQUIRED": GPU_REQUIRED}
