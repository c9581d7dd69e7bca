"""What the Ray Serve tests share: Ray required or skipped, one local cluster per test process, and a
deployment of the example made and deleted around each test.

Without Ray the tests skip, unless ``ARIG_REQUIRE_RAY=1`` (CI's Ray step), where a missing Ray fails
them.  The cluster is small (2 CPUs: CI's machine), started by the first test that needs it and shut
down when the process exits; each test deletes its application, which stops its replicas.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # examples/ is not installed: it is imported from the checkout


#: Ray's own deprecation warnings (of pydantic, of its APIs) are not arig's: the suite's "error" filter spares them.
RAY_WARNINGS = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::PendingDeprecationWarning", "ignore::ResourceWarning")


def require_ray() -> None:
    """Skip the calling test module where Ray Serve or httpx is missing (fail instead with ARIG_REQUIRE_RAY=1)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # raised by Ray's imports, under the suite's "error" filter
        if os.environ.get("ARIG_REQUIRE_RAY") == "1":
            import httpx  # noqa: F401 - an ImportError here fails the module, as the Ray step wants
            import ray.serve  # noqa: F401
        else:
            pytest.importorskip("ray.serve")
            pytest.importorskip("httpx")


_url: list[str] = []


def _shutdown() -> None:
    import ray
    from ray import serve

    with contextlib.suppress(Exception):
        serve.shutdown()
    ray.shutdown()


def cluster() -> str:
    """The application's base URL on this process's local cluster (started on first use)."""
    if not _url:
        from examples.ray_serve.loadtest import start_cluster

        atexit.register(_shutdown)
        _url.append(start_cluster(num_cpus=2))
    return _url[0]


#: Fast enough to see a replacement within a test: a health check a second, short shutdowns.
FAST = {"health_check_period_s": 1.0, "health_check_timeout_s": 10.0, "graceful_shutdown_timeout_s": 10.0,
        "ray_actor_options": {"num_cpus": 0.5, "num_gpus": 0}}


@contextlib.contextmanager
def deployed(tmp_path: Path, replicas: int = 2, **cfg: Any) -> Iterator[tuple[str, Path]]:
    """The example deployed (host device, ``cfg`` on top), its URL and its replicas' report directory; deleted after."""
    from ray import serve

    from examples.ray_serve.loadtest import deploy
    from examples.ray_serve.replica import ReplicaConfig

    reports = tmp_path / "reports"
    reports.mkdir()
    url = cluster()
    deploy(ReplicaConfig(device="host", report_dir=str(reports), **cfg), num_replicas=replicas, **FAST)
    try:
        yield url, reports
    finally:
        serve.delete("arig")
