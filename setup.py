"""Builds arig's native core (the C files of ``arig/_native``) as an optional extension.

The core is a plain C library (no Python headers) that arig loads with
ctypes; it is named like an extension so that pip builds and installs it
with the package.  ``optional=True``: without a C compiler the build goes
on, and arig runs its pure-Python path (``python -m arig info`` says which).
``ARIG_PURE=1`` at build time skips it.  ``python setup.py build_ext --inplace``
builds it into the source tree (as ``pip install -e .`` does).
"""

import glob
import hashlib
import os

from setuptools import Extension, setup

NATIVE = "arig/_native"
SOURCES = sorted(glob.glob(f"{NATIVE}/*.c"))


def _source_hash() -> str:
    """Every .c and .h file, by name and content: the same digest as arig._native._source_hash."""
    h = hashlib.sha256()
    for path in sorted(glob.glob(f"{NATIVE}/*.c") + glob.glob(f"{NATIVE}/*.h")):
        with open(path, "rb") as f:
            h.update(os.path.basename(path).encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()[:16]


ext = []
if os.environ.get("ARIG_PURE", "") in ("", "0"):
    ext.append(
        Extension(
            "arig._native._arig_core",
            sources=SOURCES,
            depends=sorted(glob.glob(f"{NATIVE}/*.h")),
            # The loader checks that a library was built from the C sources beside it.
            define_macros=[("ARIG_CORE_SOURCE", f'"{_source_hash()}"')],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra"],
            extra_link_args=["-lpthread"],
            optional=True,
        )
    )

setup(ext_modules=ext)
