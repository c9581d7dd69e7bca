"""A CUDA device's memory and images: allocations, frees, loads, unloads.

Runs on the device's Python submit thread (``Device.alloc``/``load`` are
controls; frees and unloads are posted by the device's ledger,
``arig._memory.Ledger``, once the work submitted before the close is done).  Images'
modules are shared with the GPU's process-wide state (``_gpu``), which keeps
a module loaded while a graph uses its kernels.
"""

from __future__ import annotations

import ctypes
from ctypes import byref, c_char_p, c_size_t, c_uint, c_uint64, c_void_p
from typing import Any

import numpy as np

from .._errors import ArigValueError, safe_repr
from .._launchspec import KernelImage, ParamLayout
from .._memory import Buffer, Kind, Ledger, describe_kinds, kind_names
from ._items import Copy
from ._launch import _LAYOUTS
from ._lib import check, lib


def _nothing() -> None:
    """A wrapped array's memory is its owner's to free."""

__all__ = ["Resources", "CudaBuffer", "KIND_TABLE", "KINDS"]

#: A CUDA device's kinds of memory.  ``"mapped"`` here is host RAM mapped for the GPU; on an
#: NV device the same name is VRAM mapped for the CPU (``arig.nvrm._memory.KIND_TABLE``).
KIND_TABLE = (
    Kind("device", "gpu", cpu=False, gpu=True, made_by="alloc", what="the GPU's memory (cuMemAlloc), for kernels only: the host reaches it through copies"),
    Kind("pinned", "host", cpu=True, gpu=False, made_by="alloc", what="page-locked host RAM (cuMemHostAlloc) for fast copies, read in place by the host"),
    Kind("mapped", "host", cpu=True, gpu=True, made_by="alloc",
         what="page-locked host RAM also mapped for the GPU (CU_MEMHOSTALLOC_DEVICEMAP), read in place by the host and by kernels"),
    Kind("foreign", "gpu", cpu=False, gpu=True, made_by="wrap", what="another library's GPU array (dev.wrap), freed by that library"),
)  # fmt: skip
#: The names ``alloc`` takes (the first is its default).
KINDS = kind_names(KIND_TABLE)
_ALLOCATED = {k.name: k for k in KIND_TABLE if k.made_by == "alloc"}
CU_MEMHOSTALLOC_PORTABLE = 1
CU_MEMHOSTALLOC_DEVICEMAP = 2
#: DLPack's device type of CUDA device memory.
kDLCUDA = 2


class CudaBuffer(Buffer):
    """Device memory of a CUDA device, its own or a wrapped array's.

    What the core ``Buffer`` cannot know: other CUDA libraries read it through
    ``__cuda_array_interface__``, and its DLPack device is the GPU's
    ``(kDLCUDA, ordinal)``.  Pinned and mapped memory (host RAM, ``KIND_TABLE``)
    are plain buffers: the host sees them, so they export as host memory and
    offer no CUDA interface.
    """

    def __init__(
        self, device: str, kind: str, address: int, nbytes: int, release: Any, ordinal: int, *, keep: Any = None, readonly: bool = False, ledger: Ledger | None = None
    ) -> None:
        super().__init__(device, kind, address, nbytes, release, keep=keep, readonly=readonly, ledger=ledger)
        self._dl = (kDLCUDA, ordinal)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """Bytes of device memory, for CuPy, PyTorch and Numba (version 3)."""
        if self.closed:
            raise ArigValueError(f"buffer is closed{self._held.why}")
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.address, False), "version": 3, "strides": None, "stream": None}


class Resources:
    """Memory and images of a CUDA backend (a mixin: the backend holds the state)."""

    name: str
    ordinal: int
    post: Any
    gpu: Any
    ledger: Ledger
    _live: dict[int, str]
    _images: set[int]
    _modules_of: dict[int, int]

    # -- memory ------------------------------------------------------------------
    def alloc(self, nbytes: int, kind: str | None) -> Buffer:
        kind = kind or KINDS[0]
        row = _ALLOCATED.get(kind)
        if row is None:
            raise ArigValueError(f"{self.name} has memory of kinds {describe_kinds(KIND_TABLE)}; not {safe_repr(kind)}")
        if row.lives == "gpu":
            d = c_uint64()
            check(lib.cuMemAlloc_v2(byref(d), nbytes), f"cuMemAlloc({nbytes})")
            self._live[d.value] = kind
            return CudaBuffer(self.name, kind, d.value, nbytes, _Release(self.post, self._free, d.value), self.ordinal, ledger=self.ledger)
        p = c_void_p()
        flags = CU_MEMHOSTALLOC_PORTABLE | (CU_MEMHOSTALLOC_DEVICEMAP if row.gpu else 0)
        check(lib.cuMemHostAlloc(byref(p), nbytes, flags), f"cuMemHostAlloc({nbytes})")
        addr = p.value or 0
        host = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(addr))
        self._live[addr] = kind
        return Buffer(self.name, kind, addr, nbytes, _Release(self.post, self._free, addr), host=host, ledger=self.ledger)

    def wrap(self, obj: Any) -> Buffer:
        """Loop thread (no driver call): another library's GPU array as a buffer of this device."""
        from .. import _dlpack  # noqa: PLC0415

        f = _dlpack.foreign(obj)
        if f.device_type != _dlpack.kDLCUDA or f.device_id not in (self.ordinal, -1):
            where = f"GPU {f.device_id}" if f.device_type == _dlpack.kDLCUDA else f"DLPack device type {f.device_type}"
            raise ArigValueError(f"cannot wrap {safe_repr(obj)}: its memory is on {where}, not in {self.name}'s device memory (GPU {self.ordinal})")
        return CudaBuffer(self.name, "foreign", f.address, f.nbytes, _nothing, self.ordinal, keep=f.keep, readonly=f.readonly, ledger=self.ledger)

    def _free(self, addr: int) -> None:
        kind = self._live.pop(addr, None)
        if kind == "device":  # the one kind in the GPU's memory (KIND_TABLE)
            lib.cuMemFree_v2(addr)
        elif kind is not None:
            lib.cuMemFreeHost(addr)

    def copy_fill(self, buf: Buffer, array: np.ndarray, to_device: bool) -> tuple[Any, Any]:
        return Copy(to_device, buf.address, array.ctypes.data, array.nbytes), None

    # -- images ------------------------------------------------------------------
    def load(self, image: bytes) -> KernelImage:
        self.gpu.reclaim()
        data = image
        if not (data[:4] == b"\x7fELF" or data[:4] == b"\x50\xed\x55\xba"):
            data = data + b"\0"  # PTX is text: libcuda reads it up to a NUL
        buf = ctypes.create_string_buffer(data, len(data))
        mod = c_void_p()
        check(lib.cuModuleLoadData(byref(mod), buf), "cuModuleLoadData")
        m = mod.value or 0
        try:
            functions, layouts = _enumerate(m)
        except BaseException:
            lib.cuModuleUnload(m)
            raise
        self.gpu.add_module(m)
        self._images.add(m)
        for name, f in functions.items():
            _LAYOUTS[f] = layouts[name]
            self._modules_of[f] = m
        return KernelImage(self.name, m, functions, layouts, _Release(self.post, self._unload, m), self.ledger)

    @property
    def images_loaded(self) -> set[int]:
        """The modules of this device's images not unloaded (the record checks a graph's kernels against them)."""
        return self._images

    def module_of(self, func: int) -> int | None:
        """The module of a function this device loaded, or None."""
        return self._modules_of.get(func)

    def lost_cause(self) -> BaseException | None:
        tl = getattr(self, "timeline", None)
        return None if tl is None else tl.cause

    def _unload(self, module: int) -> None:
        if module in self._images:
            self._images.discard(module)
            for f in [f for f, m in self._modules_of.items() if m == module]:
                del self._modules_of[f]  # a later module at the same address is another image
                _LAYOUTS.pop(f, None)
            self.gpu.release_module(module)
            self.gpu.reclaim()


class _Release:
    """A finalizer's callable that holds no reference to its buffer or image."""

    __slots__ = ("post", "fn", "handle")

    def __init__(self, post: Any, fn: Any, handle: int) -> None:
        self.post, self.fn, self.handle = post, fn, handle

    def __call__(self) -> None:
        self.post(self.fn, self.handle)


def _enumerate(module: int) -> tuple[dict[str, int], dict[str, ParamLayout]]:
    n = c_uint()
    check(lib.cuModuleGetFunctionCount(byref(n), module), "cuModuleGetFunctionCount")
    funcs = (c_void_p * n.value)()
    if n.value:
        check(lib.cuModuleEnumerateFunctions(funcs, n.value, module), "cuModuleEnumerateFunctions")
    names: dict[str, int] = {}
    layouts: dict[str, ParamLayout] = {}
    for f in funcs:
        s = c_char_p()
        check(lib.cuFuncGetName(byref(s), f), "cuFuncGetName")
        name = (s.value or b"").decode()
        # The enumerated handle may be a CUkernel-backed function: take the
        # module's own CUfunction for it, which is what launches expect.
        h = c_void_p()
        check(lib.cuModuleGetFunction(byref(h), module, name.encode()), f"cuModuleGetFunction({name})")
        names[name] = h.value or 0
        layouts[name] = _param_layout(h)
    return names, layouts


def _param_layout(func: c_void_p) -> ParamLayout:
    """The driver's layout of ``func``'s parameters: ask for each index until it says there is none."""
    layout = []
    for k in range(4096):
        off, size = c_size_t(), c_size_t()
        if lib.cuFuncGetParamInfo(func, k, byref(off), byref(size)) != 0:
            break
        layout.append((off.value, size.value))
    return tuple(layout)
