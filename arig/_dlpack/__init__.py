"""DLPack export of arig memory, and the memory of foreign arrays for import.

Pure Python over ctypes: no compiled code, so it works wherever arig does
(``ARIG_PURE=1`` included).  Three parts, one lifetime each:

``_abi``
    the structs of ``dlpack.h``, the capsule names and the ``PyCapsule``
    prototypes: constants, made once at import.
``_export`` (:func:`export`, :func:`buffer_dlpack`)
    capsules of arig memory, and every export still out (``_live``) until
    its consumer calls the deleter or the capsule dies unconsumed.
``_foreign`` (:func:`foreign`)
    the memory of another library's array, held by what :class:`Foreign`
    keeps, for as long as the caller keeps that.
"""

from __future__ import annotations

from ._abi import kDLCPU, kDLCUDA, kDLCUDAHost
from ._export import buffer_dlpack, buffer_dlpack_device, check_request, dlpack_device, export
from ._foreign import Foreign, foreign

__all__ = [
    "kDLCPU",
    "kDLCUDA",
    "kDLCUDAHost",
    "Foreign",
    "export",
    "dlpack_device",
    "check_request",
    "buffer_dlpack",
    "buffer_dlpack_device",
    "foreign",
]

