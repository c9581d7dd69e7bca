"""Load (building it on first use) the GIL-free completion helper ``_wake.c``.

Why built at run time: arig is pure Python, and the helper is twenty lines
of C that only the CUDA device needs.  The first CUDA open compiles it with
the system C compiler into a per-user cache keyed by the source's hash; on a
machine without a compiler (or with ``ARIG_NO_WAKE_HELPER=1``) ``load()``
returns None and the device uses libc's ``sem_post`` and a waiter thread.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

__all__ = ["load", "Signal"]

_SRC = Path(__file__).with_name("_wake.c")
_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_tried = False


class Signal(ctypes.Structure):
    """``struct arig_signal``: the host function's argument, one per queue."""

    _fields_ = [("efd", ctypes.c_int), ("pad", ctypes.c_int), ("t_ns", ctypes.c_uint64)]


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "arig"


def _build(src: bytes, out: Path) -> bool:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return False
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        c = Path(tmp) / "wake.c"
        c.write_bytes(src)
        so = Path(tmp) / out.name
        r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(so), str(c)], capture_output=True, timeout=60)
        if r.returncode != 0:
            return False
        os.replace(so, out)  # atomic: concurrent builders agree
    return True


def load() -> ctypes.CDLL | None:
    """The helper library, or None where it cannot be built.  Blocks (may compile): not for the loop."""
    global _lib, _tried
    with _lock:
        if _tried:
            return _lib
        _tried = True
        if os.environ.get("ARIG_NO_WAKE_HELPER") == "1":
            return None
        try:
            src = _SRC.read_bytes()
            out = _cache_dir() / f"wake-{hashlib.sha256(src).hexdigest()[:16]}.so"
            if not out.exists() and not _build(src, out):
                return None
            lib = ctypes.CDLL(str(out))
        except (OSError, subprocess.SubprocessError):
            return None
        lib.arig_spin.restype = ctypes.c_uint64
        lib.arig_spin.argtypes = (ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int64, ctypes.c_int, ctypes.c_void_p)
        _lib = lib
        return lib
