"""Launches of the NV device: a kernel's QMD and constant bank 0, built once per :class:`Launch`.

Pure: no file descriptor, no driver; any thread (a :class:`Launch` is made on
the event loop).  A kernel is known by the id :meth:`arig.Image.function`
gave when its image was loaded (:mod:`arig.nvrm._images`); a launch checks its
argument bytes against the kernel's parameter layout from ``.nv.info`` and
builds, once, what each enqueue copies: the constant bank 0 image and the
QMD (V04), which differ between enqueues only in where bank 0 lies.
"""

from __future__ import annotations

import ctypes
import importlib.resources
from typing import Any

from .. import _native
from .._errors import ArigValueError
from .._launchspec import Args, LaunchSpec, ParamLayout, pack
from . import _push
from . import _qmd
from ._images import _KERNELS as _KERNELS  # the registry, where arig.testing.fake_nvrm's GPU looks kernels up
from ._images import LoadedKernel, kernel_of

__all__ = ["Launch", "launch_words", "launch_template", "pack", "shipped_image", "LOCAL_BYTES_PER_THREAD", "SLOT_ALIGN"]


def shipped_image() -> bytes:
    """The cubin of arig's own kernels (``arig/kernels/kernels.cu``, ``saxpy`` among them) for
    sm_90, as installed with the package: ``await dev.load(arig.nvrm.shipped_image())`` from any
    directory.  The NV device loads cubins only (no fatbin, no PTX)."""
    return (importlib.resources.files("arig") / "kernels" / "kernels.cubin").read_bytes()

#: Local memory (stack) the channel provides per thread, the 0x240 above STACK_TOP included:
#: kernels needing more are refused at Launch.
LOCAL_BYTES_PER_THREAD = 0x240 + 1024
#: Argument-ring slots (bank 0, then the QMD at the next 256 bytes) are 256-byte aligned.
SLOT_ALIGN = 256


#: The words of one launch: WAIT_FOR_IDLE (the queue's earlier grids end first, as on a CUDA
#: stream: without it two launches of one queue run at once), INVALIDATE_SHADER_CACHES_NO_WFI,
#: SEND_PCAS_A (QMD >> 8), SEND_SIGNALING_PCAS2_B.
_LAUNCH_TEMPLATE = _push.Push().wait_for_idle().invalidate_shader_caches().launch(0).words
_QMD_WORD = len(_LAUNCH_TEMPLATE) - 3  # SEND_PCAS_A's value: the QMD's address >> 8


def launch_template() -> tuple[list[int], int]:
    """A launch's words with 0 for the QMD, and the index of the word that holds its address >> 8."""
    return list(_LAUNCH_TEMPLATE), _QMD_WORD


def _qmd_address_words() -> tuple[int, int, int]:
    """Where bank 0's address goes in a QMD: the word of (address >> 6), the word of (address >> 38), its mask."""
    hi0, lo0 = _qmd.FIELDS["CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)"]
    hi1, lo1 = _qmd.FIELDS["CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(0)"]
    if lo0 % 32 or hi0 - lo0 != 31 or lo1 % 32 or hi1 - lo1 >= 32:
        raise AssertionError("the QMD's bank 0 address fields are not where the native core patches them")
    return lo0 // 32, lo1 // 32, (1 << (hi1 - lo1 + 1)) - 1


_CB0_WORDS = _qmd_address_words()


def launch_words(qmd_address: int) -> list[int]:
    """The pushbuffer words that launch the QMD at ``qmd_address`` (256-byte aligned, below 2**40)."""
    if qmd_address % 256 or not 0 <= qmd_address < _push.GPFIFO_ADDRESS_LIMIT:
        raise ArigValueError(f"a QMD must be 256-byte aligned and below 2**40, not at {qmd_address:#x}")
    w = list(_LAUNCH_TEMPLATE)
    w[_QMD_WORD] = qmd_address >> 8
    return w


#: Slot images with zero parameters, by (function id, grid, block, shared bytes): what a launch builds
#: but its parameters, the QMD among it, which takes tens of microseconds in Python and is the same
#: for every launch of one shape (a function id is never reused, so an entry never goes stale).
_TEMPLATES: dict[tuple[int, tuple[int, int, int], tuple[int, int, int], int], tuple[bytes, int, int, int, int]] = {}
_TEMPLATES_MAX = 1024


def _template(func: int, loaded: LoadedKernel, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int) -> tuple[bytearray, int, int, int, int]:
    """A new copy of the slot image of a launch of this shape with zero parameters; the length of its bank 0,
    the QMD's offset, the slot's size, and the key that predicts its duration."""
    at = (func, grid, block, shared)
    t = _TEMPLATES.get(at)
    if t is None:
        k = loaded.kernel
        cb0 = _qmd.cbank0(k, grid, block, bytes(k.param_size), shared_window=_push.SHARED_WINDOW, local_window=_push.LOCAL_WINDOW)
        qmd_offset = -(-len(cb0) // 256) * 256
        fields = _qmd.kernel_qmd(k, grid=grid, block=block, program_address=loaded.program_address,
                                 cbank0_address=0, cbank0_size=len(cb0), shared_bytes=shared)  # fmt: skip
        slot_bytes = -(-(qmd_offset + _qmd.QMD_BYTES) // SLOT_ALIGN) * SLOT_ALIGN
        image = bytearray(slot_bytes)
        image[: len(cb0)] = cb0
        image[qmd_offset : qmd_offset + _qmd.QMD_BYTES] = _qmd.pack(fields)
        key = hash((loaded.program_address, grid, block, shared)) & (1 << 64) - 1
        if len(_TEMPLATES) >= _TEMPLATES_MAX:
            _TEMPLATES.clear()
        t = _TEMPLATES[at] = (bytes(image), len(cb0), qmd_offset, slot_bytes, key)
    return bytearray(t[0]), t[1], t[2], t[3], t[4]


class Launch(LaunchSpec):
    """A prepared launch of an NV kernel: ``await dev.submit(launch)``, or ``queue.launch(launch)`` in a fill.

    ``func`` is ``image.function(name)`` of an image loaded on an NV device;
    the fields are checked by the rule both GPUs share
    (:class:`arig._launchspec.LaunchSpec`), against the kernel's parameter
    layout from its cubin, and then against what the NV device provides
    (local memory, threads per block), so a bad launch is refused before it
    can reach the GPU.
    """

    __slots__ = ("kernel", "owner", "cb0", "qmd_offset", "slot_bytes", "_image", "_buf", "_rec", "_item", "__weakref__")

    def __init__(self, func: int, grid: Any, block: Any, args: Args = b"", shared: int = 0) -> None:
        super().__init__(func, grid, block, args, shared)
        loaded = self._loaded()
        k = loaded.kernel
        if _qmd.local_bytes_per_thread(k) > LOCAL_BYTES_PER_THREAD:
            raise ArigValueError(f"kernel {k.name!r} needs {_qmd.local_bytes_per_thread(k)} bytes of local memory per thread; the NV device provides {LOCAL_BYTES_PER_THREAD}")
        self.kernel, self.owner = k, loaded.owner
        if len(self.args) > k.param_size:
            raise ArigValueError(f"kernel {k.name!r} takes {k.param_size} bytes of parameters, not {len(self.args)}")
        image, cb0_bytes, self.qmd_offset, self.slot_bytes, key = _template(self.func, loaded, self.grid, self.block, self.shared)
        # The cubin's parameter area may run past the last parameter: that tail is padding, zero in the template.
        image[k.param_base : k.param_base + len(self.args)] = self.args
        self.cb0 = bytes(image[:cb0_bytes])
        self._image = bytes(image)
        # What the native core reads: the slot image, and where bank 0's address goes in its QMD.
        self._buf = ctypes.create_string_buffer(self._image, len(self._image))
        lo_word, hi_word, hi_mask = _CB0_WORDS
        self._rec = _native.NvLaunchRecord(ctypes.addressof(self._buf), self.slot_bytes, self.qmd_offset, lo_word, hi_word, hi_mask, 0, key)
        self._item = (_native.LAUNCH, ctypes.addressof(self._rec), 0, 0)

    def _loaded(self) -> LoadedKernel:
        """The kernel ``func`` names: an NV launch cannot be built without its cubin facts."""
        loaded = kernel_of(self.func)
        if loaded is None:
            raise ArigValueError(f"func {self.func} is no kernel of an image loaded on an NV device (unloaded, or a CUDA CUfunction?)")
        return loaded

    def _params(self) -> tuple[str, ParamLayout]:
        loaded = self._loaded()
        return repr(loaded.kernel.name), loaded.layout

    @property
    def record(self) -> int:
        """The address of this launch's ``struct arig_nv_launch_rec`` (for a compiled fill's ``abi.launch``; valid while the Launch lives)."""
        return ctypes.addressof(self._rec)

    def slot_image(self, address: int) -> bytes:
        """What an enqueue copies to ``address`` (a ring slot): bank 0, then the QMD pointing at it."""
        if address % SLOT_ALIGN:
            raise ArigValueError(f"a launch slot must be {SLOT_ALIGN}-byte aligned, not at {address:#x}")
        image = bytearray(self._image)
        _qmd.patch(image, {"CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)": (address >> 6) & 0xFFFFFFFF,
                        "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(0)": address >> 38}, self.qmd_offset)  # fmt: skip
        return bytes(image)

    def __repr__(self) -> str:
        return f"<arig.nvrm.Launch {self.kernel.name} grid={self.grid} block={self.block} {len(self.args)} B args>"
