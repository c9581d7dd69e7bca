"""``arig.cuda.peers()``: which GPU reaches which other's memory directly (cuDeviceCanAccessPeer),
and ``python -m arig info``'s row of it; over the fake driver's GPUs."""

from __future__ import annotations

import pytest

import arig.cuda
from arig._cli import info
from arig.testing import FakeCuda
from arig.testing.fake_cuda import FakeGpu


def test_every_pair_of_three_gpus_with_one_that_reaches_none() -> None:
    gpus = [FakeGpu(bus="0000:01:00.0"), FakeGpu(bus="0000:02:00.0", peer_access=False), FakeGpu(bus="0000:03:00.0")]
    with FakeCuda(gpus=gpus).installed():
        assert arig.cuda.peers() == [[True, True, True], [False, True, False], [True, True, True]]


def test_one_gpu_and_none() -> None:
    with FakeCuda().installed():
        assert arig.cuda.peers() == [[True]]
    with FakeCuda(gpus=0).installed():
        assert arig.cuda.peers() == []


def test_info_shows_the_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    gpus = [FakeGpu(bus="0000:01:00.0"), FakeGpu(bus="0000:02:00.0", peer_access=False)]
    with FakeCuda(gpus=gpus).installed():
        assert info.main([]) == 0
    out = capsys.readouterr().out
    assert "CUDA peers" in out
    assert "CUDA           CUDA:1 yes" in out and "CUDA:1         CUDA no" in out
