"""What the command line says and how it ends: ``--version``, one-line messages and
consistent exit statuses (0 done, 1 failed, 2 bad arguments, 130 Ctrl-C), never a
traceback for these; ``top`` without a GPU ends; ``info`` says why a device is missing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import arig
from arig import __main__ as cli
from arig._cli import demo, info
from arig.nvrm import _fd

REPO = Path(__file__).resolve().parents[1]


def _arig(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "arig", *argv], cwd=REPO, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def no_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_fd.driver, "pci_root", str(tmp_path / "no-pci"))


def test_version() -> None:
    done = _arig("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"arig {arig.__version__}\n"


@pytest.mark.parametrize(("argv", "status"), [([], 2), (["nonsense"], 2), (["-h"], 0), (["--help"], 0), (["-V"], 0)])
def test_the_dispatcher(argv: list[str], status: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == status
    out, err = capsys.readouterr()
    assert "usage: python -m arig" in out + err or argv == ["-V"]
    if argv == ["nonsense"]:
        assert "unknown command 'nonsense'" in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--tasks", "0"], "--tasks: must be at least 1, got 0"),
        (["--iters", "-3"], "--iters: must be at least 1"),
        (["--n", "0"], "--n: must be at least 1"),
        (["--tasks", "many"], "--tasks: not a whole number"),
        (["--device", "cuda:x"], "bad device 'cuda:x'"),
        (["--device", "cuda:-1"], "bad device 'cuda:-1'"),
        (["--device", "tpu"], "unknown device 'tpu'"),
        (["--device", "host:1"], "bad device 'host:1'"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_demo_refuses_bad_arguments_with_status_2(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err
    assert "Traceback" not in err


@pytest.mark.parametrize("device", ["nv:99", "cuda:99"])
def test_demo_on_a_device_that_does_not_open_fails_with_status_1(device: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--device", device, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("arig demo: ") and err.count("\n") == 1
    assert "99" in err


def test_demo_runs_on_the_host(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--device", "HOST", "--tasks", "2", "--iters", "3", "--n", "64", "--quiet"]) == 0
    assert "6 saxpys verified against numpy" in capsys.readouterr().out


def test_parse_device() -> None:
    assert demo.parse_device("host") == ("host", 0)
    assert demo.parse_device("CUDA:3") == ("cuda", 3)
    assert demo.parse_device("nv") == ("nv", 0)
    for bad in ("", "cuda:", "cuda:1.5", "cuda:٣", "gpu:0"):
        with pytest.raises(arig.ArigValueError):
            demo.parse_device(bad)


def test_an_arig_error_from_a_command_is_one_line_and_status_1(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def broken() -> list[dict[str, object]]:
        raise arig.OpenError("cannot open HOST: out of threads")

    monkeypatch.setattr(info, "gather", broken)
    assert cli.main(["info"]) == 1
    assert capsys.readouterr().err == "arig info: cannot open HOST: out of threads\n"


_CTRL_C = """
import signal, sys, runpy
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, whatever this test runs under
sys.argv = ["arig", "demo", "--device", "host", "--tasks", "4", "--iters", "1000000", "--quiet"]
runpy.run_module("arig", run_name="__main__", alter_sys=True)
"""


def test_ctrl_c_ends_the_demo_with_status_130_and_no_traceback() -> None:
    child = subprocess.Popen([sys.executable, "-W", "error", "-c", _CTRL_C], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().startswith("arig demo:")  # running
        time.sleep(0.5)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 130, err
    assert err == "arig demo: interrupted\n"


def test_top_without_a_gpu_says_so_and_ends_with_status_1(no_gpus: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["top"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "arig top: no NVIDIA GPU on this machine (none in the PCI tree)\n"


def test_top_json_without_a_gpu_is_an_empty_list(no_gpus: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["top", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_info_says_why_each_missing_device_is_missing(no_gpus: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["info", "--json"]) == 0
    rows = {row["device"]: row for row in json.loads(capsys.readouterr().out)}
    assert "core" in rows["arig"] and "environment" in rows["arig"]
    assert rows["HOST"]["arch"] == "host"
    assert rows["NV"] == {"device": "NV", "missing": "no NVIDIA GPU on this machine (none in the PCI tree)"}
    if arig.cuda.count() == 0:
        # No libcuda here, or no GPU for it: the row names which.
        assert set(rows["CUDA"]) == {"device", "missing"}
        assert "libcuda" in rows["CUDA"]["missing"] or "no GPU 0" in rows["CUDA"]["missing"]


def test_info_prints_the_reason_on_screen(no_gpus: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "NV\n  missing        no NVIDIA GPU on this machine" in out
