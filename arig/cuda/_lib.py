"""libcuda through ctypes, bound lazily.

``import arig.cuda`` loads nothing; the first call of a binding loads
``libcuda.so.1`` (``ctypes.CDLL``: every call releases the GIL, so a call
the driver stalls never stalls other Python threads) and fixes each
function's prototype.  No cuda-python, CuPy or PyTorch: arig runs beside
them in one process, on the same primary contexts.
"""

from __future__ import annotations

import ctypes
import threading
from ctypes import POINTER, byref, c_char_p, c_int, c_size_t, c_uint, c_uint64, c_void_p
from typing import Any

from .. import _env
from .._errors import ArigError

__all__ = ["FILL", "lib", "check", "CudaError", "CudaOutOfMemory", "CudaUnavailable", "error_name", "KERNEL_NODE_PARAMS"]

CUresult = c_int
CUdevice = c_int
CUdeviceptr = c_uint64
HANDLE = c_void_p  # CUcontext, CUstream, CUmodule, CUfunction, CUgraph, ...


#: The prototype of a C fill: ``int fill(void *queue, void *arg, uint64_t v)``.
FILL = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_uint64)


class CudaUnavailable(ArigError):
    """libcuda cannot be loaded or initialised on this machine."""


class CudaError(ArigError):
    """A CUDA call failed: ``.code`` is the CUresult, ``.name`` its name."""

    _by_code: dict[int, type[CudaError]] = {}

    def __init__(self, code: int, what: str = "") -> None:
        self.code = code
        self.name = error_name(code)
        self.what = what
        text = _error_string(code)
        super().__init__(f"{what + ': ' if what else ''}{self.name} ({code}){': ' + text if text else ''}")

    def __init_subclass__(cls, code: int = 0, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if code:
            CudaError._by_code[code] = cls

    @staticmethod
    def of(code: int, what: str = "") -> CudaError:
        return CudaError._by_code.get(code, CudaError)(code, what)


class CudaOutOfMemory(CudaError, MemoryError, code=2):
    """CUDA_ERROR_OUT_OF_MEMORY."""


class CudaInvalidValue(CudaError, ValueError, code=1):
    """CUDA_ERROR_INVALID_VALUE."""


class KERNEL_NODE_PARAMS(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS_v2."""

    _fields_ = [
        ("func", c_void_p),
        ("gridDimX", c_uint), ("gridDimY", c_uint), ("gridDimZ", c_uint),
        ("blockDimX", c_uint), ("blockDimY", c_uint), ("blockDimZ", c_uint),
        ("sharedMemBytes", c_uint),
        ("kernelParams", c_void_p),
        ("extra", c_void_p),
        ("kern", c_void_p),
        ("ctx", c_void_p),
    ]


#: name -> (restype, argtypes).  Names are the exported (versioned) symbols.
_PROTOS: dict[str, tuple[Any, tuple[Any, ...]]] = {
    "cuInit": (CUresult, (c_uint,)),
    "cuDriverGetVersion": (CUresult, (POINTER(c_int),)),
    "cuGetErrorName": (CUresult, (CUresult, POINTER(c_char_p))),
    "cuGetErrorString": (CUresult, (CUresult, POINTER(c_char_p))),
    "cuDeviceGetCount": (CUresult, (POINTER(c_int),)),
    "cuDeviceGet": (CUresult, (POINTER(CUdevice), c_int)),
    "cuDeviceGetName": (CUresult, (c_char_p, c_int, CUdevice)),
    "cuDeviceGetAttribute": (CUresult, (POINTER(c_int), c_int, CUdevice)),
    "cuDeviceTotalMem_v2": (CUresult, (POINTER(c_size_t), CUdevice)),
    "cuDeviceGetPCIBusId": (CUresult, (c_char_p, c_int, CUdevice)),
    "cuDeviceCanAccessPeer": (CUresult, (POINTER(c_int), CUdevice, CUdevice)),
    "cuDeviceGetUuid_v2": (CUresult, (c_char_p, CUdevice)),
    "cuDevicePrimaryCtxRetain": (CUresult, (POINTER(HANDLE), CUdevice)),
    "cuDevicePrimaryCtxRelease_v2": (CUresult, (CUdevice,)),
    "cuDevicePrimaryCtxReset_v2": (CUresult, (CUdevice,)),
    "cuDevicePrimaryCtxGetState": (CUresult, (CUdevice, POINTER(c_uint), POINTER(c_int))),
    "cuDevicePrimaryCtxSetFlags_v2": (CUresult, (CUdevice, c_uint)),
    "cuCtxSetCurrent": (CUresult, (HANDLE,)),
    "cuCtxGetCurrent": (CUresult, (POINTER(HANDLE),)),
    "cuStreamCreate": (CUresult, (POINTER(HANDLE), c_uint)),
    "cuStreamDestroy_v2": (CUresult, (HANDLE,)),
    "cuStreamQuery": (CUresult, (HANDLE,)),
    "cuStreamSynchronize": (CUresult, (HANDLE,)),
    "cuStreamWriteValue64_v2": (CUresult, (HANDLE, CUdeviceptr, c_uint64, c_uint)),
    "cuStreamWaitValue64_v2": (CUresult, (HANDLE, CUdeviceptr, c_uint64, c_uint)),
    "cuLaunchKernel": (CUresult, (HANDLE, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, HANDLE, c_void_p, c_void_p)),
    "cuLaunchHostFunc": (CUresult, (HANDLE, c_void_p, c_void_p)),
    "cuMemAlloc_v2": (CUresult, (POINTER(CUdeviceptr), c_size_t)),
    "cuMemFree_v2": (CUresult, (CUdeviceptr,)),
    "cuMemHostAlloc": (CUresult, (POINTER(c_void_p), c_size_t, c_uint)),
    "cuMemFreeHost": (CUresult, (c_void_p,)),
    "cuMemHostGetDevicePointer_v2": (CUresult, (POINTER(CUdeviceptr), c_void_p, c_uint)),
    "cuMemcpyHtoDAsync_v2": (CUresult, (CUdeviceptr, c_void_p, c_size_t, HANDLE)),
    "cuMemcpyDtoHAsync_v2": (CUresult, (c_void_p, CUdeviceptr, c_size_t, HANDLE)),
    "cuMemsetD8Async": (CUresult, (CUdeviceptr, ctypes.c_ubyte, c_size_t, HANDLE)),
    "cuModuleLoadData": (CUresult, (POINTER(HANDLE), c_void_p)),
    "cuModuleUnload": (CUresult, (HANDLE,)),
    "cuModuleGetFunction": (CUresult, (POINTER(HANDLE), HANDLE, c_char_p)),
    "cuModuleGetFunctionCount": (CUresult, (POINTER(c_uint), HANDLE)),
    "cuModuleEnumerateFunctions": (CUresult, (POINTER(HANDLE), c_uint, HANDLE)),
    "cuFuncGetName": (CUresult, (POINTER(c_char_p), HANDLE)),
    "cuFuncGetModule": (CUresult, (POINTER(HANDLE), HANDLE)),
    "cuFuncGetParamInfo": (CUresult, (HANDLE, c_size_t, POINTER(c_size_t), POINTER(c_size_t))),
    "cuFuncGetAttribute": (CUresult, (POINTER(c_int), c_int, HANDLE)),
    "cuGraphCreate": (CUresult, (POINTER(HANDLE), c_uint)),
    "cuGraphDestroy": (CUresult, (HANDLE,)),
    "cuGraphAddKernelNode_v2": (CUresult, (POINTER(HANDLE), HANDLE, POINTER(HANDLE), c_size_t, POINTER(KERNEL_NODE_PARAMS))),
    "cuGraphInstantiateWithFlags": (CUresult, (POINTER(HANDLE), HANDLE, c_uint64)),
    "cuGraphExecDestroy": (CUresult, (HANDLE,)),
    "cuGraphLaunch": (CUresult, (HANDLE, HANDLE)),
    "cuGraphExecKernelNodeSetParams_v2": (CUresult, (HANDLE, HANDLE, POINTER(KERNEL_NODE_PARAMS))),
    "cuGraphGetNodes": (CUresult, (HANDLE, POINTER(HANDLE), POINTER(c_size_t))),
    "cuStreamBeginCapture_v2": (CUresult, (HANDLE, c_int)),
    "cuStreamEndCapture": (CUresult, (HANDLE, POINTER(HANDLE))),
    "cuStreamIsCapturing": (CUresult, (HANDLE, POINTER(c_int))),
    "cuStreamGetCtx": (CUresult, (HANDLE, POINTER(HANDLE))),
    "cuCtxGetDevice": (CUresult, (POINTER(CUdevice),)),
    "cuThreadExchangeStreamCaptureMode": (CUresult, (POINTER(c_int),)),
    "cuEventCreate": (CUresult, (POINTER(HANDLE), c_uint)),
    "cuEventDestroy_v2": (CUresult, (HANDLE,)),
    "cuEventRecord": (CUresult, (HANDLE, HANDLE)),
    "cuStreamWaitEvent": (CUresult, (HANDLE, HANDLE, c_uint)),
    "cuEventQuery": (CUresult, (HANDLE,)),
    "cuEventSynchronize": (CUresult, (HANDLE,)),
    "cuEventElapsedTime_v2": (CUresult, (POINTER(ctypes.c_float), HANDLE, HANDLE)),
}


class _Lib:
    """The way to libcuda: its functions, with their prototypes, as attributes.

    The one driver seam: ``swap(impl)`` puts another implementation (the
    fake libcuda of ``arig.testing``) in place of the loaded library for every
    module at once, and ``swap(None)`` puts libcuda back.
    """

    def __init__(self) -> None:
        self._dll: ctypes.CDLL | None = None
        self._lock = threading.Lock()
        self._failed: str | None = None
        self._impl: Any = None

    def swap(self, impl: Any) -> Any:
        """Use ``impl`` (None: libcuda) from now on; return the one in use before."""
        old, self._impl = self._impl, impl
        for name in [n for n in self.__dict__ if n in _PROTOS]:
            del self.__dict__[name]  # bound functions of the library in use before
        _NAMES.clear()
        return old

    def dll(self) -> ctypes.CDLL:
        if self._dll is None:
            with self._lock:
                if self._dll is None:
                    if self._failed:
                        raise CudaUnavailable(self._failed)
                    name = _env.LIBCUDA
                    try:
                        self._dll = ctypes.CDLL(name)
                    except OSError as exc:
                        self._failed = f"cannot load {name} (no NVIDIA driver?): {exc}"
                        raise CudaUnavailable(self._failed) from exc
        return self._dll

    def has(self, name: str) -> bool:
        if self._impl is not None:
            return bool(self._impl.has(name))
        try:
            getattr(self.dll(), name)
            return True
        except AttributeError:
            return False

    def address(self, name: str) -> int | None:
        """The address of exported function ``name`` (a C-callable thunk for a fake), or None."""
        if self._impl is not None:
            return self._impl.address(name)  # type: ignore[no-any-return]
        try:
            f = getattr(self.dll(), name)
        except AttributeError:
            return None
        return ctypes.cast(f, c_void_p).value

    def __getattr__(self, name: str) -> Any:
        proto = _PROTOS.get(name)
        if proto is None:
            raise AttributeError(name)
        if self._impl is not None:
            return getattr(self._impl, name)
        try:
            f = getattr(self.dll(), name)
        except AttributeError:
            raise CudaUnavailable(f"this libcuda has no {name}: the driver is too old") from None
        f.restype, f.argtypes = proto
        self.__dict__[name] = f
        return f


lib = _Lib()


#: CUresult -> (name, text), filled off the event loop so that the loop can name a fault without a driver call.
_NAMES: dict[int, tuple[str, str]] = {}
#: The CUresult codes libcuda defines (CUDA 13), named ahead by ``prefetch_error_names``.
_KNOWN = (*range(0, 9), 34, 46, 100, 101, 102, *range(200, 228), *range(300, 305), 400, 401, 500, 600, *range(700, 722), *range(800, 831), *range(900, 916), 999)


def _lookup(fn: str, code: int) -> str:
    s = c_char_p()
    try:
        if getattr(lib, fn)(code, byref(s)) == 0 and s.value:
            return s.value.decode()
    except ArigError:
        pass
    return ""


def _names(code: int) -> tuple[str, str]:
    got = _NAMES.get(code)
    if got is None:
        got = _NAMES[code] = (_lookup("cuGetErrorName", code) or f"CUresult {code}", _lookup("cuGetErrorString", code))
    return got


def prefetch_error_names() -> None:
    """Ask the driver for every known code's name once (not on the event loop)."""
    if len(_NAMES) < len(_KNOWN):
        for code in _KNOWN:
            _names(code)


def _error_string(code: int) -> str:
    return _names(code)[1]


def error_name(code: int) -> str:
    """``cuGetErrorName`` of ``code`` (e.g. CUDA_ERROR_ILLEGAL_ADDRESS)."""
    return _names(code)[0]


def check(rc: int, what: str) -> None:
    """Raise the CudaError of ``rc`` unless it is CUDA_SUCCESS."""
    if rc:
        raise CudaError.of(rc, what)
