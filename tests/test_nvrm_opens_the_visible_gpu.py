"""``arig.nvrm.gpu(i)`` opens the ith GPU that ``CUDA_VISIBLE_DEVICES`` makes visible, read as CUDA reads it.

The rules over a list of UUIDs (no driver), then over ``FakeNvrm`` with
three GPUs of their own UUIDs: ``visible()``, the device each index opens,
the refusals, and ``python -m arig info`` showing both numberings.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import pytest

import arig
import arig._native
import arig.nvrm as nvrm
from arig._cli import info
from arig._errors import ArigValueError, OpenError
from arig.nvrm._visible import ENV, parse
from arig.testing import FakeNvrm

UUIDS = ["GPU-11111111-aaaa-bbbb-cccc-000000000000", "GPU-22222222-aaaa-bbbb-cccc-000000000000", "GPU-2233dddd-aaaa-bbbb-cccc-000000000000"]


def _parse(setting: str | None, asked: list[int] | None = None) -> tuple[tuple[int, ...], str | None]:
    def uuid_of(i: int) -> str | None:
        if asked is not None:
            asked.append(i)
        return UUIDS[i]

    seen = parse(setting, len(UUIDS), uuid_of)
    return seen.physical, seen.cut


@pytest.mark.parametrize(("setting", "physical"), [
    (None, (0, 1, 2)), ("", ()), ("  ", ()), ("2", (2,)), ("2,0", (2, 0)), (" 1 , 2 ", (1, 2)),
    (UUIDS[2], (2,)), ("GPU-1111", (0,)), ("gpu-2233", (2,)), (f"1,{UUIDS[0]}", (1, 0)),
])
def test_indexes_and_uuids_name_gpus_in_the_listed_order(setting: str | None, physical: tuple[int, ...]) -> None:
    assert _parse(setting) == (physical, None)


@pytest.mark.parametrize(("setting", "physical", "why"), [
    ("0,3,1", (0,), "entry 2, '3', this machine has no GPU 3"),
    ("1,-1,0", (1,), "entry 2, '-1', is neither"),
    ("GPU-22,0", (), "entry 1, 'GPU-22', matches the UUIDs of GPUs [1, 2]"),
    ("2,GPU-ffff", (2,), "entry 2, 'GPU-ffff', matches no GPU's UUID"),
    ("0,0,1", (0,), "entry 2, '0', repeats GPU 0"),
    ("1,,2", (1,), "entry 2, '', is neither"),
    ("GPU-", (), "entry 1, 'GPU-', is neither"),
    ("cuda0", (), "is neither a GPU index nor GPU-<uuid>"),
])
def test_an_entry_that_names_no_gpu_ends_the_list_as_cuda_does(setting: str, physical: tuple[int, ...], why: str) -> None:
    got, cut = _parse(setting)
    assert got == physical
    assert cut is not None and why in cut and "ignored, as CUDA does" in cut


def test_uuids_are_asked_only_for_a_uuid_entry_and_once() -> None:
    asked: list[int] = []
    _parse("2,0,1", asked)
    assert asked == []
    _parse("GPU-2233,GPU-1111", asked)
    assert asked == [0, 1, 2]


def test_a_mig_instance_is_refused_by_name() -> None:
    with pytest.raises(ArigValueError, match="MIG instance 'MIG-0a1b'.*whole GPUs"):
        _parse("0,MIG-0a1b")
    assert _parse("0,1x,MIG-0a1b") == ((0,), _parse("0,1x")[1])  # after the list ended, nothing more is read


# -- over the fake driver ---------------------------------------------------------------------


@pytest.fixture
def three() -> Iterator[FakeNvrm]:
    fake = FakeNvrm(3, uuids=UUIDS)
    with fake.installed():
        yield fake
    assert fake.violations == []


def test_visible_maps_the_variable_to_physical_indexes(three: FakeNvrm, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert nvrm.visible() == [0, 1, 2] and nvrm.buses() == three.buses
    for setting, physical in (("2,1", [2, 1]), (f"{UUIDS[1]},0", [1, 0]), ("GPU-2233", [2]), ("", []), ("1,9,0", [1])):
        monkeypatch.setenv(ENV, setting)
        assert nvrm.visible() == physical, setting
    assert nvrm.count() == 3  # count, usage and describe stay physical, as nvidia-smi's
    assert nvrm.describe(0)["uuid"] == UUIDS[0]


def _opened(index: int) -> tuple[str, str, str]:
    async def main() -> tuple[str, str, str]:
        async with await arig.open(nvrm.gpu(index)) as dev:
            return dev.name, str(dev.facts["bus"]), str(dev.facts["uuid"])

    return asyncio.run(main())


@pytest.fixture
def native() -> None:
    if arig._native.library() is None:
        pytest.skip(f"the NV device needs the native core, not in use here: {arig._native.status()}")


@pytest.mark.usefixtures("native")
def test_the_device_opens_the_visible_gpu(three: FakeNvrm, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, f"2,{UUIDS[0][:12]}")
    assert _opened(0) == ("NV", three.buses[2], UUIDS[2])
    assert _opened(1) == ("NV:1", three.buses[0], UUIDS[0])
    monkeypatch.delenv(ENV)
    assert _opened(1) == ("NV:1", three.buses[1], UUIDS[1])


@pytest.mark.parametrize(("setting", "message"), [
    ("", "no GPU 0: CUDA_VISIBLE_DEVICES='' makes 0 of this machine's 3 NVIDIA GPUs visible$"),
    ("GPU-dead", r"no GPU 0: CUDA_VISIBLE_DEVICES='GPU-dead' makes 0 of this machine's 3 NVIDIA GPUs visible \(entry 1, 'GPU-dead', matches no GPU's UUID"),
    ("1,7", r"no GPU 1: .* makes 1 of this machine's 3 NVIDIA GPUs visible \(entry 2, '7', this machine has no GPU 7"),
    ("MIG-4f2c", "cannot open NV.*MIG instance 'MIG-4f2c'"),
])
def test_an_open_beyond_the_visible_gpus_is_refused_saying_why(three: FakeNvrm, monkeypatch: pytest.MonkeyPatch, setting: str, message: str) -> None:
    monkeypatch.setenv(ENV, setting)
    index = 1 if setting == "1,7" else 0
    with pytest.raises(OpenError, match=message):
        nvrm.gpu(index).make()


def test_info_shows_the_visible_and_the_physical_numbering(three: FakeNvrm, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "2,0")
    rows = info._nv_rows()
    assert [(r["device"], r["visible_index"], r["physical_index"], r["bus"], r["uuid"]) for r in rows] == [
        ("NV", 0, 2, three.buses[2], UUIDS[2]),
        ("NV:1", 1, 0, three.buses[0], UUIDS[0]),
        ("NV (physical 1, not visible)", None, 1, three.buses[1], UUIDS[1]),
    ]
    assert all(r["visible_by"] == "CUDA_VISIBLE_DEVICES='2,0'" for r in rows)


def test_info_says_when_the_variable_is_refused(three: FakeNvrm, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "MIG-1")
    rows = info._nv_rows()
    assert len(rows) == 3 and all(r["visible_index"] is None and re.search("MIG instance", r["visible_by"]) for r in rows)


def test_a_gpu_whose_uuid_cannot_be_read_matches_no_uuid_and_the_message_says_so() -> None:
    seen = parse("GPU-2233,GPU-1111", 3, lambda i: None if i == 0 else UUIDS[i])
    assert seen.physical == (2,)
    assert seen.cut is not None and "entry 2, 'GPU-1111', matches no GPU's UUID (the UUIDs of GPUs [0] could not be read)" in seen.cut
