"""The length sweep (``python -m bench --only sweep``): its arithmetic, and the whole sweep run
over the fake CUDA and NV drivers, so that the code the H200 runs has run here first.

The arithmetic: lateness is latency less the kernel's GPU length from its own stamps (0 for
the empty kernel, missing stamps left out and counted), the tail's mix averages about 1 ms, a
tail that does not fit the budget is shortened with a note.  The run: every device × loop row,
never-seen series and tail run has the shape the report reads, its stamps all came back, and
the torch baselines are skipped with a note where torch is missing.
"""

from __future__ import annotations

import importlib.util

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from _stamping_fakes import stamping_fakes

import arig._native
from bench import _lateness as L
from bench import sweep
from bench._common import Config
from bench.report import table


def _stamps(pairs: list[tuple[int, int]]) -> np.ndarray[Any, Any]:
    return np.asarray([x for p in pairs for x in p], dtype=np.uint64)


def test_lateness_is_latency_less_the_stamped_gpu_length() -> None:
    lengths = [1_000, 1_000, 0, 1_000]
    stamps = _stamps([(10_000, 1_010_000), (5_000, 1_005_500), (0, 0), (0, 0)])  # the last kernel left no stamps
    gpu = L.gpu_lengths_us(stamps, lengths)
    assert gpu[:3].tolist() == [1_000.0, 1_000.5, 0.0] and np.isnan(gpu[3])
    row = L.length_row([1_030e-6, 1_050.5e-6, 20e-6, 1_100e-6], stamps, lengths, cpu_s=4e-4, counters={"spin_hits": 3})
    assert row["stamps_missing"] == 1
    assert row["lateness_us"]["n"] == 3
    assert row["lateness_us"]["max"] == pytest.approx(50.0)
    assert row["lateness_us"]["p50"] == pytest.approx(30.0)
    assert row["lateness_us"]["min"] == pytest.approx(20.0)
    assert row["kernel_gpu_us"] == pytest.approx(1_000.0)
    assert row["cpu_us_per_wait"] == pytest.approx(100.0)
    assert row["counters"] == {"spin_hits": 3}


def test_stamps_that_run_backwards_count_as_missing() -> None:
    gpu = L.gpu_lengths_us(_stamps([(2_000, 1_000)]), [50])
    assert np.isnan(gpu[0])
    assert L.gpu_lengths_us(None, [0, 0]).tolist() == [0.0, 0.0]
    assert np.isnan(L.gpu_lengths_us(None, [50])[0])


def test_percentiles_of_lateness() -> None:
    s = L.late_summary(np.arange(1, 101, dtype=np.float64))
    assert (s["n"], s["max"], s["min"]) == (100, 100.0, 1.0)
    assert s["p50"] == pytest.approx(50.5) and s["p90"] == pytest.approx(90.1) and s["p99"] == pytest.approx(99.01)
    assert L.late_summary([float("nan")]) == {"n": 0}


def test_tail_mix_has_a_mean_of_about_1_ms_and_a_fixed_sequence() -> None:
    assert 900 <= L.mix_mean_us() <= 1_100
    a, b = L.tail_lengths(10_000), L.tail_lengths(10_000)
    assert a == b and set(a) == set(L.TAIL_MIX)
    assert 900 <= float(np.mean(a)) <= 1_150
    assert L.tail_lengths(100, seed=1) != L.tail_lengths(100, seed=2)


def test_tail_summary_counts_the_late_and_names_the_worst() -> None:
    late = np.asarray([10.0] * 997 + [1_500.0, 2_000.0, float("nan")])
    lengths = [50] * 997 + [5_000, 1_000, 0]
    t = L.tail_summary(late, lengths, worst=2)
    assert t["n"] == 999 and t["late_over_1ms"] == 2 and t["max"] == 2_000.0
    assert t["worst"] == [{"lateness_us": 2_000.0, "length_us": 1_000, "index": 998}, {"lateness_us": 1_500.0, "length_us": 5_000, "index": 997}]
    assert t["p999"] >= t["p99"] >= t["p50"] == 10.0
    assert t["by_length_us"]["5000"]["n"] == 1 and t["by_length_us"]["0"] == {"n": 0}


def test_a_tail_that_does_not_fit_is_shortened_with_a_note() -> None:
    assert L.fit_count(10_000, 1e-3, 20.0) == (10_000, None)
    n, note = L.fit_count(10_000, 1e-3, 5.0)
    assert n == 5_000 and note is not None and "reduced from 10,000 to 5,000" in note
    n, note = L.fit_count(10_000, 1e-3, 0.05)
    assert n == 0 and note is not None and note.startswith("skipped")
    assert L.fit_count(10_000, 1e-3, float("inf")) == (10_000, None)


def test_counter_deltas() -> None:
    assert L.counter_delta({"spin_hits": 5, "early": 1}, {"spin_hits": 9, "early": 1, "prewakes": 2}) == {"spin_hits": 4, "early": 0, "prewakes": 2}


def test_config_left_counts_down_to_the_deadline() -> None:
    assert Config().left() == float("inf")
    assert 9.0 < Config(deadline=time.perf_counter() + 10.0).left() <= 10.0


# -- the whole sweep over the fake drivers ---------------------------------------------------


@contextlib.contextmanager
def _fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with stamping_fakes(lambda f: monkeypatch.setattr(sweep, "_image", f), sweep.CUBIN.read_bytes()):
        yield


def _check_rows(rows: dict[str, Any], nv_runs: bool) -> None:
    assert set(rows) == {f"{d}/{lp}" for d in sweep.DEVICES for lp in sweep.SWEEP_LOOPS}
    for name, r in rows.items():
        if name.startswith("nv") and not nv_runs:
            assert "error" in r or "skipped" in r, r
            continue
        if r.get("loop") == "uvloop" and importlib.util.find_spec("uvloop") is None:
            assert "uvloop" in r["skipped"], r  # an environment without uvloop says so, and goes on
            continue
        assert "error" not in r and "skipped" not in r, (name, r)
        assert list(r["by_length_us"]) == [str(us) for us in L.LENGTHS_US]
        for us, x in r["by_length_us"].items():
            assert x["n"] == L.samples(int(us), True) and x["stamps_missing"] == 0, (name, us, x)
            assert x["lateness_us"]["n"] == x["n"] and x["cpu_us_per_wait"] > 0
            assert x["warm_up"]["n"] == L.warm(int(us), True)
            if us != "0":  # the fake's sleep is the kernel: its stamps say how long it ran
                assert x["kernel_gpu_us"] >= int(us)
                assert x["lateness_us"]["p50"] < x["latency_us"]["p50"]


def _check_never_seen(never_seen: dict[str, Any], nv_runs: bool) -> None:
    for kind, r in never_seen.items():
        if kind == "nv" and not nv_runs:
            continue
        assert list(r["by_length_us"]) == [str(us) for us in L.NEVER_SEEN_US], r
        one, ten = r["by_length_us"]["1000"], r["by_length_us"]["10000"]
        assert one["grids"][0] > 1 and one["grids"][1] < ten["grids"][0], "grids no earlier launch had, each length its own"
        assert len(one["lateness_each_us"]) == L.NEVER_SEEN_K[1] and one["stamps_missing"] == 0


def _check_tail(tail: dict[str, Any], nv_runs: bool) -> None:
    assert set(tail) == {f"{d}/{lp}" for d in sweep.DEVICES for lp in sweep.TAIL_LOOPS} | {"torch_poll/asyncio"}
    for name, r in tail.items():
        if name == "torch_poll/asyncio" and importlib.util.find_spec("torch") is None:
            assert "not importable" in str(r.get("skipped")), r  # the busy poll's floor needs torch: it says so
            continue
        if name.startswith("nv") and not nv_runs:
            continue
        if name.endswith("/uvloop") and importlib.util.find_spec("uvloop") is None:
            assert "uvloop" in str(r.get("skipped") or r.get("error")), r
            continue
        assert r["n"] == L.TAIL_N[1] and r["stamps_missing"] == 0 and "note" not in r, r
        assert r["p999"] >= r["p99"] >= r["p50"] and r["late_over_1ms"] >= 0


def test_the_sweep_runs_on_the_fake_drivers(monkeypatch: pytest.MonkeyPatch) -> None:
    with _fakes(monkeypatch):
        out = sweep.run(Config(quick=True, deadline=time.perf_counter() + 120))
    nv_runs = arig._native.library() is not None  # the NV device needs the native core
    _check_rows(out["rows"], nv_runs)
    _check_never_seen(out["never_seen"], nv_runs)
    _check_tail(out["tail"], nv_runs)
    # without torch both baselines say why; with it, both have rows
    assert all(b.get("skipped") for b in out["baselines"].values()) or all("by_length_us" in b for b in out["baselines"].values())
    text = table({"benchmarks": {"sweep": out}, "meta": {}})
    assert "Length sweep" in text and "cuda/asyncio" in text and "Tail" in text


def test_a_sweep_out_of_time_skips_its_parts_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    with _fakes(monkeypatch):
        out = sweep.run(Config(quick=True, deadline=time.perf_counter() + 1.0))
    parts = [*out["rows"].values(), *out["baselines"].values(), *out["never_seen"].values(), *out["tail"].values()]
    assert parts and all("--max-seconds" in str(r.get("skipped")) for r in parts), parts
