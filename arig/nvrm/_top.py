"""``python -m arig top`` and ``python -m arig info``, without libcuda.

``top`` refreshes every GPU's memory and busy share in the terminal, the way
nvidia-smi and nvtop do, from :func:`arig.nvrm.usage`; ``--json`` prints one
snapshot for scripts instead.  ``info_rows`` gives the facts ``info`` prints.

A GPU that cannot be read (suspended, held by another driver) shows its
error in its own row, so one bad GPU does not hide the others.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from typing import Any, TextIO

from arig import nvrm
from arig._errors import ArigError, ArigValueError
from arig.nvrm import _visible
from arig.nvrm._params import NoGpuError

__all__ = ["main", "info_rows", "snapshot", "render"]

_BARS = "▁▂▃▄▅▆▇█"
_HISTORY = 24
_MEM_BAR = 20
_GIB = 1024**3


def _visible_order(found: list[str]) -> tuple[list[int], str]:
    """The physical indexes CUDA_VISIBLE_DEVICES makes visible, in order, and what made them so."""
    try:
        seen = _visible.resolve(found)
    except ArigValueError as e:
        return [], f"none: {e}"
    if seen.setting is None:
        return list(seen.physical), f"every GPU in PCI bus order ({_visible.ENV} is unset)"
    cut = "" if seen.cut is None else f" ({seen.cut})"
    return list(seen.physical), f"{_visible.ENV}={seen.setting!r}{cut}"


def info_rows() -> list[dict[str, Any]]:
    """One dict of :func:`arig.nvrm.describe` facts per GPU: the visible GPUs first, in visible order.

    ``physical_index`` is the GPU's index on the machine (nvidia-smi's, :func:`arig.nvrm.describe`'s),
    ``visible_index`` the one ``arig.nvrm.gpu(i)`` and CUDA take (None for a GPU
    ``CUDA_VISIBLE_DEVICES`` hides), ``visible_by`` what made it so.
    """
    found = nvrm.buses()
    order, by = _visible_order(found)
    rank = {p: v for v, p in enumerate(order)}
    rows: list[dict[str, Any]] = []
    for i in sorted(range(len(found)), key=lambda p: (rank.get(p, len(found)), p)):
        v = rank.get(i)
        device = nvrm.gpu(v).name if v is not None else f"NV (physical {i}, not visible)"
        row: dict[str, Any] = {"physical_index": i, "visible_index": v, "visible_by": by, "device": device, "bus": found[i]}
        try:
            row.update(nvrm.describe(i))
        except ArigError as e:
            row["error"] = str(e)
        rows.append(row)
    return rows


def snapshot(window: float, names: dict[int, str]) -> list[dict[str, Any]]:
    """One usage object per GPU: index, bus, name, memory_total, memory_free, busy.

    ``names`` caches each GPU's name, which never changes, across refreshes.
    """
    rows: list[dict[str, Any]] = []
    for i, bus in enumerate(nvrm.buses()):
        row: dict[str, Any] = {"index": i, "bus": bus, "name": names.get(i),
                               "memory_total": None, "memory_free": None, "busy": None}
        try:
            if i not in names:
                names[i] = row["name"] = str(nvrm.describe(i)["name"])
            u = nvrm.usage(i, window)
            row.update(memory_total=u.memory_total, memory_free=u.memory_free, busy=u.busy)
        except ArigError as e:
            row["error"] = str(e)
        rows.append(row)
    return rows


def _spark(history: collections.deque[float | None]) -> str:
    out = []
    for busy in history:
        if busy is None:
            out.append(" ")
        else:
            out.append(_BARS[min(len(_BARS) - 1, int(busy / 100 * len(_BARS)))])
    return "".join(out)


def _memory(row: dict[str, Any]) -> str:
    total, free = row["memory_total"], row["memory_free"]
    if not total:
        return " " * (_MEM_BAR + 2) + "     ?/?     GiB"
    used = total - free
    filled = round(_MEM_BAR * used / total)
    bar = "█" * filled + "░" * (_MEM_BAR - filled)
    return f"[{bar}] {used / _GIB:6.1f}/{total / _GIB:6.1f} GiB"


def render(rows: list[dict[str, Any]], history: dict[int, collections.deque[float | None]]
           ) -> str:
    """The text of one refresh: a line per GPU (history holds past busy values)."""
    if not rows:
        return "no NVIDIA GPU on this machine\n"
    lines = [time.strftime("arig top  %H:%M:%S")]
    for row in rows:
        label = f"NV:{row['index']:<2} {row['bus']}  {(row['name'] or '?'):<20.20}"
        if "error" in row:
            lines.append(f"{label} {row['error']}")
            continue
        busy = row["busy"]
        percent = "   -  " if busy is None else f"{busy:5.1f}%"
        spark = _spark(history.get(row["index"], collections.deque()))
        lines.append(f"{label} {_memory(row)}  busy {percent} {spark}")
    return "\n".join(lines) + "\n"


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m arig top",
        description="Memory and busy share of this machine's NVIDIA GPUs, "
                    "read through the kernel driver (no libcuda, no NVML).")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON list (one object per GPU) and exit")
    parser.add_argument("--interval", type=float, default=1.0,
                        help="seconds between refreshes (default 1)")
    parser.add_argument("--count", type=int, default=None,
                        help="stop after this many refreshes (default: until Ctrl-C)")
    args = parser.parse_args(argv)
    if not args.interval > 0:
        parser.error("--interval must be positive")
    if args.count is not None and args.count < 1:
        parser.error("--count must be at least 1")
    return args


def _loop(args: argparse.Namespace, out: TextIO) -> None:
    names: dict[int, str] = {}
    history: dict[int, collections.deque[float | None]] = {}
    clear = "\x1b[H\x1b[J" if out.isatty() else ""
    window = max(args.interval, 0.2)  # at least one RM sample (every 200 ms)
    refreshes = 0
    while args.count is None or refreshes < args.count:
        if refreshes:
            time.sleep(args.interval)
        rows = snapshot(window, names)
        if not rows and not refreshes:
            # Nothing to watch: say so once and end, rather than refresh an empty screen forever.
            raise NoGpuError("no NVIDIA GPU on this machine (none in the PCI tree)")
        for row in rows:
            history.setdefault(row["index"], collections.deque(maxlen=_HISTORY)).append(
                row["busy"])
        out.write(clear + render(rows, history))
        out.flush()
        refreshes += 1


def main(argv: list[str]) -> int:
    """Run ``top`` with ``argv`` (without the program name); the exit status."""
    args = _parse(argv)
    try:
        if args.json:
            json.dump(snapshot(min(args.interval, 14.0), {}), sys.stdout)
            sys.stdout.write("\n")
        else:
            _loop(args, sys.stdout)
    except KeyboardInterrupt:
        return 0  # Ctrl-C is how the screen is meant to end: not a failure
    except ArigError as e:
        print(f"arig top: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
