"""Each kind of device, opened over what this machine has: the host device, the CUDA device over
``arig.testing.FakeCuda`` and the NV device over ``arig.testing.FakeNvrm``.  ``installed(kind)``
installs the fake (and checks, on the way out, that it saw no misuse) and gives the opener."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

import arig
import arig._engine
import arig.cuda
import arig.host
import arig.nvrm
from arig.testing import FakeCuda, FakeNvrm

KINDS = ["host", "cuda", "nv"]


@contextlib.contextmanager
def installed(kind: str) -> Iterator[Any]:
    """The opener of a ``kind`` device, with its fake driver installed while the block runs."""
    if kind == "host":
        yield arig.host.cpu(queues=2)
        return
    if kind == "nv" and not arig._engine.choose().native:
        pytest.skip(f"the NV device runs on the native core only, not on: {arig._engine.choose().why}")
    fake: FakeCuda | FakeNvrm = FakeCuda() if kind == "cuda" else FakeNvrm()
    with fake.installed():
        yield arig.cuda.gpu(0) if kind == "cuda" else arig.nvrm.gpu(0)
    assert fake.violations == []


@contextlib.contextmanager
def openers(kinds: tuple[str, ...]) -> Iterator[list[Any]]:
    """One opener per kind in ``kinds``, each fake installed once (two CUDA devices open on one fake
    GPU 0), checked on the way out."""
    if "nv" in kinds and not arig._engine.choose().native:
        pytest.skip(f"the NV device runs on the native core only, not on: {arig._engine.choose().why}")
    with contextlib.ExitStack() as stack:
        fakes: list[Any] = []
        if "cuda" in kinds:
            fakes.append(stack.enter_context(FakeCuda().installed()))
        if "nv" in kinds:
            fakes.append(stack.enter_context(FakeNvrm().installed()))
        make = {"host": lambda: arig.host.cpu(queues=2), "cuda": lambda: arig.cuda.gpu(0), "nv": lambda: arig.nvrm.gpu(0)}
        yield [make[k]() for k in kinds]
        for fake in fakes:
            assert fake.violations == []
