"""The NV device's loaded cubins and the registry of their kernels.

A kernel is known by the id :meth:`arig.Image.function` gives (:func:`register`),
so that :class:`arig.nvrm.Launch`, made on the event loop, finds its cubin
facts and code address without a driver call.

Threads: the registry (``register``, ``unregister``, ``kernel_of``) from any
thread; :class:`Images` on the device's submit thread only (it allocates and
frees GPU memory).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass

from .._errors import ArigValueError
from .._launchspec import KernelImage, ParamLayout
from .._memory import Ledger
from . import _cubin, _rm

__all__ = ["LoadedKernel", "Images", "register", "unregister", "kernel_of", "CODE_ALIGN"]

#: Each kernel's code starts at a multiple of this in the image's memory.
CODE_ALIGN = 256


@dataclass(frozen=True)
class LoadedKernel:
    """A kernel of a loaded image: its cubin facts, its code's GPU address, the device it is on."""

    kernel: _cubin.Kernel
    program_address: int
    owner: int  # id() of the backend that loaded it

    @property
    def layout(self) -> ParamLayout:
        """The kernel's parameter layout, from the cubin's ``.nv.info``: what a launch's args must fill."""
        return self.kernel.params


_ids = itertools.count(1)
_lock = threading.Lock()
_KERNELS: dict[int, LoadedKernel] = {}


def register(k: LoadedKernel) -> int:
    """A new function id for ``k`` (what ``Image.function`` returns)."""
    with _lock:
        fid = next(_ids)
        _KERNELS[fid] = k
    return fid


def unregister(fid: int) -> None:
    _KERNELS.pop(fid, None)


def kernel_of(fid: int) -> LoadedKernel | None:
    return _KERNELS.get(fid)


def _checked(name: str, image: bytes) -> _cubin.Cubin:
    cubin = _cubin.parse(image)
    if cubin.sm != 90:
        raise ArigValueError(f"{name} runs sm_90 cubins; this one is sm_{cubin.sm}")
    if not cubin.kernels:
        raise ArigValueError("the cubin has no kernels")
    for k in cubin.kernels.values():
        if k.relocations:
            kinds = sorted({f"type {r.type} of {r.symbol!r}" for r in k.relocations})
            raise ArigValueError(f"kernel {k.name!r} needs {len(k.relocations)} relocation(s) ({', '.join(kinds)}), which arig.nvrm does not apply yet")
    return cubin


class Images:
    """The cubins one device loaded: each kernel's code in one VRAM allocation per image.

    ``free(mem)`` frees an unloaded image's code: the device's ledger
    (``arig._memory.Ledger``) posts the unload only once the GPU is done with the
    work submitted before it."""

    def __init__(self, name: str, owner: int, free: Callable[[_rm.Mem], None]) -> None:
        self.name = name
        self._owner = owner
        self._free = free
        self._images: dict[int, tuple[_rm.Mem, list[int]]] = {}
        self._keys = itertools.count(1)

    def load(self, gpu: _rm.Gpu, image: bytes, post: Callable[..., None], ledger: Ledger | None = None) -> KernelImage:
        """Parse and check ``image``, copy its kernels' code to VRAM and register them."""
        cubin = _checked(self.name, image)
        offsets, at = {}, 0
        for name, k in cubin.kernels.items():
            offsets[name] = at
            at += -(-max(len(k.text), 1) // CODE_ALIGN) * CODE_ALIGN
        m = gpu.vram("code", at + CODE_ALIGN)
        try:
            for name, k in cubin.kernels.items():
                m.write(offsets[name], k.text)
            ids = {name: register(LoadedKernel(k, m.va + offsets[name], self._owner)) for name, k in cubin.kernels.items()}
        except BaseException:
            m.free()
            raise
        key = next(self._keys)
        self._images[key] = (m, list(ids.values()))
        layouts = {name: k.params for name, k in cubin.kernels.items()}
        return KernelImage(self.name, key, ids, layouts, lambda: post(self.unload, key), ledger)

    def unload(self, key: int) -> None:
        found = self._images.pop(key, None)
        if found is None:
            return
        m, ids = found
        for fid in ids:
            unregister(fid)
        self._free(m)

    def close(self) -> list[_rm.Mem]:
        """At close: no kernel is found any more; the images' memory, for the device to free or keep."""
        mems: list[_rm.Mem] = []
        for m, ids in self._images.values():
            for fid in ids:
                unregister(fid)
            mems.append(m)
        self._images.clear()
        return mems

    def __repr__(self) -> str:
        return f"<arig.nvrm images of {self.name}: {len(self._images)}>"

