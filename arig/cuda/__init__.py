"""GPUs through libcuda: ``arig.cuda.gpu(i)`` opens GPU i on its primary context.

Import is free: libcuda loads on the first open (or ``count()``), so this
module imports on machines without a driver.
"""

from __future__ import annotations

from .._errors import ArigTypeError, ArigValueError
from ._device import FILL, CudaOpener, count, peers
from ._launch import Launch, check_args, pack, shipped_image
from ._lib import CudaError, CudaOutOfMemory, CudaUnavailable
from .interop import wait_event

__all__ = ["gpu", "count", "peers", "FILL", "Launch", "pack", "check_args", "CudaError", "CudaOutOfMemory", "CudaUnavailable", "capture", "shipped_image", "wait_event"]


def gpu(i: int, *, queues: int = 1, hang_ms: int | None = None, spin_us: int = 40, sched: str | None = None, memops: bool | None = None) -> CudaOpener:
    """The opener of GPU ``i`` (name ``"CUDA"`` for 0, ``"CUDA:i"`` otherwise).

    ``queues`` non-blocking streams; ``hang_ms`` overrides the hang timeout
    (default: 30 s where no display watchdog runs, else None); ``spin_us``
    bounds how long the device's native thread watches for a predicted
    completion before a host function takes over (0: host functions only);
    ``sched`` (``"auto"``, ``"spin"``, ``"yield"``, ``"blocking"``) sets how
    libcuda's threads wait, where arig creates the primary context;
    ``memops=False`` never uses stream memory operations (host functions
    write the completions; as ``ARIG_NO_MEMOPS=1``), None uses them where the
    driver has them.
    """
    if isinstance(i, bool) or not isinstance(i, int):
        raise ArigTypeError(f"GPU index must be an int, got {type(i).__name__}")
    if i < 0:
        raise ArigValueError(f"GPU index must be >= 0, got {i}")
    if isinstance(queues, bool) or not isinstance(queues, int) or queues < 1:
        raise ArigValueError(f"queues must be an int >= 1, got {queues!r}")
    if hang_ms is not None and (isinstance(hang_ms, bool) or not isinstance(hang_ms, int) or hang_ms <= 0):
        raise ArigValueError(f"hang_ms must be a positive int or None, got {hang_ms!r}")
    if isinstance(spin_us, bool) or not isinstance(spin_us, int) or spin_us < 0:
        raise ArigValueError(f"spin_us must be an int >= 0, got {spin_us!r}")
    if sched is not None and sched not in ("auto", "spin", "yield", "blocking"):
        raise ArigValueError(f"sched must be 'auto', 'spin', 'yield' or 'blocking', not {sched!r}")
    if memops not in (None, True, False):
        raise ArigValueError(f"memops must be None, True or False, got {memops!r}")
    return CudaOpener(i, queues, hang_ms, spin_us, sched, memops)


def __getattr__(name: str) -> object:
    if name == "capture":
        import importlib

        return importlib.import_module(".capture", __name__)
    raise AttributeError(f"module 'arig.cuda' has no attribute {name!r}")
