"""Builds arig's native core (``arig/_native/core.c``) as an optional extension.

The core is a plain C library (no Python headers) that arig loads with
ctypes; it is named like an extension so that pip builds and installs it
with the package.  ``optional=True``: without a C compiler the build goes
on, and arig runs its pure-Python path (``python -m arig info`` says which).
``ARIG_PURE=1`` at build time skips it.  ``python setup.py build_ext --inplace``
builds it into the source tree (as ``pip install -e .`` does).
"""

import hashlib
import os

from setuptools import Extension, setup

SOURCE = "arig/_native/core.c"


def _source_hash() -> str:
    with open(SOURCE, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


ext = []
if os.environ.get("ARIG_PURE", "") in ("", "0"):
    ext.append(
        Extension(
            "arig._native._arig_core",
            sources=[SOURCE],
            # The loader checks that a library was built from the core.c beside it.
            define_macros=[("ARIG_CORE_SOURCE", f'"{_source_hash()}"')],
            extra_compile_args=["-O2", "-std=c11", "-Wall"],
            extra_link_args=["-lpthread"],
            optional=True,
        )
    )

setup(ext_modules=ext)
