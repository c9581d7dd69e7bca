"""``python -m bench --quick --only host`` runs on any machine and writes the host figures.

Not a speed gate: it checks the run finishes, exits 0, and that results.json
holds the host device's latency, CPU per wait and concurrency sweep.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _quick(tmp_path: Path, only: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``python -m bench --quick --only ONLY``: its output folder and the finished process (exit 0)."""
    out = tmp_path / "bench"
    p = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", only, "--out", str(out), "--max-seconds", "50"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout[-3000:]}\nstderr:\n{p.stderr[-3000:]}"
    return out, p


def test_bench_quick_host_writes_the_host_figures(tmp_path: Path) -> None:
    out, p = _quick(tmp_path, "host")
    files = sorted(f.name for f in out.iterdir())
    assert "results.json" in files and "table.md" in files
    assert len(files) <= 5, files  # only a few files come back from the GPU machine
    r = json.loads((out / "results.json").read_text())
    assert r["meta"]["quick"] is True and r["meta"]["selected"] == ["host"]
    assert list(r["benchmarks"]) == ["host"]
    host = r["benchmarks"]["host"]
    assert "error" not in host, host
    lat = host["latency"]
    assert "error" not in lat, lat
    assert lat["kernel_us"] == 0
    for key in ("latency_us", "cpu_us_per_wait"):
        s = lat[key]
        assert s["n"] > 0 and 0 < s["median"] <= s["p99"] and s["iqr"] >= 0, (key, s)
    sweep = host["concurrency"]
    assert [lvl["tasks"] for lvl in sweep] == [1, 4, 16, 64, 256, 1024]
    for lvl in sweep:
        assert "error" not in lvl, lvl
        assert lvl["completions"] > 0 and lvl["completions_per_s"] > 0
        assert lvl["latency_us"]["p99"] >= lvl["latency_us"]["median"] > 0
        assert lvl["longest_stall_ms"] >= 0
    table = (out / "table.md").read_text()
    assert "Host device" in table
    assert "Host device" in p.stdout  # the table is printed too


def test_bench_quick_trio_writes_asyncio_and_trio_rows_of_the_host_device(tmp_path: Path) -> None:
    out, p = _quick(tmp_path, "trio")
    t = json.loads((out / "results.json").read_text())["benchmarks"]["trio"]
    for lib in ("asyncio", "trio"):
        r = t["rows"][f"host/{lib}"]
        assert "error" not in r, r
        assert r["library"] == lib and r["device"] == "HOST"
        assert 0 < r["empty"]["latency_us"]["median"] <= r["empty"]["latency_us"]["p99"] and r["tasks_64"]["completions_per_s"] > 0
        for late in ("late_1ms", "late_10ms"):
            assert r[late]["lateness_us"]["n"] > 0 and r[late]["stamps_missing"] == 0, r[late]
    assert t["ratio"]["host"]["empty_p50"] > 0
    assert "under trio beside asyncio" in p.stdout and "host/trio" in p.stdout
