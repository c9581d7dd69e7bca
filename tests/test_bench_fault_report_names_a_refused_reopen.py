"""The failure fan-out's report says that a reopen in the process that faulted was refused, and
why, rather than that a saxpy after it was wrong: libcuda keeps an illegal address for the life of
the process, and arig refuses that reopen with an OpenError naming it."""

from __future__ import annotations

from typing import Any

from bench.fault import _summarize
from bench.report import _fault_section


def _out(after_fault_open: dict[str, Any]) -> dict[str, Any]:
    cycle = {"waiters": 100, "lost": 100, "first_fail_ms": 1.0, "fanout_ms": 2.0, "submit_after_loss": {"raised": "DeviceLost", "us": 3.0}, "stop_ms": 0.5}
    out: dict[str, Any] = {"cycles": [cycle], "opens": [{"after_fault": False, "open_ms": 120.0, "saxpy": {"ok": True, "saxpy_ms": 1.0}}, after_fault_open]}
    _summarize(out)
    return out


def test_a_refused_reopen_is_reported_as_refused_with_its_error() -> None:
    out = _out({"after_fault": True, "error": "OpenError: cannot open CUDA: a fault earlier in this process left GPU 0 unusable"})
    text = "\n".join(_fault_section({"fault": out}))
    assert "reopen in the process that faulted: refused (OpenError: cannot open CUDA: a fault earlier" in text
    assert "saxpy correct after reopen" not in text


def test_a_reopen_that_opened_reports_its_saxpy() -> None:
    out = _out({"after_fault": True, "open_ms": 90.0, "saxpy": {"ok": True, "saxpy_ms": 1.0}})
    text = "\n".join(_fault_section({"fault": out}))
    assert "saxpy correct after reopen: yes" in text
    assert "refused" not in text
