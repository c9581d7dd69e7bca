"""Builds arig's native core (the C files of ``arig/_native``) as a plain shared library.

The core is a plain C library (no Python headers, no CPython ABI) that arig
loads with ctypes, so it is built as ``arig/_native/libarig_core.so``, not as
an extension module named for one CPython, and the wheel is tagged
``py3-none-<platform>``: one wheel serves every Python arig supports.
``optional=True``: without a C compiler the build goes on, and arig runs its
pure-Python path (``python -m arig info`` says which).  ``ARIG_PURE_BUILD=1``
(or ``ARIG_PURE=1``) at build time skips the core: that wheel is pure,
``py3-none-any``.  ``python setup.py build_ext --inplace`` builds the core into
the source tree (as ``pip install -e .`` does).  ``scripts/build_wheels.sh``
builds both wheels.
"""

import glob
import hashlib
import os
import platform
import sys
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:  # setuptools >= 70.1 has its own; before that, the wheel package's (only bdist_wheel needs it)
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # pragma: no cover - old setuptools, as used by `setup.py build_ext --inplace`
    try:
        from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]
    except ImportError:
        bdist_wheel = None  # type: ignore[assignment,misc]

NATIVE = "arig/_native"
SOURCES = sorted(glob.glob(f"{NATIVE}/*.c"))
#: The library's file name, as arig._native looks for it.
LIBRARY = "libarig_core.dylib" if sys.platform == "darwin" else "libarig_core.so"


def _source_hash() -> str:
    """Every .c and .h file, by name and content: the same digest as arig._native._source_hash."""
    h = hashlib.sha256()
    for path in sorted(glob.glob(f"{NATIVE}/*.c") + glob.glob(f"{NATIVE}/*.h")):
        with open(path, "rb") as f:
            h.update(os.path.basename(path).encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()[:16]


class build_core(build_ext):
    """build_ext for a plain shared library: a name of its own, no ``PyInit_`` export."""

    def get_ext_filename(self, fullname: str) -> str:
        # Called with the full dotted name, and (for the output path) with its last part alone.
        parts = fullname.split(".")
        if parts[-1] == "libarig_core":
            return os.path.join(*parts[:-1], LIBRARY)
        return str(super().get_ext_filename(fullname))

    def get_export_symbols(self, ext: Any) -> list[str]:
        return list(ext.export_symbols or [])

    def build_extensions(self) -> None:
        # Python's link line (LDSHARED) can carry an rpath to its own lib directory, a path of the
        # build machine; the core links to libc alone, so a shipped library keeps no rpath.
        linker = getattr(self.compiler, "linker_so", None)
        if isinstance(linker, list):
            self.compiler.linker_so = [a for a in linker if not a.startswith("-Wl,-rpath")]
        compat = self._old_glibc_symbols()
        if compat is not None:
            for e in self.extensions:
                e.extra_compile_args = [*e.extra_compile_args, "-include", compat]
        super().build_extensions()

    def _old_glibc_symbols(self) -> str | None:
        """On x86-64 glibc: a header that binds the two symbols glibc 2.34 re-versioned (moving
        libpthread into libc) to their first versions, the same functions at the same
        addresses. Then the library needs glibc 2.17, not 2.34: a manylinux2014 wheel."""
        if not (sys.platform.startswith("linux") and platform.machine() == "x86_64" and platform.libc_ver()[0] == "glibc"):
            return None
        os.makedirs(self.build_temp, exist_ok=True)
        path = os.path.abspath(os.path.join(self.build_temp, "arig_glibc_compat.h"))
        with open(path, "w") as f:
            f.write("".join(f'__asm__(".symver {s},{s}@GLIBC_2.2.5");\n' for s in ("pthread_create", "pthread_join")))
        return path


def _pure_build() -> bool:
    return any(os.environ.get(name, "") not in ("", "0") for name in ("ARIG_PURE_BUILD", "ARIG_PURE"))


ext = []
if not _pure_build():
    ext.append(
        Extension(
            "arig._native.libarig_core",
            sources=SOURCES,
            depends=sorted(glob.glob(f"{NATIVE}/*.h")),
            # The loader checks that a library was built from the C sources beside it.
            define_macros=[("ARIG_CORE_SOURCE", f'"{_source_hash()}"')],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra"],
            extra_link_args=["-lpthread"],
            optional=True,
        )
    )

cmdclass: dict[str, Any] = {"build_ext": build_core}
if bdist_wheel is not None:

    class bdist_any_python(bdist_wheel):  # type: ignore[misc,valid-type]
        """Tag the wheel ``py3-none-<platform>`` (native core) or ``py3-none-any`` (pure): the
        core is loaded through ctypes, so no CPython version or ABI is part of the tag."""

        def get_tag(self) -> tuple[str, str, str]:
            _python, _abi, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = bdist_any_python



def _reads_pyproject() -> bool:
    """Can this setuptools read pyproject.toml (its PEP 639 licence needs 77)?"""
    import setuptools

    return int(setuptools.__version__.split(".")[0]) >= 77


if not _reads_pyproject() and sys.argv[1:2] == ["build_ext"]:
    # `python setup.py build_ext --inplace` with an older setuptools (a system one): build the core
    # alone, without the package's metadata, which that setuptools cannot read.
    from setuptools import Distribution

    dist = Distribution({"name": "arig", "ext_modules": ext, "cmdclass": cmdclass, "script_name": sys.argv[0], "script_args": sys.argv[1:]})
    dist.parse_command_line()
    dist.run_commands()
else:
    setup(ext_modules=ext, cmdclass=cmdclass)
