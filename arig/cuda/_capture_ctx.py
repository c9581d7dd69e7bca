"""Which CUDA context a capture call runs in: made current for the call, then restored.

A capture call runs in the context of its stream (``cuStreamGetCtx``) or of
the graph it names, or in the one ``context=`` gives; a fill's or worker's
current context is never left changed.  Destructors run with this thread's
capture interaction mode RELAXED (``_relaxed``), so that destroying a handle
cannot invalidate a capture in progress.  Submit or worker threads only:
each helper calls libcuda.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from ctypes import byref, c_int, c_void_p
from typing import Any

from .._errors import ArigTypeError, ArigValueError
from ._abi import KEY, CudaAbi
from ._lib import check, lib

#: CU_STREAM_CAPTURE_MODE_RELAXED (``capture.RELAXED``).
_MODE_RELAXED = 2


def _resolve(context: Any) -> int:
    """A CUcontext from ``context``: an int, a CUDA device's record, or a CUDA device."""
    if isinstance(context, int) and not isinstance(context, bool):
        if context <= 0:
            raise ArigValueError(f"context must be a CUcontext (a positive int), got {context}")
        return context
    record = context
    capability = getattr(context, "capability", None)
    if callable(capability):
        record = capability(KEY)
        if record is None:
            raise ArigTypeError(f"{context!r} is not a CUDA device")
    if not isinstance(record, CudaAbi):
        raise ArigTypeError(f"context must be a CUcontext int, a CUDA device's record or a CUDA device, got {type(context).__name__}")
    return record.context


def _current() -> int:
    cur = c_void_p()
    check(lib.cuCtxGetCurrent(byref(cur)), "cuCtxGetCurrent")
    return cur.value or 0


@contextlib.contextmanager
def _in(ctx: int) -> Iterator[int]:
    """Make ``ctx`` current for the block (if it is not already), then restore."""
    cur = _current()
    if not ctx or ctx == cur:
        yield cur
        return
    check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    try:
        yield ctx
    finally:
        lib.cuCtxSetCurrent(cur or None)



def _stream_ctx(s: int) -> int:
    c = c_void_p()
    check(lib.cuStreamGetCtx(s, byref(c)), "cuStreamGetCtx")
    return c.value or 0


@contextlib.contextmanager
def _relaxed() -> Iterator[None]:
    """This thread's capture interaction mode RELAXED for the block: a destructor
    run here must not invalidate a capture in progress (ours or another thread's)."""
    mode = c_int(_MODE_RELAXED)
    ok = lib.cuThreadExchangeStreamCaptureMode(byref(mode)) == 0
    try:
        yield
    finally:
        if ok:
            lib.cuThreadExchangeStreamCaptureMode(byref(mode))

