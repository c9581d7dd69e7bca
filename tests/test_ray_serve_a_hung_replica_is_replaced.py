"""A replica whose queue stalls past ``hang_ms`` (``arig.testing.faults.stall``, through
``POST /debug/hang``) is lost by arig's hang watchdog: its waiting requests fail instead of hanging,
its health check fails and Serve replaces it while the load goes on.  Needs Ray Serve
(``tests/_ray_serve.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from _ray_serve import RAY_WARNINGS, deployed, require_ray

require_ray()
pytestmark = RAY_WARNINGS

from examples.ray_serve.loadtest import run_faults, stop_reports  # noqa: E402


def test_a_hung_replica_is_replaced_under_load(tmp_path: Path) -> None:
    with deployed(tmp_path, debug_faults=True, hang_ms=1000) as (url, reports):
        report = asyncio.run(run_faults(url, replicas=2, faults=["hang"], concurrency=6, fault_timeout=90, hang_s=20.0))
        [fault] = report["faults"]
        victim = stop_reports(str(reports), expect=1)
    assert report["wrong"] == 0 and set(report["failed_by"]) <= {"503"}, report  # no request timed out: none hung
    assert report["replaced"] and fault["replacement"] not in (None, fault["replica"]) and fault["s_to_replacement"] < 90, report
    [hung] = [r for r in victim if r["replica"] == fault["replica"]]
    assert hung["stopped"] is True and hung["lost"].startswith("DeviceHang: no progress"), hung
