"""The Ray Serve example's replica logic (``examples/ray_serve/replica.py``), driven without Ray.

A replica answers verified requests; its health check fails once the device
is lost or hung (and only then); a request caught in a hang fails instead of
waiting; faults are refused unless enabled; stop stops the device and writes
its report.  On the host device, and on the NV device over ``FakeNvrm``
(the saxpy model), and through ``replica_check``'s command line.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # examples/ is not installed: it is imported from the checkout

import arig  # noqa: E402
import arig._native  # noqa: E402
from arig.testing import FakeCuda, FakeNvrm  # noqa: E402
from examples.ray_serve import replica_check  # noqa: E402
from examples.ray_serve.replica import FaultsDisabled, Replica, ReplicaConfig, Unhealthy, parse_device  # noqa: E402
from examples.serve.model import ATOL, RTOL, inputs, reference, weights  # noqa: E402

pytest_plugins = ["_fake_drivers"]  # the fixture fake_cuda

X = inputs(24, seed=5)
WANT = reference(weights(), X)


async def _answers(replica: Replica, x: np.ndarray = X) -> list[np.ndarray]:
    return list(await asyncio.wait_for(asyncio.gather(*(replica.infer(row) for row in x)), 30))


def _verified(ys: list[np.ndarray], want: np.ndarray = WANT) -> None:
    assert len(ys) == len(want)
    for y, w in zip(ys, want):
        np.testing.assert_allclose(y, w, rtol=RTOL, atol=ATOL)


@pytest.mark.asyncio
async def test_a_replica_answers_and_is_unhealthy_once_its_device_is_lost(tmp_path: Path) -> None:
    replica = Replica(ReplicaConfig(device="host", debug_faults=True, report_dir=str(tmp_path)), name="r1")
    with pytest.raises(Unhealthy, match="not started"):
        replica.check_health()
    await replica.start()
    try:
        _verified(await _answers(replica))
        replica.check_health()
        assert await replica.inject("loss") == {"replica": "r1", "injected": "loss", "device": "host"}
        with pytest.raises(Unhealthy, match="r1: device host lost: RuntimeError: fault injected into r1"):
            replica.check_health()
        with pytest.raises(Unhealthy, match="lost"):
            await asyncio.wait_for(replica.infer(X[0]), 5)
    finally:
        await replica.stop()
    assert replica.runner.stopped
    report = json.loads((tmp_path / "r1.json").read_text())
    assert report["stopped"] is True and report["completions"] == len(X) and report["injected"] == ["loss"]
    assert report["lost"].startswith("RuntimeError: fault injected")


@pytest.mark.asyncio
async def test_a_hung_device_fails_its_request_and_the_health_check() -> None:
    replica = Replica(ReplicaConfig(device="host", hang_ms=200, debug_faults=True, max_wait_ms=0), name="r2")
    await replica.start()
    try:
        _verified(await _answers(replica))
        await replica.inject("hang", seconds=3.0)
        replica.check_health()  # the stall alone is not yet a hang
        caught = asyncio.ensure_future(replica.infer(X[0]))  # queued behind the stall
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(Unhealthy, match="DeviceHang"):
            await asyncio.wait_for(caught, 2.5)  # fails once the watchdog sees no progress, long before the stall ends
        assert loop.time() - t0 < 2.0
        with pytest.raises(Unhealthy, match="DeviceHang: no progress"):
            replica.check_health()
    finally:
        await replica.stop()
    assert replica.runner.stopped


@pytest.mark.asyncio
async def test_faults_are_refused_unless_enabled_and_bad_rows_are_refused() -> None:
    replica = Replica(ReplicaConfig(device="host"), name="r3")
    await replica.start()
    try:
        with pytest.raises(FaultsDisabled, match="debug_faults=False"):
            await replica.inject("loss")
        with pytest.raises(ValueError, match="64 finite numbers"):
            await replica.infer([1.0, 2.0])
        with pytest.raises(ValueError, match="finite"):
            await replica.infer([float("nan")] * 64)
        replica.check_health()  # refusals keep the device
        _verified(await _answers(replica, X[:3]), WANT[:3])
    finally:
        await replica.stop()
    with pytest.raises(Unhealthy, match="stopped"):
        replica.check_health()


@pytest.mark.parametrize(("spec", "parsed"), [("host", ("host", 0)), ("cpu", ("host", 0)), ("cuda", ("cuda", 0)), ("CUDA:1", ("cuda", 1)), ("nv:2", ("nv", 2))])
def test_device_specs(spec: str, parsed: tuple[str, int]) -> None:
    assert parse_device(spec) == parsed


@pytest.mark.parametrize("spec", ["gpu:0", "host:1", "nv:x", "cuda:-1", ""])
def test_bad_device_specs_are_refused_by_name(spec: str) -> None:
    with pytest.raises(ValueError, match="device must be"):
        parse_device(spec)


def _fake_saxpy(fake: FakeNvrm) -> None:
    def saxpy(params: bytes, grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
        a, x, y, n = struct.unpack("<f4xQQi", params)
        ys = fake.array(y, np.float32, n)
        ys[:] = np.float32(a) * fake.array(x, np.float32, n) + ys

    fake.kernel("saxpy", saxpy)


def test_the_kernel_model_on_an_nv_device_answers_and_reports_its_loss() -> None:
    if arig._native.library() is None:
        pytest.skip(f"the NV device needs the native core, not in use here: {arig._native.status()}")
    fake = FakeNvrm()
    _fake_saxpy(fake)

    async def main() -> dict[str, Any]:
        return await replica_check.check("nv:0", "loss", requests=12, step_timeout=60)

    with fake.installed():
        r = asyncio.run(main())
    assert fake.violations == []
    assert r["opened"] == "nv:0" and "saxpy" in r["runner"]
    assert r["mismatches"] == 0 and r["refused_after"] and r["device_stopped"] and r["passed"], r
    assert any(name == "saxpy" for name, _, _ in fake.launches)


def test_replica_check_passes_on_the_host_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "check.json"
    assert replica_check.main(["--device", "host", "--requests", "16", "--hang-ms", "200", "--json", str(out)]) == 0
    results = json.loads(out.read_text())
    assert [r["fault"] for r in results] == ["loss", "hang"] and all(r["passed"] for r in results)
    assert 0.2 <= results[1]["unhealthy_after_s"] < 2.0
    assert capsys.readouterr().out.count("PASS") == 2


def _saxpy_on_host_memory(args: bytes) -> None:
    """saxpy(float a, const float *x, float *y, int n) over FakeCuda's memory, which is the process's."""
    a, x, y, n = struct.unpack("<f4xQQi", args)
    xs = np.ctypeslib.as_array((ctypes.c_float * n).from_address(x))
    ys = np.ctypeslib.as_array((ctypes.c_float * n).from_address(y))
    ys += np.float32(a) * xs


@pytest.mark.asyncio
async def test_the_kernel_model_on_a_cuda_device_answers_and_reports_its_loss(fake_cuda: FakeCuda, monkeypatch: pytest.MonkeyPatch) -> None:
    import arig.cuda

    monkeypatch.setattr(arig.cuda, "shipped_image", lambda: fake_cuda.image(saxpy=(_saxpy_on_host_memory, (4, 8, 8, 4))))
    replica = Replica(ReplicaConfig(device="cuda:0", model="kernels", debug_faults=True), name="k1")
    await replica.start()
    try:
        assert replica.device == "cuda:0" and replica.batcher is not None and replica.batcher.max_batch == 8
        _verified(await _answers(replica))
        await replica.inject("loss")
        with pytest.raises(Unhealthy, match="k1: device cuda:0 lost"):
            replica.check_health()
    finally:
        await replica.stop()
    assert replica.runner.stopped


@pytest.mark.asyncio
async def test_an_unknown_model_is_refused_before_any_device_opens() -> None:
    with pytest.raises(ValueError, match="model must be 'auto', 'torch' or 'kernels', not 'onnx'"):
        await Replica(ReplicaConfig(device="host", model="onnx")).start()
