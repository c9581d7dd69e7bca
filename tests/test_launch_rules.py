"""Both GPUs take a launch's sizes and a compiled fill by one rule."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest

from arig import _launchspec
from arig.cuda import _launch as cuda_launch
from arig.cuda_abi import FILL
from arig.nvrm import _launch as nv_launch
from arig.nvrm import abi as nv_abi


def test_both_gpus_use_one_dims_rule() -> None:
    assert cuda_launch.dims is _launchspec.dims and nv_launch.dims is _launchspec.dims


@pytest.mark.parametrize("size", [(4, 2), (4,), (1, 1, 1, 1), 0, (0, 1, 1), (1, 1, 1 << 32), "abc", 1.5, True])
def test_sizes_other_than_an_int_or_three_ints_in_range_are_refused(size: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        _launchspec.dims(size, "grid")


def test_an_int_means_x_1_1_and_numpy_ints_are_ints() -> None:
    assert _launchspec.dims(np.int64(7), "grid") == (7, 1, 1)
    out = _launchspec.dims([2, np.int32(3), 4], "block")
    assert out == (2, 3, 4) and all(type(d) is int for d in out)


def test_a_compiled_fill_is_checked_once_for_both_gpus() -> None:
    assert nv_abi.fill_address is _launchspec.fill_address

    @FILL
    def good(q: Any, a: Any, v: int) -> int:
        return 0

    assert _launchspec.fill_address(good) == ctypes.cast(good, ctypes.c_void_p).value
    bad = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(lambda q: 0)
    with pytest.raises(TypeError, match="prototype"):
        _launchspec.fill_address(bad)
    with pytest.raises(ValueError, match="must not be 0"):
        _launchspec.fill_address(0)
    assert _launchspec.c_arg(None) == 0 and _launchspec.c_arg(0x1000) == 0x1000
    with pytest.raises(ValueError):
        _launchspec.c_arg(-1)
