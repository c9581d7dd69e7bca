"""A device whose event loop closed without a stop is released on a real GPU (CUDA and NV): stopped
from another loop, collected, or collected once the task left waiting in ``dev.wait()`` is gone.
Afterwards no file descriptor and no arig thread is left, and the GPU opens again.

Each scenario runs in a fresh interpreter: the process-level driver objects its first open makes
are then the only ones, and a device left behind cannot disturb the other tests.
Run: python3 -m pytest -q -m gpu tests/gpu/test_release_after_loop_close_gpu.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import arig._env

pytestmark = pytest.mark.arig_gpu

SCENARIO = """
import asyncio, gc, json, os, threading, time, warnings
import arig, arig.cuda, arig.nvrm
KIND = {kind!r}
warnings.simplefilter("ignore", ResourceWarning)
def opener():
    return arig.cuda.gpu(0) if KIND == "cuda" else arig.nvrm.gpu(0)
def fds():
    return len(os.listdir("/proc/self/fd"))
def threads():
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("arig-"))
async def cycle():
    async with await arig.open(opener()) as dev:
        await dev.run(None)
async def wait(dev, v):
    await dev.wait(v)
async def first(how):
    dev = await arig.open(opener())
    await dev.run(None)
    if how == "waiter":
        v = await dev.submit(lambda q, a, v: time.sleep(0.3))
        asyncio.get_running_loop().create_task(wait(dev, v))
        await asyncio.sleep(0.05)
        return None
    return dev
def scenario(how):
    before = fds()
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(lambda loop, ctx: None)
    devs = [loop.run_until_complete(first(how))]
    loop.close()
    if how == "stop":
        asyncio.run(devs[0].stop())
    devs.clear()
    gc.collect()
    deadline = time.monotonic() + 10
    while threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    left = dict(fds_grown=fds() - before, threads=threads())
    asyncio.run(cycle())  # released: the GPU opens again
    return left
asyncio.run(cycle())  # the process's driver objects: made by the first open, kept for the process
print(json.dumps({{how: scenario(how) for how in ("stop", "collect", "waiter")}}))
"""


def _available(kind: str) -> bool:
    if kind == "nv":
        return os.path.exists("/dev/nvidiactl")
    try:
        import arig.cuda

        return arig.cuda.count() > 0
    except Exception:  # noqa: BLE001 - no libcuda, no driver
        return False


@pytest.mark.parametrize("kind", ["cuda", "nv"])
def test_a_device_whose_loop_closed_is_released(kind: str) -> None:
    if not _available(kind) and not arig._env.GPU_REQUIRED:
        pytest.skip(f"no {kind} device here")
    code = textwrap.dedent(SCENARIO.format(kind=kind))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    left = json.loads(r.stdout.strip().splitlines()[-1])
    clean = {"fds_grown": 0, "threads": []}
    assert left == {"stop": clean, "collect": clean, "waiter": clean}, (left, r.stderr[-2000:])
