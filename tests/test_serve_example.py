"""The example inference server (``examples/serve``) on the host device.

* the load test, over real HTTP against a server subprocess, for both
  servers: every answer checked against numpy, the device stopped at exit;
* back-pressure: with the batch held at a gate, requests beyond
  ``max_queue`` get 503 with Retry-After at once, the rest are answered;
* ``/healthz`` (200, then 503 once the device is lost), ``/metrics``, 400 on
  a bad body, and the device stopped when the app shuts down.

The in-process tests drive the app through httpx's ASGI transport and its
lifespan by hand, on the test's loop: no ports, no sleeps, bounded by
counts of loop iterations.  Skipped where starlette, uvicorn or httpx are
missing (``python3 -m pip install '.[examples]'`` installs them).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # examples/ is not installed: it is imported from the checkout

import arig  # noqa: E402
from examples.serve.app import ServeConfig, make_app  # noqa: E402
from examples.serve.host_runners import ArigHost  # noqa: E402
from examples.serve.model import ATOL, IN, RTOL, inputs, reference, weights  # noqa: E402
from examples.serve.server import precheck  # noqa: E402

X = inputs(32, seed=7)
EXPECTED = reference(weights(), X)


def _check(resp: Any, i: int) -> None:
    assert resp.status_code == 200, resp.text
    y = np.asarray(resp.json()["y"])
    np.testing.assert_allclose(y, EXPECTED[i], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("server", ["arig", "baseline"])
def test_loadtest_checks_every_answer_and_the_device_stops(server: str, tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    p = subprocess.run(
        [sys.executable, "-m", "examples.serve.loadtest", "--server", server, "--device", "host",
         "--requests", "300", "--concurrency", "16", "--warmup", "20", "--max-seconds", "60", "--startup-timeout", "30", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=110,
    )
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout[-3000:]}\nstderr:\n{p.stderr[-3000:]}"
    r = json.loads(out.read_text())
    assert (r["server"], r["device"]) == (server, "host")
    assert r["sent"] == r["ok"] == 300, r
    assert r["mismatches"] == r["errors"] == r["rejected"] == 0, r
    assert r["warmup"] == {"ok": 20, "mismatches": 0, "rejected": 0, "errors": 0}
    assert r["verified"] and r["passed"]
    assert r["server_exit"] == {"code": 0, "device_stopped": True, "lost": None}
    lat = r["latency_ms"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    assert r["requests_per_s"] > 0 and r["server_cpu_ms_per_request"] > 0
    assert r["healthz_after"] == 200
    m = r["server_metrics"]
    assert m["completions"] == 320 and m["rejected"] == 0 and m["server"] == server and m["lost"] is None
    assert 1 <= m["batches"] <= 320 and m["mean_batch"] >= 1
    assert r["tolerance"] == {"rtol": RTOL, "atol": ATOL}
    assert "300/300 verified" in p.stdout


class GatedRunner(ArigHost):
    """The arig host runner, but each batch waits at ``gate`` first: the test decides when batches run."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.rows_held = 0

    async def infer(self, x: np.ndarray) -> np.ndarray:
        self.rows_held += len(x)
        await self.gate.wait()
        self.rows_held -= len(x)
        return await super().infer(x)


async def _until(cond: Any, what: str, spins: int = 100_000) -> None:
    """Yield to the loop until ``cond()`` holds: bounded by iterations, not by time."""
    for _ in range(spins):
        if cond():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


def _client(app: Any) -> Any:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://serve.test")


@pytest.mark.asyncio
async def test_a_full_queue_answers_503_with_retry_after_and_the_rest_are_answered() -> None:
    runner = GatedRunner()
    cfg = ServeConfig(server="arig", device="host", max_batch=2, max_wait_ms=0.0, max_queue=3, max_inflight=1, retry_after_s=7)
    app = make_app(cfg, runner=runner)
    metrics, state = app.state.metrics, app.state.serving
    n = 20
    async with app.router.lifespan_context(app), _client(app) as c:
        tasks = [asyncio.create_task(c.post("/infer", json={"x": X[i].tolist()})) for i in range(n)]
        # Every request has been refused, is pending, or is in the batch held at the gate.
        await _until(lambda: metrics.rejected + state["batcher"].depth + runner.rows_held == n and runner.rows_held > 0, "all requests placed")
        m = (await c.get("/metrics")).json()
        assert m["queue_depth"] == state["batcher"].depth <= cfg.max_queue
        assert m["inflight_batches"] == 1 and m["rejected"] == metrics.rejected
        assert (await c.get("/healthz")).status_code == 200  # busy is not unhealthy
        runner.gate.set()
        resps = await asyncio.gather(*tasks)
        m = (await c.get("/metrics")).json()
    busy = [i for i, r in enumerate(resps) if r.status_code == 503]
    done = [i for i, r in enumerate(resps) if r.status_code == 200]
    assert len(busy) + len(done) == n
    # At most max_queue pending plus one batch of max_batch in flight were taken.
    assert 1 <= len(done) <= cfg.max_queue + cfg.max_batch * cfg.max_inflight
    assert len(busy) >= n - (cfg.max_queue + cfg.max_batch * cfg.max_inflight)
    for i in busy:
        assert resps[i].headers["retry-after"] == "7"
        assert "pending" in resps[i].json()["error"]
    for i in done:
        _check(resps[i], i)
    assert m["rejected"] == len(busy) and m["completions"] == len(done) and m["queue_depth"] == 0
    assert runner.stopped


@pytest.mark.asyncio
async def test_healthz_metrics_and_a_lost_device() -> None:
    app = make_app(ServeConfig(server="arig", device="host", max_wait_ms=0.0))
    runner = app.state.runner
    async with app.router.lifespan_context(app), _client(app) as c:
        h = await c.get("/healthz")
        assert h.status_code == 200 and h.json() == {"ok": True, "server": "arig", "device": "host"}
        for i in range(3):
            _check(await c.post("/infer", json={"x": X[i].tolist()}), i)
        bad = await c.post("/infer", json={"x": [1.0, 2.0]})
        assert bad.status_code == 400 and f"{IN} numbers" in bad.json()["error"]
        assert (await c.post("/infer", content=b"not json")).status_code == 400
        m = (await c.get("/metrics")).json()
        assert m["completions"] == 3 and m["errors"] == 2 and m["rejected"] == 0
        assert m["batches"] >= 1 and m["queue_depth"] == 0 and m["inflight_batches"] == 0
        assert 0 < m["latency_ms"]["p50"] <= m["latency_ms"]["p90"] <= m["latency_ms"]["p99"] and m["latency_ms"]["window"] == 3
        assert m["process_cpu_s"] > 0 and m["lost"] is None and m["server"] == "arig" and m["device"] == "host"
        assert m["config"]["max_queue"] == 1024

        def broken(queue: Any, arg: Any, v: int) -> None:
            raise RuntimeError("the test breaks the device")

        dev = runner.dev
        v = await dev.submit(broken)
        with pytest.raises(arig.DeviceLost):
            await dev.wait(v)
        h = await c.get("/healthz")
        assert h.status_code == 503 and h.json()["ok"] is False and "the test breaks the device" in h.json()["lost"]
        r = await c.post("/infer", json={"x": X[0].tolist()})
        assert r.status_code == 503 and "device lost" in r.json()["error"] and "retry-after" not in r.headers
        assert (await c.get("/metrics")).json()["lost"] is not None
    assert dev.stopped  # stopped at shutdown, lost or not


@pytest.mark.asyncio
@pytest.mark.parametrize("server", ["arig", "baseline"])
async def test_the_device_opens_at_startup_and_stops_at_shutdown(server: str) -> None:
    app = make_app(ServeConfig(server=server, device="host", max_wait_ms=0.0))
    runner = app.state.runner
    assert not runner.stopped
    async with app.router.lifespan_context(app), _client(app) as c:
        rs = await asyncio.gather(*(c.post("/infer", json={"x": X[i].tolist()}) for i in range(len(X))))
        for i, r in enumerate(rs):
            _check(r, i)
        assert (await c.get("/healthz")).status_code == 200
        assert not runner.stopped
    assert runner.stopped and runner.lost is None
    if server == "arig":
        with pytest.raises(arig.DeviceStopped):
            await runner.dev.submit(lambda q, a, v: None)


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="PyTorch is installed: the message for its absence cannot be seen")
def test_the_cuda_server_without_pytorch_says_so() -> None:
    with pytest.raises(RuntimeError, match="PyTorch"):
        precheck(ServeConfig(server="arig", device="cuda:0"))


# -- bad bodies over real HTTP: httpx against the server on uvicorn ---------------------------------

LIMIT = 100_000  # the server's --max-body-bytes in these tests


@pytest.fixture(scope="module")
def served() -> Any:
    """``python3 -m examples.serve`` (arig, host) on a socket this test bound: (its URL, its stderr so far)."""
    import signal
    import socket
    import tempfile
    import time

    with socket.socket() as sock, tempfile.TemporaryFile() as err:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "examples.serve", "--fd", str(sock.fileno()), "--server", "arig", "--device", "host",
             "--max-wait-ms", "0", "--max-body-bytes", str(LIMIT), "--loop", "asyncio"],
            cwd=ROOT, pass_fds=(sock.fileno(),), stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
        )  # fmt: skip

        def log() -> str:
            err.seek(0)
            return err.read().decode(errors="replace")

        try:
            deadline = time.monotonic() + 30
            while True:
                assert proc.poll() is None and time.monotonic() < deadline, f"the server did not start:\n{log()}"
                try:
                    if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.05)
            yield url, log
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(30)


def _post(url: str, body: bytes) -> Any:
    return httpx.post(url + "/infer", content=body, headers={"content-type": "application/json"}, timeout=30)


def _numbers(*xs: str) -> bytes:
    return ('{"x": [' + ", ".join(xs + ("0.5",) * (IN - len(xs))) + "]}").encode()


NON_FINITE = {"NaN": _numbers("NaN"), "Infinity": _numbers("Infinity"), "-Infinity": _numbers("-Infinity"),
              "1e400": _numbers("1e400"), "1e39 (inf in float32)": _numbers("1e39"), "10**400": _numbers("1" + "0" * 400),
              "nested 40k deep": b'{"x": ' + b"[" * 40_000 + b"]" * 40_000 + b"}",
              "null": b"null", "a list": b"[1, 2]", "no x": b'{"y": 1}'}  # fmt: skip


@pytest.mark.parametrize("body", list(NON_FINITE.values()), ids=list(NON_FINITE))
def test_bodies_that_parse_but_are_no_finite_input_answer_400_naming_the_problem(served: Any, body: bytes) -> None:
    url, log = served
    r = _post(url, body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert "finite" in error or "nested too deeply" in error or '{"x": [64 numbers]}' in error
    assert "Traceback" not in log()


def test_inputs_so_large_that_the_answer_overflows_answer_400(served: Any) -> None:
    url, log = served
    r = _post(url, _numbers(*["3e38"] * IN))
    assert r.status_code == 400 and "overflows float32" in r.json()["error"], r.text
    assert "Traceback" not in log()


def test_a_body_past_the_limit_is_413_announced_or_streamed(served: Any) -> None:
    url, log = served
    big = b'{"x": [' + b"0.5, " * (LIMIT // 5) + b"0.5]}"
    assert len(big) > LIMIT
    r = _post(url, big)
    assert r.status_code == 413 and f"({LIMIT} bytes)" in r.json()["error"], r.text

    def chunks() -> Any:  # no Content-Length: the server counts what arrives
        for i in range(0, len(big), 8192):
            yield big[i : i + 8192]

    r = httpx.post(url + "/infer", content=chunks(), timeout=30)
    assert r.status_code == 413 and f"({LIMIT} bytes)" in r.json()["error"], r.text
    assert _post(url, _numbers()).status_code == 200  # and the server goes on
    assert "Traceback" not in log()


def test_a_client_that_disconnects_mid_body_leaves_no_traceback(served: Any) -> None:
    import socket
    import time

    url, log = served
    host, port = url.removeprefix("http://").split(":")
    for _ in range(3):
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(b"POST /infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n" + b'{"x": [0.5, 0.5')
            time.sleep(0.1)  # the server is inside the body's read when the client goes
    r = httpx.get(url + "/healthz", timeout=10)
    assert r.status_code == 200
    time.sleep(0.2)
    text = log()
    assert "Exception in ASGI application" not in text and "Traceback" not in text and "ClientDisconnect" not in text, text


@pytest.mark.asyncio
async def test_a_large_body_is_parsed_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import examples.serve.body as body

    parsed_on: list[int] = []
    parse = body.parse_x

    def recording(data: bytes) -> Any:
        parsed_on.append(threading.get_ident())
        return parse(data)

    monkeypatch.setattr(body, "parse_x", recording)
    app = make_app(ServeConfig(server="arig", device="host", max_wait_ms=0.0))
    padded = b'{"pad": "' + b" " * (2 * body.PARSE_OFF_LOOP_BYTES) + b'", "x": ' + json.dumps(X[0].tolist()).encode() + b"}"
    async with app.router.lifespan_context(app), _client(app) as c:
        _check(await c.post("/infer", json={"x": X[1].tolist()}), 1)
        _check(await c.post("/infer", content=padded), 0)
    loop_thread = threading.get_ident()
    assert parsed_on[0] == loop_thread and parsed_on[1] != loop_thread
