"""The README's NV example needs nothing from the checkout: arig's own kernels come with the
package (``arig.nvrm.shipped_image()``) and the arguments are packed and checked by arig
(``arig.nvrm.pack``, the rule ``arig.cuda.pack`` follows).  Run as printed over
``arig.testing.FakeNvrm``, from a directory that is not the repository."""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arig
import arig.cuda
import arig.nvrm
from arig import _launchspec
from arig.nvrm import _cubin
from arig.testing import FakeNvrm

README = Path(__file__).resolve().parent.parent / "README.md"
NV_EXAMPLE = next(b for b in re.findall(r"^```python\n(.*?)^```$", README.read_text(), flags=re.S | re.M) if "arig.nvrm.gpu(" in b)


def test_the_shipped_image_is_the_packaged_cubin_with_saxpy() -> None:
    image = arig.nvrm.shipped_image()
    assert image == (Path(arig.__file__).parent / "kernels" / "kernels.cubin").read_bytes()
    assert _cubin.parse(image).kernels["saxpy"].params == ((0, 4), (8, 8), (16, 8), (24, 4))


def test_pack_is_one_rule_for_both_gpus() -> None:
    assert arig.nvrm.pack is arig.cuda.pack is _launchspec.pack

    def Buf(address: int) -> arig.Buffer:
        return arig.Buffer("NV", "device", address, 64, lambda: None)

    assert arig.nvrm.pack(np.float32(3.0), Buf(0x1000), Buf(0x2000), np.int32(64)) == struct.pack("<f4xQQi", 3.0, 0x1000, 0x2000, 64)
    with pytest.raises(arig.ArigTypeError, match="has no fixed size"):
        arig.nvrm.pack(3.0)


def test_the_readme_nv_example_runs_over_the_fake_from_another_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    if not arig._engine.choose().native:
        pytest.skip(f"the NV device runs on the native core only: {arig._engine.choose().why}")
    assert "arig/kernels" not in NV_EXAMPLE and "struct.pack" not in NV_EXAMPLE
    fake = FakeNvrm()

    def saxpy(params: bytes, grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
        a, x, y, n = struct.unpack("<f4xQQi", params)
        n = min(n, grid[0] * block[0])
        ys = fake.array(y, np.float32, n)
        ys[:] = np.float32(a) * fake.array(x, np.float32, n) + ys

    fake.kernel("saxpy", saxpy)
    monkeypatch.chdir(tmp_path)
    with fake.installed():
        exec(compile(NV_EXAMPLE, "README.md (NV example)", "exec"), {"__name__": "__main__"})  # noqa: S102 - the README's own code
    assert fake.violations == []
    assert capsys.readouterr().out.strip() == "NV sm_90 [5. 5. 5. 5.]"
