"""Testing code built on arig with arig's pytest plugin: python -m pytest examples/test_with_arig.py"""

import numpy as np
import pytest

import arig
from arig.testing import faults


async def roundtrip(dev: arig.Device, data: np.ndarray) -> np.ndarray:  # the code under test
    buf = await dev.alloc(data.nbytes)
    try:
        await dev.upload(buf, data)
        out = np.empty_like(data)
        await dev.download(buf, out)
        return out
    finally:
        buf.close()  # the plugin fails a test that leaves a buffer open


@pytest.mark.asyncio
async def test_roundtrip(arig_device: arig.Device) -> None:  # once per device: host, cuda:0, ... (--arig-device)
    assert (await roundtrip(arig_device, np.arange(4.0))).tolist() == [0, 1, 2, 3]


@pytest.mark.asyncio
async def test_a_failure_reaches_the_caller(arig_host: arig.Device) -> None:
    faults.fail_next_fill(arig_host, RuntimeError("injected"))
    with pytest.raises(arig.DeviceLost, match="injected"):
        await roundtrip(arig_host, np.ones(4))


@pytest.mark.arig_gpu  # skipped where there is no GPU
@pytest.mark.anyio  # anyio's plugin works too (on its asyncio and trio backends)
async def test_on_a_gpu(arig_gpu: arig.Device) -> None:
    assert arig_gpu.arch.startswith("sm_")
