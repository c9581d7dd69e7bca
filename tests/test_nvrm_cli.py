"""``python -m arig top`` / ``info`` as arig.nvrm._top provides them, without a GPU."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import arig.nvrm as nvrm
from arig.nvrm import _fd, _top
from arig.nvrm._params import DriverError, Usage

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_fd.driver, "pci_root", str(tmp_path / "no-pci"))


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two GPUs; the second cannot be read (suspended).  Every GPU visible, whatever the caller's environment."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    buses = ["0000:00:06.0", "0000:00:07.0"]

    def usage(i: int, window: float = 1.0) -> Usage:
        if i == 1:
            raise DriverError("GPU 0000:00:07.0 is not active")
        return Usage(memory_total=100 * 2**30, memory_free=75 * 2**30, busy=42.5)

    def describe(i: int) -> dict[str, Any]:
        if i == 1:
            raise DriverError("GPU 0000:00:07.0 is not active")
        return {"name": "NVIDIA H200", "arch": "sm_90", "bus": buses[i], "hang_ms": None}

    monkeypatch.setattr(nvrm, "buses", lambda: list(buses))
    monkeypatch.setattr(nvrm, "usage", usage)
    monkeypatch.setattr(nvrm, "describe", describe)


def test_json_without_gpus(no_gpus: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert _top.main(["--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_screen_without_gpus(no_gpus: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert _top.main(["--count", "1"]) == 1  # nothing to watch: it says so and ends
    assert "no NVIDIA GPU" in capsys.readouterr().err


def test_module_runs_on_this_machine() -> None:
    """As a program; this CPU machine has no GPU, a GPU machine has some."""
    done = subprocess.run([sys.executable, "-m", "arig.nvrm._top", "--json", "--count", "1"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert isinstance(rows, list)
    assert len(rows) == nvrm.count()


def test_json_rows(two_gpus: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert _top.main(["--json", "--interval", "2"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0] == {"index": 0, "bus": "0000:00:06.0", "name": "NVIDIA H200",
                       "memory_total": 100 * 2**30, "memory_free": 75 * 2**30, "busy": 42.5}
    assert rows[1]["index"] == 1 and rows[1]["busy"] is None
    assert "not active" in rows[1]["error"]


def test_screen_refreshes_count_times(two_gpus: None, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(time, "sleep", sleeps.append)
    assert _top.main(["--count", "3", "--interval", "0.5"]) == 0
    out = capsys.readouterr().out
    assert sleeps == [0.5, 0.5]
    assert out.count("arig top") == 3
    assert "NVIDIA H200" in out and "42.5%" in out and "25.0/ 100.0 GiB" in out
    assert "not active" in out
    assert "▄▄▄" in out  # three refreshes of 42.5 % in the history


def test_ctrl_c_ends_cleanly(two_gpus: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", interrupted)
    assert _top.main([]) == 0


def test_unlistable_machine_fails_with_a_message(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    def broken() -> list[str]:
        raise DriverError("cannot list the PCI functions")

    monkeypatch.setattr(nvrm, "buses", broken)
    assert _top.main(["--json"]) == 1
    assert "cannot list the PCI functions" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--interval", "0"], ["--interval", "nan"],
                                  ["--count", "0"], ["--bogus"]])
def test_bad_arguments(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        _top.main(argv)
    assert caught.value.code == 2


def test_info_rows(two_gpus: None) -> None:
    rows = _top.info_rows()
    assert rows[0] == {"physical_index": 0, "device": "NV", "bus": "0000:00:06.0", "visible_index": 0,
                       "visible_by": "every GPU in PCI bus order (CUDA_VISIBLE_DEVICES is unset)",
                       "name": "NVIDIA H200", "arch": "sm_90", "hang_ms": None}
    assert rows[1]["device"] == "NV:1" and "not active" in rows[1]["error"]


def test_info_rows_without_gpus(no_gpus: None) -> None:
    assert _top.info_rows() == []


def test_render_history_and_unknown_busy() -> None:
    row = {"index": 0, "bus": "0000:00:06.0", "name": "NVIDIA H200",
           "memory_total": 2**30, "memory_free": 2**30, "busy": None}
    text = _top.render([row], {0: collections.deque([0.0, 100.0, None])})
    assert "▁█ " in text and "  -  " in text
