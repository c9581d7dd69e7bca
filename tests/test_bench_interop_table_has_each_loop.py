"""The torch interop benchmark's report (``bench.report``): table 9 lists the methods, and table 9b
sets arig's adopted stream beside busy polling on each loop, with the ratios of this run's
figures; a loop that could not run says why instead of a row of numbers."""

from __future__ import annotations

from typing import Any

from bench.report import table


def _method(p50: float, rate: float) -> dict[str, Any]:
    return {"latency_us": {"median": p50, "p99": 2 * p50}, "cpu_us_per_wait": p50,
            "tasks_64": {"completions_per_s": rate, "latency_us": {"p99": 1000.0}, "cpu_us_per_completion": 50.0}}


def test_table_9b_sets_the_adopted_stream_beside_busy_polling_on_each_loop() -> None:
    io = {
        "work": "torch x.add_(1)",
        "methods": {"arig_adopt": _method(60.0, 30_000.0), "torch_poll": _method(30.0, 40_000.0)},
        "loops": {
            "uvloop": {"arig_adopt": _method(50.0, 36_000.0), "torch_poll": _method(25.0, 45_000.0)},
            "spin": {"error": "LoopUnavailable: arig.new_event_loop does not exist in this arig"},
        },
    }
    text = table({"benchmarks": {"interop": io}})
    assert "### 9. Awaiting a PyTorch stream" in text and "### 9b." in text
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert "2.00×" in rows["asyncio"] and "0.75×" in rows["asyncio"]  # 60 / 30 µs; 30k / 40k per s
    assert "2.00×" in rows["uvloop"] and "0.80×" in rows["uvloop"]
    assert "error: LoopUnavailable" in rows["spin"]
