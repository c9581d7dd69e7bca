"""Through Serve's HTTP proxy, two replicas of the example answer a bounded load, every answer checked
against numpy; bad bodies get 400 and the fault routes are closed unless enabled.  Needs Ray Serve
(``tests/_ray_serve.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from _ray_serve import RAY_WARNINGS, deployed, require_ray

require_ray()
pytestmark = RAY_WARNINGS

import httpx  # noqa: E402

from examples.ray_serve.loadtest import run_faults  # noqa: E402


def test_two_replicas_serve_a_verified_load(tmp_path: Path) -> None:
    with deployed(tmp_path) as (url, _):
        report = asyncio.run(run_faults(url, replicas=2, faults=[], concurrency=6, warmup_timeout=60, load_s=2.0))
        with httpx.Client(timeout=15) as client:
            bad = client.post(f"{url}/infer", json={"x": [1.0, 2.0]})
            closed = client.post(f"{url}/debug/lose")
            health = client.get(f"{url}/healthz")
    assert report["served"] > 0 and report["wrong"] == 0 and report["failed"] == 0, report
    assert bad.status_code == 400 and "64 numbers" in bad.json()["error"]
    assert closed.status_code == 404 and "debug_faults=False" in closed.json()["error"]
    assert health.status_code == 200 and health.json()["device"] == "host" and health.json()["lost"] is None
