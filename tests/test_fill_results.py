"""What a fill returns: any integer zero (numpy's too) is success, a nonzero integer is a
``FillError`` with that code as an ``int``, anything else loses the device naming its type."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import arig
import arig.host


@pytest.mark.asyncio
@pytest.mark.parametrize("zero", [np.int32(0), np.int64(0), np.uint8(0), np.intc(0)], ids=lambda z: type(z).__name__)
async def test_a_numpy_zero_returned_by_a_fill_is_success(zero: Any) -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        v = await dev.run(lambda q, a, v: zero)
        assert dev.lost is None and dev.reached == v


@pytest.mark.asyncio
async def test_a_numpy_nonzero_code_is_a_fill_error_with_that_code() -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        with pytest.raises(arig.DeviceLost):
            await dev.run(lambda q, a, v: np.int32(700))
        assert isinstance(dev.lost, arig.FillError) and dev.lost.code == 700
        assert type(dev.lost.code) is int


@pytest.mark.asyncio
@pytest.mark.parametrize("result", [np.float32(0.0), np.bool_(False), True, 0.0, "0"], ids=repr)
async def test_a_result_that_is_not_an_int_names_its_type(result: Any) -> None:
    async with await arig.open(arig.host.cpu()) as dev:
        with pytest.raises(arig.DeviceLost):
            await dev.run(lambda q, a, v: result)
        assert isinstance(dev.lost, arig.ArigTypeError)
        assert type(result).__name__ in str(dev.lost)
