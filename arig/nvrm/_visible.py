"""Which GPUs ``CUDA_VISIBLE_DEVICES`` lets the process see, numbered as CUDA numbers them.

``arig.nvrm.gpu(i)`` opens the ith *visible* GPU, as ``arig.cuda.gpu(i)``
(libcuda) does, so one process, a Ray worker or a container given a GPU by
that variable, means the same GPU by the same index on both kinds of device.
The rules are CUDA's:

* unset: every GPU, in PCI bus order (the order of :func:`arig.nvrm.buses`,
  which is nvidia-smi's and CUDA's with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``;
  CUDA's default order, fastest first, is the same on a machine of one GPU
  model);
* the empty string: no GPU;
* otherwise a comma-separated list, each entry a physical index (``1``) or a
  UUID (``GPU-8a1b...``, in full or any prefix that names one GPU alone);
  the visible GPUs are the list's, in its order.  An entry that names no GPU
  (an index out of range, an unknown or ambiguous UUID, a repeat, anything
  else) ends the list there, as CUDA does: the entries before it stay.
* A MIG instance (``MIG-...``) is refused: a device of the kernel driver runs
  work on a whole GPU, and opening the whole GPU instead would not be what
  the variable asked for.

UUIDs are asked of the driver (:func:`arig.nvrm.describe`) only when an entry
is one, so the common forms (unset, indexes; Ray sets indexes) read sysfs
alone.  A UUID entry reads every GPU's UUID, which opens each GPU's file for
the process, as CUDA's own initialization does.  Blocking
(driver calls): never on the event loop; the device's opener calls it on its
submit thread, the CLI from its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from arig._errors import ArigError, ArigValueError, safe_repr

__all__ = ["ENV", "Visible", "parse", "resolve"]

ENV = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class Visible:
    """The visible GPUs as physical indexes, in visible order, and why the list ended early (None if it did not)."""

    physical: tuple[int, ...]
    setting: str | None  # the variable's value (None: unset)
    cut: str | None = None

    def describe(self, count: int) -> str:
        """What the variable made visible, for an error message."""
        plural = "" if count == 1 else "s"
        if self.setting is None:
            return f"this machine has {count} NVIDIA GPU{plural}"
        text = f"{ENV}={self.setting!r} makes {len(self.physical)} of this machine's {count} NVIDIA GPU{plural} visible"
        return text if self.cut is None else f"{text} ({self.cut})"


def _uuid_match(entry: str, uuids: list[str | None]) -> tuple[int | None, str]:
    """The one GPU whose UUID starts with ``entry``, or None and why not."""
    want = entry.lower()
    found = [i for i, u in enumerate(uuids) if u is not None and u.lower().startswith(want)]
    if len(found) == 1:
        return found[0], ""
    if found:
        return None, f"matches the UUIDs of GPUs {found}"
    unread = [i for i, u in enumerate(uuids) if u is None]
    why = "matches no GPU's UUID"
    return None, why if not unread else f"{why} (the UUIDs of GPUs {unread} could not be read)"


def _entry(entry: str, count: int, uuids: Callable[[], list[str | None]]) -> tuple[int | None, str]:
    """The physical index an entry names, or None and why it names none."""
    if entry.upper().startswith("MIG-"):
        raise ArigValueError(f"{ENV} names the MIG instance {entry!r}: arig.nvrm opens whole GPUs, not MIG instances; "
                             f"name the GPU (its index or GPU-<uuid>) or use arig.cuda.gpu(i)")
    if entry.isascii() and entry.isdigit():
        i = int(entry)
        return (i, "") if i < count else (None, f"this machine has no GPU {i}")
    if entry.upper().startswith("GPU-") and len(entry) > 4:
        return _uuid_match(entry, uuids())
    return None, "is neither a GPU index nor GPU-<uuid>"


def parse(setting: str | None, count: int, uuid_of: Callable[[int], str | None]) -> Visible:
    """The GPUs ``setting`` (the variable's value, None if unset) makes visible on a machine of ``count`` GPUs.

    ``uuid_of(i)`` is physical GPU i's UUID (None where it cannot be read),
    asked at most once per GPU and only if an entry is a UUID.  Raises
    ArigValueError for a MIG instance.
    """
    if setting is None:
        return Visible(tuple(range(count)), None)
    cache: list[list[str | None]] = []

    def uuids() -> list[str | None]:
        if not cache:
            cache.append([uuid_of(i) for i in range(count)])
        return cache[0]

    physical: list[int] = []
    if setting.strip() == "":
        return Visible((), setting)
    for n, raw in enumerate(setting.split(","), 1):
        entry = raw.strip()
        i, why = _entry(entry, count, uuids)
        if i is not None and i in physical:
            i, why = None, f"repeats GPU {i}"
        if i is None:
            return Visible(tuple(physical), setting, f"entry {n}, {safe_repr(entry, 60)}, {why}: it and the entries after it are ignored, as CUDA does")
        physical.append(i)
    return Visible(tuple(physical), setting)


def _uuid_of(bus_of: Callable[[int], str]) -> Callable[[int], str | None]:
    def uuid_of(i: int) -> str | None:
        from arig.nvrm import _rm, _sysfs  # noqa: PLC0415 - the driver is asked only for UUID entries

        try:
            bus = bus_of(i)
            _sysfs.require_active(bus)
            return str(_rm.read_facts(bus)["uuid"])
        except ArigError:
            return None

    return uuid_of


def resolve(buses: list[str], environ: dict[str, str] | None = None) -> Visible:
    """The GPUs of ``buses`` (physical order) the process's ``CUDA_VISIBLE_DEVICES`` makes visible."""
    setting = (os.environ if environ is None else environ).get(ENV)
    return parse(setting, len(buses), _uuid_of(buses.__getitem__))
