"""``nvrm.usage`` windows: what cannot be a window (not a number, not positive, too long to
count in nanoseconds) is refused by name before the GPU is asked; infinity means every sample."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arig
from arig import nvrm

@settings(max_examples=100, deadline=None)
@given(
    window=st.one_of(
        st.floats(max_value=0.0), st.just(math.nan), st.just(-math.inf), st.floats(min_value=1e300, allow_infinity=False),
        st.integers(max_value=0), st.integers(min_value=10**310), st.text(max_size=3), st.none(), st.booleans(), st.builds(object),
    )
)
def test_what_cannot_be_a_window_is_refused_before_the_driver(window: Any) -> None:
    original = nvrm._active_bus
    nvrm._active_bus = lambda i: pytest.fail("the GPU was asked")
    try:
        with pytest.raises(arig.ArigValueError):
            nvrm.usage(0, window)
    finally:
        nvrm._active_bus = original


@pytest.mark.parametrize("window", [1e300, 1.7976931348623157e308, 10**400], ids=["1e300", "max", "int"])
def test_a_huge_finite_window_is_refused_by_name_before_the_driver(window: float, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvrm, "_active_bus", lambda i: pytest.fail("the GPU was asked"))
    with pytest.raises(arig.ArigValueError, match="window .* too long"):
        nvrm.usage(0, window)


@pytest.mark.asyncio
async def test_a_huge_window_is_refused_by_usage_async_too() -> None:
    with pytest.raises(arig.ArigValueError, match="window"):
        await nvrm.usage_async(0, window=1e300)


def test_an_infinite_window_still_means_every_sample() -> None:
    assert nvrm._check_window(float("inf")) == float("inf")
    assert nvrm._check_window(1e299) == 1e299
