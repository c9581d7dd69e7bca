"""``python -m arig demo --pipeline``: items go through one saxpy stage per device, moved between
devices by ``dev.copy``, every result checked against numpy, and the same items with every stage
on the first device in the same run.  On host devices here (a GPU machine runs it in the GPU
suite); a stage that computes wrong is caught; bad ``--devices`` are refused by name."""

from __future__ import annotations

from typing import Any

import pytest

import arig
from arig._cli import demo, pipeline


@pytest.mark.asyncio
@pytest.mark.parametrize("stages", [2, 3])
async def test_every_item_is_verified_through_every_stage(engine: str, stages: int) -> None:
    r = await pipeline.run_pipeline(["host"] * stages, tasks=3, items=4, n=257)
    assert r["stages"] == stages and r["devices"] == ["HOST"] * stages
    assert r["pipeline"]["items"] == 12 and r["one_device"]["items"] == 12
    assert r["speedup"] > 0 and r["pipeline"]["latency_us"]["p50"] > 0


@pytest.mark.asyncio
async def test_a_stage_that_computes_wrong_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = pipeline.saxpy_for
    calls = [0]

    async def one_wrong(dev: arig.Device) -> Any:
        saxpy = await real(dev)
        calls[0] += 1
        if calls[0] != 2:
            return saxpy

        async def wrong(a: float, bx: arig.Buffer, by: arig.Buffer, n: int) -> int:
            return await saxpy(a + 1.0, bx, by, n)  # the second device's stage is off

        return wrong

    monkeypatch.setattr(pipeline, "saxpy_for", one_wrong)
    with pytest.raises(demo.WrongResult, match="differs from numpy"):
        await pipeline.run_pipeline(["host", "host"], tasks=2, items=2, n=64)


def test_the_command_prints_both_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main(["--pipeline", "--devices", "host,host", "--tasks", "2", "--iters", "3", "--n", "100"]) == 0
    out = capsys.readouterr().out
    assert "pipeline HOST -> HOST: 6 items of 100 floats through 2 saxpy stages verified" in out
    assert "every stage on HOST alone" in out and "x that" in out


@pytest.mark.parametrize(("argv", "says"), [
    (["--pipeline", "--devices", "host"], "two or more devices"),
    (["--pipeline", "--devices", "host,gpu"], "unknown device"),
    (["--pipeline", "--device", "host"], "not --device"),
])  # fmt: skip
def test_bad_devices_are_refused_by_name(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main(argv) == 1
    assert says in capsys.readouterr().err


def test_without_a_gpu_the_machine_gives_two_host_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arig.cuda, "count", lambda: 0)
    assert pipeline.machine_devices() == ["host", "host"]
    monkeypatch.setattr(arig.cuda, "count", lambda: 3)
    assert pipeline.machine_devices() == ["cuda:0", "cuda:1", "cuda:2"]
    monkeypatch.setattr(arig.cuda, "count", lambda: 1)
    monkeypatch.setattr(arig.nvrm, "count", lambda: 1)
    assert pipeline.machine_devices() == ["cuda:0", "nv:0"]
    monkeypatch.setattr(arig.nvrm, "count", lambda: 0)
    assert pipeline.machine_devices() == ["cuda:0", "cuda:0"]

