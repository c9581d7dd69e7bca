"""The machine's NVIDIA GPUs as Linux's PCI tree lists them.

Reading sysfs changes nothing on the machine and needs no driver, so GPU
indexes come from here: GPU i is the ith NVIDIA display function in bus
order.  The kernel driver is asked about a GPU only once it has an index.

Each function is a directory ``<root>/devices/DDDD:BB:DD.F`` holding
``vendor`` ("0x10de\\n"), ``class`` ("0x030200\\n") and
``power/runtime_status`` ("active\\n").  The root is the driver object's
(``arig.nvrm._fd.driver.pci_root``), or an argument, so that a fake driver
or a test lays such a tree out in a temporary directory.
"""

from __future__ import annotations

import os

from arig.nvrm import _fd
from arig.nvrm._params import DriverError

__all__ = ["ROOT", "buses", "runtime_status", "require_active"]

#: The machine's PCI tree (what the real driver object reads).
ROOT = _fd.PCI_ROOT
NVIDIA_VENDOR = 0x10DE
DISPLAY_CLASS = 0x03  # PCI base class: VGA (0x0300) and 3D (0x0302) controllers


def _root(root: str | None) -> str:
    return _fd.driver.pci_root if root is None else root


def _address(name: str) -> tuple[int, int, int, int] | None:
    """(domain, bus, device, function) of a PCI name, or None if it is none.

    Bus order is numeric: ``0000:0a:00.0`` sorts after ``0000:09:00.0`` and
    the domain comes first, which comparing the names as text gets right only
    by luck of the zero padding.
    """
    try:
        domain, bus, rest = name.split(":")
        device, function = rest.split(".")
        return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)
    except ValueError:
        return None


def _read_hex(path: str) -> int:
    with open(path, encoding="ascii") as f:
        return int(f.read().strip(), 16)


def _is_nvidia_gpu(function_dir: str) -> bool:
    """Whether the function is NVIDIA's and a display controller.

    An NVIDIA function that is not a display (the HDMI audio function, a
    USB-C controller) is no GPU.  A function whose files cannot be read is
    left out rather than failing the list: the kernel may be removing it.
    """
    try:
        vendor = _read_hex(os.path.join(function_dir, "vendor"))
        pci_class = _read_hex(os.path.join(function_dir, "class"))
    except (OSError, ValueError):
        return False
    return vendor == NVIDIA_VENDOR and pci_class >> 16 == DISPLAY_CLASS


def buses(root: str | None = None) -> list[str]:
    """The PCI addresses of the machine's NVIDIA GPUs, in bus order.

    ``[]`` where the PCI tree does not exist (not Linux, or no sysfs).
    Raises :class:`DriverError` when the functions exist but cannot be
    listed, e.g. when the process has no file descriptor left.
    """
    devices = os.path.join(_root(root), "devices")
    try:
        names = os.listdir(devices)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as e:
        raise DriverError(f"cannot list the PCI functions in {devices}: {e.strerror}",
                          e.errno) from e
    found: list[tuple[tuple[int, int, int, int], str]] = []
    for name in names:
        address = _address(name)
        if address is not None and _is_nvidia_gpu(os.path.join(devices, name)):
            found.append((address, name))
    found.sort()
    return [name for _, name in found]


def runtime_status(bus: str, root: str | None = None) -> str:
    """The function's runtime power state ("active", "suspended", …).

    Raises :class:`DriverError` if it cannot be read.
    """
    path = os.path.join(_root(root), "devices", bus, "power", "runtime_status")
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except (OSError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) else str(e)
        raise DriverError(f"cannot read the power state of GPU {bus} ({path}): {why}",
                          getattr(e, "errno", None)) from e


def require_active(bus: str, root: str | None = None) -> None:
    """Raise :class:`DriverError` unless the GPU's function is active.

    Opening or asking the driver about a GPU that the kernel suspended for
    being idle would wake it up, which a read-only look must not do.
    """
    state = runtime_status(bus, root)
    if state != "active":
        raise DriverError(
            f"GPU {bus} is not active (power/runtime_status is {state!r}); "
            "reading it would wake it, so arig does not")
