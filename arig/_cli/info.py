"""``python -m arig info``: the devices this machine can open, with their facts."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import arig
from arig._errors import describe

__all__ = ["main", "gather"]


async def _facts(opener: Any) -> dict[str, Any]:
    async with await arig.open(opener) as dev:
        return {"device": dev.name, "arch": dev.arch, **dict(dev.facts)}


def _cuda_rows() -> list[dict[str, Any]]:
    """Each CUDA GPU's facts; where there is none, one row saying why (no libcuda, no GPU, too old a driver)."""
    try:
        import arig.cuda
    except Exception as exc:  # noqa: BLE001 - e.g. a C library without what arig.cuda binds (not Linux)
        return [{"device": "CUDA", "missing": f"arig.cuda does not import here: {describe(exc)}"}]
    try:
        count = arig.cuda.count()
    except arig.ArigError as exc:
        return [{"device": "CUDA", "missing": str(exc)}]
    if count == 0:
        # count() is 0 both without libcuda and without a GPU: opening GPU 0 says which.
        try:
            return [asyncio.run(_facts(arig.cuda.gpu(0)))]
        except arig.ArigError as exc:
            return [{"device": "CUDA", "missing": str(exc)}]
    rows: list[dict[str, Any]] = []
    for i in range(count):
        try:
            rows.append(asyncio.run(_facts(arig.cuda.gpu(i))))
        except arig.ArigError as exc:
            rows.append({"device": arig.cuda.gpu(i).name, "error": str(exc)})
    if count > 1:
        rows.append(_peer_row(count))
    return rows


def _peer_row(count: int) -> dict[str, Any]:
    """Which GPU reaches which other's memory directly (``arig.cuda.peers()``), one line per GPU."""
    names = [arig.cuda.gpu(i).name for i in range(count)]
    try:
        matrix = arig.cuda.peers()
    except arig.ArigError as exc:
        return {"device": "CUDA peers", "error": str(exc)}
    row: dict[str, Any] = {"device": "CUDA peers (cuDeviceCanAccessPeer: NVLink or PCIe peer to peer)"}
    for i, name in enumerate(names):
        row[name] = ", ".join(f"{names[j]} {'yes' if matrix[i][j] else 'no'}" for j in range(count) if j != i)
    return row


def _nv_rows() -> list[dict[str, Any]]:
    """Each GPU the kernel driver holds, the visible ones first; where there is none, one row saying why.

    A row has both numberings: ``visible_index`` (``arig.nvrm.gpu(i)``'s and
    CUDA's, under ``CUDA_VISIBLE_DEVICES``) and ``physical_index`` with ``bus`` and
    ``uuid`` (the GPU on the machine, as nvidia-smi numbers it).
    """
    from ..nvrm._top import info_rows

    try:
        found = info_rows()
    except arig.ArigError as exc:
        return [{"device": "NV", "missing": str(exc)}]
    if not found:
        return [{"device": "NV", "missing": "no NVIDIA GPU on this machine (none in the PCI tree)"}]
    return [{"device": row["device"], "path": "kernel driver (no libcuda): arig.nvrm.gpu(visible_index)", **row} for row in found]


def gather() -> list[dict[str, Any]]:
    """One row per device: the host, each CUDA GPU, each GPU the kernel driver holds.

    A kind of device that is missing has one row whose ``missing`` says why.
    """
    return [asyncio.run(_facts(arig.host.cpu())), *_cuda_rows(), *_nv_rows()]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m arig info", description="List the devices this machine can open.")
    p.add_argument("--json", action="store_true", help="print one JSON list")
    args = p.parse_args(argv)
    rows = gather()
    from .. import _engine, _env

    engine = _engine.choose()
    rows.insert(0, {"device": "arig", "version": arig.__version__, "engine": engine.name, "core": engine.why, "environment": _env.describe()})
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    for row in rows:
        head = row.pop("device")
        print(head)
        for k, v in row.items():
            print(f"  {k:14} {v}")
    return 0
