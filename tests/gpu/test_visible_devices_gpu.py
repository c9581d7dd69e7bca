"""``CUDA_VISIBLE_DEVICES`` picks the same GPU for ``arig.nvrm.gpu(0)`` as for ``arig.cuda.gpu(0)``.

Each setting runs in a fresh interpreter, since libcuda reads the variable
once, at its first call.  Skipped where the NVIDIA kernel driver is not
loaded.  Written for the H200 (driver 580) the project runs its GPU tests on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import arig._env

# The GPU suite (ARIG_GPU_REQUIRED=1) must fail, not skip, without the driver.
if not os.path.exists("/dev/nvidiactl") and not arig._env.GPU_REQUIRED:
    pytest.skip("the NVIDIA kernel driver is not loaded", allow_module_level=True)

import arig.nvrm as nvrm

pytestmark = pytest.mark.arig_gpu

REPO = Path(__file__).resolve().parents[2]

OPEN = """
import asyncio, json, sys, arig

async def main():
    if sys.argv[1] == "cuda":
        import arig.cuda
        opener = arig.cuda.gpu(0)
    else:
        import arig.nvrm
        opener = arig.nvrm.gpu(0)
    try:
        async with await arig.open(opener) as dev:
            print(json.dumps({"bus": str(dev.facts["bus"]), "uuid": dev.facts.get("uuid")}))
    except arig.OpenError as e:
        print(json.dumps({"error": str(e)}))

asyncio.run(main())
"""


def normal_bus(bus: str) -> str:
    """00000000:00:06.0 and 0000:00:06.0 as one form."""
    domain, rest = bus.strip().lower().split(":", 1)
    return f"{int(domain, 16):04x}:{rest}"


def _open_both(setting: str) -> dict[str, Any]:
    """What GPU 0 is to each kind of device, each in its own process with ``CUDA_VISIBLE_DEVICES=setting``."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": setting}
    out: dict[str, Any] = {}
    for kind in ("cuda", "nv"):
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(OPEN), kind], capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode == 0, r.stderr[-4000:]
        out[kind] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def _first_gpu() -> tuple[str, str]:
    bus = nvrm.buses()[0]
    return bus, str(nvrm.describe(0)["uuid"])


@pytest.mark.parametrize("form", ["index", "uuid", "uuid prefix"])
def test_an_index_or_a_uuid_opens_the_same_gpu_as_cuda(form: str) -> None:
    bus, uuid = _first_gpu()
    setting = {"index": "0", "uuid": uuid, "uuid prefix": uuid[:12]}[form]
    out = _open_both(setting)
    assert "error" not in out["cuda"] and "error" not in out["nv"], out
    assert normal_bus(out["cuda"]["bus"]) == normal_bus(out["nv"]["bus"]) == normal_bus(bus), out
    assert out["nv"]["uuid"] == uuid


@pytest.mark.parametrize("setting", ["", "GPU-00000000-0000-0000-0000-000000000000"])
def test_no_visible_gpu_is_refused_by_both(setting: str) -> None:
    out = _open_both(setting)
    assert "error" in out["cuda"], out
    message = out["nv"].get("error", "")
    assert f"CUDA_VISIBLE_DEVICES={setting!r} makes 0 of this machine's" in message, out
    if setting:
        assert "matches no GPU's UUID" in message, out
