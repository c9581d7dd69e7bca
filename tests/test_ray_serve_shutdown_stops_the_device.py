"""Deleting the application stops every replica's device (Serve calls the deployment's ``__del__``):
each replica's report says its device stopped, not lost, after the requests it served.  Needs Ray Serve
(``tests/_ray_serve.py``)."""

from __future__ import annotations

from pathlib import Path

from _ray_serve import RAY_WARNINGS, deployed, require_ray

require_ray()
pytestmark = RAY_WARNINGS

import httpx  # noqa: E402

from examples.ray_serve.loadtest import stop_reports  # noqa: E402
from examples.serve.model import inputs  # noqa: E402


def test_deleting_the_application_stops_every_device(tmp_path: Path) -> None:
    with deployed(tmp_path) as (url, reports):
        with httpx.Client(timeout=15) as client:
            for row in inputs(8, seed=2):
                assert client.post(f"{url}/infer", json={"x": row.tolist()}).status_code == 200
        assert list(reports.iterdir()) == []  # nothing stopped while serving
    stops = stop_reports(str(reports), expect=2)
    assert len(stops) == 2, stops
    assert all(s["stopped"] is True and s["lost"] is None for s in stops), stops
    assert sum(s["completions"] for s in stops) == 8
