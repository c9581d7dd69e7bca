"""The stamp kernel: a signal that carries the GPU's time, so the native core learns how long long
work takes from the GPU's own clock (as an NV semaphore release does), not from when a host
function or a look happened to see it.

``arig_stamp(word, v, pair)``, one thread: ``pair = {0, t}``, then ``{v, t}``, then ``word = v``,
with ``t`` the global timer, each store made visible to the host before the next (the core's reader
takes ``t`` only where it sees the same ``v`` before and after it).  PTX, compiled by the driver
when a device opens; where that fails (an old GPU, a driver without a JIT) every signal stays a
stream memory operation.

Threads: ``load`` and ``unload`` on the device's submit thread (they call libcuda).
"""

from __future__ import annotations

import ctypes
from ctypes import byref, c_void_p

from ._lib import lib

__all__ = ["PTX", "NAME", "MARK", "load", "unload"]

#: The first line of the image (the fake driver knows the kernel by it).
MARK = b"// arig stamp kernel\n"
NAME = b"arig_stamp"
PTX = MARK + b"""\
.version 7.0
.target sm_75
.address_size 64

.visible .entry arig_stamp(.param .u64 word, .param .u64 v, .param .u64 pair)
{
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [word];
    ld.param.u64 %rd2, [v];
    ld.param.u64 %rd3, [pair];
    mov.u64 %rd4, 0;
    st.volatile.u64 [%rd3], %rd4;
    membar.sys;
    mov.u64 %rd5, %globaltimer;
    st.volatile.u64 [%rd3+8], %rd5;
    membar.sys;
    st.volatile.u64 [%rd3], %rd2;
    membar.sys;
    st.volatile.u64 [%rd1], %rd2;
    membar.sys;
    ret;
}
\x00"""


def load() -> tuple[int, int] | None:
    """(CUmodule, CUfunction) of the stamp kernel in the current context, or None where the driver
    cannot build it.  Submit thread."""
    mod, fn = c_void_p(), c_void_p()
    if lib.cuModuleLoadData(byref(mod), ctypes.c_char_p(PTX)) != 0 or not mod.value:
        return None
    if lib.cuModuleGetFunction(byref(fn), mod, NAME) != 0 or not fn.value:
        lib.cuModuleUnload(mod)
        return None
    return mod.value, fn.value


def unload(module: int) -> None:
    """Submit thread, once no work that launches it is queued."""
    lib.cuModuleUnload(c_void_p(module))
