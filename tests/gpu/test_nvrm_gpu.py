"""arig.nvrm on a real NVIDIA GPU, checked against nvidia-smi.

Skipped where the NVIDIA kernel driver is not loaded.  Written for the H200
(driver 580) the project runs its GPU tests on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest

import arig._env

# The GPU suite (ARIG_GPU_REQUIRED=1) must fail, not skip, without the driver.
if not os.path.exists("/dev/nvidiactl") and not arig._env.GPU_REQUIRED:
    pytest.skip("the NVIDIA kernel driver is not loaded", allow_module_level=True)

import arig.nvrm as nvrm
from arig._errors import OpenError

pytestmark = pytest.mark.arig_gpu

REPO = Path(__file__).resolve().parents[2]
SMI_CLOCK_HZ = 1.98e9  # the H200's top SM clock: cycles for torch.cuda._sleep


def smi(*fields: str) -> list[list[str]]:
    """nvidia-smi's answer for ``fields``, one row per GPU (in its bus order)."""
    if shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-smi is not installed")
    out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}",
                          "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return [[v.strip() for v in line.split(",")] for line in out.splitlines() if line.strip()]


def normal_bus(bus: str) -> str:
    """00000000:00:06.0 (nvidia-smi) and 0000:00:06.0 (sysfs) as one form."""
    domain, rest = bus.strip().lower().split(":", 1)
    return f"{int(domain, 16):04x}:{rest}"


def test_buses_match_nvidia_smi() -> None:
    theirs = [normal_bus(row[0]) for row in smi("pci.bus_id")]
    assert nvrm.buses() == theirs
    assert nvrm.count() == len(theirs) > 0


def test_memory_matches_nvidia_smi() -> None:
    rows = smi("pci.bus_id", "memory.total", "memory.free")
    by_bus = {normal_bus(bus): (float(total), float(free)) for bus, total, free in rows}
    for i, bus in enumerate(nvrm.buses()):
        u = nvrm.usage(i)
        total, free = by_bus[bus]
        assert u.memory_total / 2**20 == pytest.approx(total, rel=0.01)
        assert u.memory_free / 2**20 == pytest.approx(free, rel=0.01)


def test_busy_near_zero_when_idle() -> None:
    # Earlier tests (or nvidia-smi starting up) may have kept the GPU busy;
    # the RM keeps ~14 s of samples, so wait out a few windows at most.
    for _ in range(8):
        busy = nvrm.usage(0, window=2.0).busy
        assert busy is not None
        if busy < 10:
            return
        time.sleep(2.0)
    pytest.fail(f"GPU 0 stayed busy ({busy:.1f} %) while idle")


def _torch_device_of(torch: object, bus: str) -> int:
    """The torch index of the GPU at ``bus`` (CUDA's order need not be bus order)."""
    cuda = torch.cuda  # type: ignore[attr-defined]
    for k in range(cuda.device_count()):
        props = cuda.get_device_properties(k)
        domain = getattr(props, "pci_domain_id", None)
        pci_bus = getattr(props, "pci_bus_id", None)
        device = getattr(props, "pci_device_id", None)
        if None in (domain, pci_bus, device):
            break
        if normal_bus(f"{domain:x}:{pci_bus:02x}:{device:02x}.0") == bus:
            return k
    return 0


def test_busy_while_a_kernel_spins() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch cannot use CUDA here")
    k = _torch_device_of(torch, nvrm.buses()[0])
    with torch.cuda.device(k):
        torch.zeros(1, device="cuda")  # context made before the spin starts
        torch.cuda.synchronize()
        torch.cuda._sleep(int(4.0 * SMI_CLOCK_HZ))
        try:
            time.sleep(2.0)
            busy = nvrm.usage(0, window=1.0).busy
        finally:
            torch.cuda.synchronize()
    assert busy is not None and busy > 90


def _sane(u: nvrm.Usage) -> bool:
    return (u.memory_total > 0 and 0 <= u.memory_free <= u.memory_total
            and (u.busy is None or 0.0 <= u.busy <= 100.0))


def test_usage_from_eight_threads() -> None:
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: nvrm.usage(0, window=0.5), range(200)))
    assert len(results) == 200 and all(_sane(u) for u in results)


def test_usage_async() -> None:
    async def both() -> list[nvrm.Usage]:
        return [await nvrm.usage_async(0), await nvrm.usage_async(0, window=5.0)]

    assert all(_sane(u) for u in anyio.run(both))


def test_no_fd_leak_over_many_calls() -> None:
    nvrm.usage(0)  # the client and the GPU's file are made once, here
    nvrm.describe(0)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(1000):
        nvrm.usage(0)
    for _ in range(20):
        nvrm.describe(0)
    assert len(os.listdir("/proc/self/fd")) == before


def test_describe_facts() -> None:
    facts = nvrm.describe(0)
    assert facts["arch"] == "sm_90" and facts["chip"] == "GH100"
    assert str(facts["uuid"]).startswith("GPU-")
    assert facts["bus"] == nvrm.buses()[0]
    assert facts["hang_ms"] in (None, 30_000)
    assert isinstance(facts["bar1_size"], int) and facts["bar1_size"] > 0
    assert facts["memory_total"] == nvrm.usage(0).memory_total
    name, uuid = smi("name", "uuid")[0]
    assert facts["name"] == name  # the driver's own name for this GPU, whichever Hopper it is
    assert facts["uuid"] == uuid


def test_top_json_lists_every_gpu() -> None:
    done = subprocess.run([sys.executable, "-m", "arig.nvrm._top", "--json", "--count", "1"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert isinstance(rows, list) and len(rows) == nvrm.count()
    for i, row in enumerate(rows):
        assert row["index"] == i and "error" not in row
        assert row["memory_total"] > 0 and "NVIDIA" in row["name"]


def test_opener_names_the_gpu_count_for_a_gpu_that_is_not_there() -> None:
    with pytest.raises(OpenError, match=f"this machine has {nvrm.count()}"):
        nvrm.gpu(nvrm.count()).make()  # GPU 0 opens: tests/gpu/test_nv_gpu.py
