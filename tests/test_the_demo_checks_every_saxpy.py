"""``python -m arig demo``: every saxpy's result is checked against numpy, element by element, as
``np.allclose(out, a * x + y, rtol=1e-5, atol=1e-5)`` would, through arrays made once per task; a
device that computes one element wrong, or NaN, is caught at that element, on the host device and
by the check itself."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arig
from arig._cli import demo
from arig._cli.demo import _Check


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300), scale=st.sampled_from([0.0, 1e-7, 1e-6, 1e-5, 3e-5, 1e-3]))
def test_the_check_agrees_with_allclose(seed: int, n: int, scale: float) -> None:
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    a = np.float32(rng.uniform(-2, 2))
    want = y + a * x
    out = (want + rng.standard_normal(n).astype(np.float32) * np.float32(scale)).astype(np.float32)
    got = _Check(n)(a, x, y, out)
    diff, tol = np.abs(out.astype(np.float64) - want), 1e-5 + 1e-5 * np.abs(want.astype(np.float64))
    far, near = diff > tol * (1 + 1e-3), diff <= tol * (1 - 1e-3)  # clear of the boundary, where float32 and float64 may differ
    if far.any():
        assert got is not None and not near[got], "a wrong element is found, and it is one"
    elif near.all():
        assert got is None and np.allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad", [0, 2047, 4095])
@pytest.mark.parametrize("value", [np.nan, 1e-3])
def test_one_wrong_element_is_found_where_it_is(bad: int, value: float) -> None:
    rng = np.random.default_rng(bad)
    x, y = rng.standard_normal(4096).astype(np.float32), rng.standard_normal(4096).astype(np.float32)
    a = np.float32(0.75)
    out = y + a * x
    check = _Check(4096)
    assert check(a, x, y, out) is None
    out[bad] = np.float32(value) if np.isnan(value) else out[bad] + np.float32(value)
    assert check(a, x, y, out) == bad


@pytest.mark.asyncio
async def test_the_demo_catches_a_device_that_computes_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    real = demo.saxpy_for
    calls = [0]

    async def off_once(dev: arig.Device) -> Any:
        saxpy = await real(dev)

        async def sometimes_wrong(a: float, bx: arig.Buffer, by: arig.Buffer, n: int) -> int:
            calls[0] += 1
            return await saxpy(a + (1e-3 if calls[0] == 5 else 0.0), bx, by, n)  # the fifth saxpy is off

        return sometimes_wrong

    monkeypatch.setattr(demo, "saxpy_for", off_once)
    with pytest.raises(demo.WrongResult, match="differs from numpy"):
        await demo.run_demo(arig.host.cpu(), tasks=1, iters=8, n=512, progress=False)
    assert calls[0] == 5


@pytest.mark.asyncio
async def test_the_demo_verifies_every_saxpy_on_the_host() -> None:
    r = await demo.run_demo(arig.host.cpu(), tasks=3, iters=7, n=257, progress=False)
    assert r["saxpys"] == 21 and r["device"] == "HOST"
