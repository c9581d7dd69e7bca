"""Fixtures of the fake drivers for tests that open every kind of device: ``fake_cuda`` (FakeCuda, on
either engine) and ``fake_nv`` (FakeNvrm, skipped where the native core the NV device needs is not in
use).  Each checks on the way out that its fake saw no misuse."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import arig._native
from arig.testing import FakeCuda, FakeNvrm


@pytest.fixture
def fake_cuda() -> Iterator[FakeCuda]:
    fake = FakeCuda()
    with fake.installed():
        yield fake
    assert fake.violations == []


@pytest.fixture
def fake_nv() -> Iterator[FakeNvrm]:
    if arig._native.library() is None:
        pytest.skip(f"the NV device needs the native core, not in use here: {arig._native.status()}")
    fake = FakeNvrm()
    with fake.installed():
        yield fake
    assert fake.violations == []
