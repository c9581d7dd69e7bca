"""A replica whose device is lost (``arig.testing.faults.lose``, through ``POST /debug/lose``) fails its
health check and Serve replaces it while the load goes on: no answer is wrong, the failures are 503s, a
new replica answers, and the lost one stopped its device.  Needs Ray Serve (``tests/_ray_serve.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from _ray_serve import RAY_WARNINGS, deployed, require_ray

require_ray()
pytestmark = RAY_WARNINGS

from examples.ray_serve.loadtest import run_faults, stop_reports  # noqa: E402


def test_a_lost_replica_is_replaced_under_load(tmp_path: Path) -> None:
    with deployed(tmp_path, debug_faults=True) as (url, reports):
        report = asyncio.run(run_faults(url, replicas=2, faults=["loss"], concurrency=6, fault_timeout=90))
        [fault] = report["faults"]
        victim = stop_reports(str(reports), expect=1)
    assert report["wrong"] == 0 and set(report["failed_by"]) <= {"503"}, report
    assert report["replaced"] and fault["replacement"] not in (None, fault["replica"]) and fault["s_to_replacement"] < 90, report
    [lost] = [r for r in victim if r["replica"] == fault["replica"]]
    assert lost["stopped"] is True and lost["lost"].startswith("RuntimeError: fault injected into"), lost
