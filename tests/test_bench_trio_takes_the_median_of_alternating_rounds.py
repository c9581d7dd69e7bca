"""The trio bench's figures are each the median round's, and its ratios the median of the rounds'
own ratios: one run per library was at the mercy of the VM.  On a GPU each round runs trio with its
spin before it blocks (the default) and without (``ARIG_TRIO_SPIN=0``), against asyncio in the same rounds."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("trio")

from bench import under_trio  # noqa: E402


def _run(empty: float, rate: float, late1: float, late10: float) -> dict[str, Any]:
    return {
        "empty": {"latency_us": {"median": empty, "p99": empty * 2}, "cpu_us_per_wait": empty},
        "tasks_64": {"completions_per_s": rate},
        "late_1ms": {"lateness_us": {"p50": late1}},
        "late_10ms": {"lateness_us": {"p50": late10}},
    }


def test_each_figure_of_a_row_comes_from_the_round_of_its_median() -> None:
    rounds = [_run(30, 100, 20, 40), _run(50, 300, 10, 60), _run(40, 200, 30, 50)]
    row = under_trio._median_row(rounds)
    assert row["empty"] is rounds[2]["empty"], "the round of the median empty p50, with its own p99"
    assert row["tasks_64"]["completions_per_s"] == 200
    assert row["late_1ms"]["lateness_us"]["p50"] == 20
    assert row["late_10ms"]["lateness_us"]["p50"] == 50
    assert [r["empty_p50"] for r in row["rounds"]] == [30, 50, 40]


def test_a_failed_round_is_listed_and_the_others_give_the_row() -> None:
    rounds = [{"error": "RuntimeError: boom"}, _run(30, 100, 20, 40)]
    row = under_trio._median_row(rounds)
    assert row["empty"]["latency_us"]["median"] == 30
    assert row["rounds"][0] == {"error": "RuntimeError: boom"}


def test_the_ratios_are_the_median_of_each_rounds_own(monkeypatch: pytest.MonkeyPatch) -> None:
    seq = {"asyncio": iter([_run(20, 100, 10, 10), _run(40, 100, 10, 10), _run(30, 100, 10, 10)]),
           "trio": iter([_run(24, 50, 20, 10), _run(40, 100, 10, 30), _run(60, 80, 10, 10)])}
    order: list[str] = []

    def fake_run(fn: Any, kind: str, cfg: Any, backend: str) -> dict[str, Any]:
        order.append(backend)
        return next(seq[backend])

    monkeypatch.setattr(under_trio, "_kinds", lambda: ["host"])
    monkeypatch.setattr(under_trio.anyio, "run", fake_run)

    class Cfg:
        quick = False

        def pick(self, full: Any, quick: Any) -> Any:
            return full

    out = under_trio.run(Cfg())  # type: ignore[arg-type]
    assert order == ["asyncio", "trio", "trio", "asyncio", "asyncio", "trio"], "the libraries alternate which runs first"
    r = out["ratio"]["host"]
    assert r["empty_p50"] == pytest.approx(1.2)  # of 1.2, 1.0, 2.0
    assert r["tasks_64"] == pytest.approx(0.8)  # of 0.5, 1.0, 0.8
    assert r["late_10ms"] == pytest.approx(1.0)  # of 1, 3, 1
    assert out["rows"]["host/trio"]["empty"]["latency_us"]["median"] == 40


def test_on_a_gpu_each_round_also_runs_trio_with_its_spin_before_it_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    import arig._env

    runs: list[tuple[str, bool]] = []
    empty = {("asyncio", False): 20, ("trio", False): 30, ("trio", True): 22}

    def fake_run(fn: Any, kind: str, cfg: Any, backend: str) -> dict[str, Any]:
        runs.append((backend, arig._env.TRIO_SPIN))
        return _run(empty[(backend, arig._env.TRIO_SPIN)], 100, 10, 10)

    monkeypatch.setattr(under_trio, "_kinds", lambda: ["cuda"])
    monkeypatch.setattr(under_trio.anyio, "run", fake_run)
    monkeypatch.setattr(arig._env, "TRIO_SPIN", False)

    class Cfg:
        quick = True

        def pick(self, full: Any, quick: Any) -> Any:
            return 2

    out = under_trio.run(Cfg())  # type: ignore[arg-type]
    assert runs == [("asyncio", False), ("trio", False), ("trio", True), ("trio", True), ("trio", False), ("asyncio", False)]
    assert arig._env.TRIO_SPIN is False, "the switch is put back after each run"
    assert out["ratio"]["cuda"]["empty_p50"] == pytest.approx(1.5)
    assert out["ratio_spin"]["cuda"]["empty_p50"] == pytest.approx(1.1)
    assert set(out["rows"]) == {"cuda/asyncio", "cuda/trio", "cuda/trio+spin"}
