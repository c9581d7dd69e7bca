"""``python -m arig info``: the devices this machine can open, with their facts."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import arig

__all__ = ["main", "gather"]


async def _facts(opener: Any) -> dict[str, Any]:
    async with await arig.open(opener) as dev:
        return {"device": dev.name, "arch": dev.arch, **dict(dev.facts)}


def gather() -> list[dict[str, Any]]:
    """One row per device: the host, each CUDA GPU, each GPU the kernel driver holds."""
    rows: list[dict[str, Any]] = [asyncio.run(_facts(arig.host.cpu()))]
    try:
        count = arig.cuda.count()
    except arig.ArigError as exc:
        rows.append({"device": "CUDA", "error": str(exc)})
        count = 0
    for i in range(count):
        try:
            rows.append(asyncio.run(_facts(arig.cuda.gpu(i))))
        except arig.ArigError as exc:
            rows.append({"device": arig.cuda.gpu(i).name, "error": str(exc)})
    try:
        from ..nvrm._top import info_rows

        for i, row in enumerate(info_rows()):
            rows.append({"device": arig.nvrm.gpu(i).name, "path": "kernel driver (facts only: runs no work yet)", **row})
    except arig.ArigError as exc:
        rows.append({"device": "NV", "error": str(exc)})
    return rows


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m arig info", description="List the devices this machine can open.")
    p.add_argument("--json", action="store_true", help="print one JSON list")
    args = p.parse_args(argv)
    rows = gather()
    from .. import _env, _native

    rows.insert(0, {"device": "arig", "version": arig.__version__, "core": _native.status(), "environment": _env.describe()})
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    for row in rows:
        head = row.pop("device")
        print(head)
        for k, v in row.items():
            print(f"  {k:14} {v}")
    return 0
