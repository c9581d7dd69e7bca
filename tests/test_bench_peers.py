"""The hand-off benchmark (``python -m bench --only peers``) run whole over the fake drivers, so
that the code the GPUs run has run here first: both modes measured in one run for the CUDA pair
and, where the NV device opens (the native core), CUDA to NV and back; every stamp back, B's
kernel never started before A's ended, and the report's table has the rows."""

from __future__ import annotations

import ctypes
import struct
import time
from typing import Any

import numpy as np
import pytest

import arig._native
from bench import peers, sweep
from bench._common import Config
from bench.report import table
from arig.testing import FakeCuda, FakeNvrm


def _stamps(ns: int) -> tuple[int, int]:
    start = time.monotonic_ns()
    time.sleep(ns / 1e9)
    return start, max(time.monotonic_ns(), start + ns)


def _stamped(args: bytes) -> None:
    ns, out, i = struct.unpack("<QQI", args[:20])
    start, end = _stamps(ns)
    ctypes.c_uint64.from_address(out + 16 * i).value = start
    ctypes.c_uint64.from_address(out + 16 * i + 8).value = end


def _check(m: dict[str, Any], samples: int, what: str) -> None:
    for mode in peers.MODES:
        x = m[mode]
        assert x["stamps_missing"] == 0 and x["handoff_us"]["n"] == samples, (what, mode, x)
        assert x["handoff_us"]["min"] >= 0, f"{what}: B's kernel started before A's ended"
        assert x["wall_us"]["n"] == samples


@pytest.mark.parametrize("gpus", [1, 2])
def test_the_peers_bench_measures_both_hand_offs(monkeypatch: pytest.MonkeyPatch, gpus: int) -> None:
    cuda = FakeCuda(gpus=gpus)
    image = cuda.image(spin_stamped=(_stamped, (8, 8, 4)), empty=(lambda a: None, ()))
    monkeypatch.setattr(peers, "_image", lambda kind: sweep.CUBIN.read_bytes() if kind == "nv" else image)
    nv = FakeNvrm()

    def nv_stamped(params: bytes, grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
        ns, out, i = struct.unpack("<QQI", params[:20])
        nv.array(out + 16 * i, np.uint64, 2)[:] = _stamps(ns)

    nv.kernel("spin_stamped", nv_stamped)
    nv.kernel("empty", lambda params, grid, block: None)
    with cuda.installed(), nv.installed():
        r = peers.run(Config(quick=True))
    assert cuda.violations == [] and nv.violations == []
    assert r["pair"] == ("gpu0->gpu1" if gpus == 2 else "gpu0->gpu0") and r["same_gpu"] == (gpus == 1)
    _check(r, r["samples"], r["pair"])
    if arig._native.library() is not None:
        assert set(r["pairs"]) == {"cuda->nv", "nv->cuda"}
        for name, m in r["pairs"].items():
            _check(m, r["samples"], name)
    else:
        assert "native core" in r["nv"]["skipped"]
    text = table({"benchmarks": {"peers": r}})
    assert "Across devices" in text and "round_trip" in text
    assert ("cuda->nv" in text) == (arig._native.library() is not None)
