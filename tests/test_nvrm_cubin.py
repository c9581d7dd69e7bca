"""The cubin parser of the NV device (arig.nvrm._cubin), on cubins nvcc 13.0 built from sources in
this repository (tests/data/nv/build.sh; arig/kernels), checked against ptxas's own report and
against the kernels' C signatures."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from arig.nvrm._cubin import CubinError, parse

DATA = Path(__file__).resolve().parent / "data" / "nv"
REPO = Path(__file__).resolve().parent.parent
PROBE = (DATA / "probe.sm_90.cubin").read_bytes()
#: sm_90 keeps 1 KiB of shared memory for the system in every block that has any.
RESERVED_SMEM = 1024


def _ptxas() -> dict[str, dict[str, int]]:
    """ptxas -v's report, kernel by kernel: registers, stack frame, smem, barriers."""
    text = (DATA / "probe.sm_90.ptxas.txt").read_text()
    out: dict[str, dict[str, int]] = {}
    for name, body in re.findall(r"Compiling entry function '(\w+)' for 'sm_90'\n(.*?)(?=Compile time)", text, re.S):
        smem = re.search(r"(\d+) bytes smem", body)
        out[name] = {
            "registers": int(re.search(r"Used (\d+) registers", body)[1]),  # type: ignore[index]
            "frame": int(re.search(r"(\d+) bytes stack frame", body)[1]),  # type: ignore[index]
            "barriers": int(re.search(r"used (\d+) barriers", body)[1]),  # type: ignore[index]
            "smem": int(smem[1]) if smem else 0,
        }
    return out


def test_resources_are_those_ptxas_reported() -> None:
    cubin = parse(PROBE)
    report = _ptxas()
    assert cubin.sm == 90
    assert set(cubin.kernels) == set(report) == {"axpy", "tile", "deep"}
    for name, r in report.items():
        k = cubin.kernels[name]
        assert (k.registers, k.frame, k.barriers) == (r["registers"], r["frame"], r["barriers"]), name
        assert k.shared == (r["smem"] + RESERVED_SMEM if r["smem"] else 0), name
    assert cubin.kernels["deep"].stack >= cubin.kernels["deep"].frame > 0, "the local array lives on the stack"


def test_parameters_follow_the_c_signatures() -> None:
    k = parse(PROBE).kernels
    # axpy(float a, const float *x, float *y, int n)
    assert k["axpy"].params == ((0, 4), (8, 8), (16, 8), (24, 4))
    # tile(const float *in, float *out, int n)
    assert k["tile"].params == ((0, 8), (8, 8), (16, 4))
    # deep(int *out, const int *in, char c, double d, unsigned long long u)
    assert k["deep"].params == ((0, 8), (8, 8), (16, 1), (24, 8), (32, 8))
    for kernel in k.values():
        last = kernel.params[-1]
        assert kernel.param_base == 0x210, "sm_90 puts the parameters at 0x210 in constant bank 0"
        assert kernel.param_size == last[0] + last[1]
        assert len(kernel.cbank0) == kernel.param_base + kernel.param_size


def test_code_and_exits() -> None:
    for kernel in parse(PROBE).kernels.values():
        assert kernel.text and len(kernel.text) % 128 == 0
        assert kernel.exits and all(0 <= e < len(kernel.text) and e % 16 == 0 for e in kernel.exits), kernel.exits
        assert kernel.relocations == ()  # these kernels name no global symbol


def test_the_shipped_kernels() -> None:
    k = parse((REPO / "arig" / "kernels" / "kernels.cubin").read_bytes()).kernels
    assert {"saxpy", "empty", "spin", "store", "step", "illegal", "trap"} <= set(k)
    assert k["saxpy"].params == ((0, 4), (8, 8), (16, 8), (24, 4))
    assert k["store"].params == ((0, 8), (8, 4), (16, 8))
    assert k["empty"].params == () and k["empty"].param_size == 0


@pytest.mark.parametrize(
    "bad, match",
    [
        (b"", "not an ELF"),
        (b"\x7fELF" + b"\0" * 60, "little-endian 64-bit"),
        (PROBE[: len(PROBE) // 2], "cut short|past the end"),
        (PROBE[:0x12] + struct.pack("<H", 62) + PROBE[0x14:], "machine 62"),
    ],
)
def test_bad_input_is_refused_naming_why(bad: bytes, match: str) -> None:
    with pytest.raises(CubinError, match=match) as caught:
        parse(bad)
    assert isinstance(caught.value, ValueError)
