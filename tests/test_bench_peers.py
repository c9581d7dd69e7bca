"""The hand-off benchmark (``python -m bench --only peers``) run whole over the fake CUDA driver,
so that the code the GPUs run has run here first: both modes measured in one run, every stamp
back, B's kernel never started before A's ended, and the report's table has the rows."""

from __future__ import annotations

import ctypes
import struct
import time

import pytest

from bench import peers
from bench._common import Config
from bench.report import table
from arig.testing import FakeCuda


def _stamped(args: bytes) -> None:
    ns, out, i = struct.unpack("<QQI", args[:20])
    start = time.monotonic_ns()
    time.sleep(ns / 1e9)
    ctypes.c_uint64.from_address(out + 16 * i).value = start
    ctypes.c_uint64.from_address(out + 16 * i + 8).value = max(time.monotonic_ns(), start + ns)


@pytest.mark.parametrize("gpus", [1, 2])
def test_the_peers_bench_measures_both_hand_offs(monkeypatch: pytest.MonkeyPatch, gpus: int) -> None:
    cuda = FakeCuda(gpus=gpus)
    image = cuda.image(spin_stamped=(_stamped, (8, 8, 4)), empty=(lambda a: None, ()))
    monkeypatch.setattr(peers, "_image", lambda kind: image)
    with cuda.installed():
        r = peers.run(Config(quick=True))
    assert cuda.violations == []
    assert r["pair"] == ("gpu0->gpu1" if gpus == 2 else "gpu0->gpu0") and r["same_gpu"] == (gpus == 1)
    for mode in peers.MODES:
        m = r[mode]
        assert m["stamps_missing"] == 0 and m["handoff_us"]["n"] == r["samples"], (mode, m)
        assert m["handoff_us"]["min"] >= 0, "B's kernel started before A's ended"
        assert m["wall_us"]["n"] == r["samples"]
    text = table({"benchmarks": {"peers": r}})
    assert "Across devices" in text and "round_trip" in text
