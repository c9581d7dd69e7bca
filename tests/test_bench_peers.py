"""The hand-off benchmark (``python -m bench --only peers``) run whole over the fake drivers, so
that the code the GPUs run has run here first: both modes measured in one run for the CUDA pair
and, where the NV device opens (the native core), CUDA to NV and back; every stamp back, B's
kernel never started before A's ended, and the report's table has the rows."""

from __future__ import annotations

from typing import Any

import pytest
from _stamping_fakes import stamping_fakes

import arig._native
from bench import peers, sweep
from bench._common import Config
from bench.report import table


def _check(m: dict[str, Any], samples: int, what: str) -> None:
    for mode in peers.MODES:
        x = m[mode]
        assert x["stamps_missing"] == 0 and x["handoff_us"]["n"] == samples, (what, mode, x)
        assert x["handoff_us"]["min"] >= 0, f"{what}: B's kernel started before A's ended"
        assert x["wall_us"]["n"] == samples


@pytest.mark.parametrize("gpus", [1, 2])
def test_the_peers_bench_measures_both_hand_offs(monkeypatch: pytest.MonkeyPatch, gpus: int) -> None:
    with stamping_fakes(lambda f: monkeypatch.setattr(peers, "_image", f), sweep.CUBIN.read_bytes(), gpus):
        r = peers.run(Config(quick=True))
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
