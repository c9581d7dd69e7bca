"""arig.nvrm against a machine laid out in a temporary directory.

The PCI tree is a directory shaped like /sys/bus/pci, and the kernel driver
is a fake standing in for arig.nvrm._fd.driver (the one object every driver
call goes through), so listing, the power check, the process's RM client and its
reuse are all tested without a GPU.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import arig._native
import arig.nvrm as nvrm
from arig._errors import ArigError, OpenError
from arig.nvrm import _fd, _rm, _sysfs
from arig.nvrm import _params as P
from arig.testing import FakeNvrm

H200 = "0000:00:06.0"


def add_function(root: Path, name: str, vendor: int = 0x10DE, pci_class: int = 0x030200,
                 status: str = "active") -> Path:
    """A PCI function directory the way sysfs writes one."""
    d = root / "devices" / name
    (d / "power").mkdir(parents=True)
    (d / "vendor").write_text(f"0x{vendor:04x}\n")
    (d / "class").write_text(f"0x{pci_class:06x}\n")
    (d / "device").write_text("0x2335\n")
    (d / "power" / "runtime_status").write_text(status + "\n")
    return d


@pytest.fixture(autouse=True)
def fresh_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts without a process client and leaves none behind."""
    monkeypatch.setattr(_rm, "_process", None)
    monkeypatch.setattr(_rm, "_aside", [])


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One active H200 and an empty /dev: the driver is not loaded."""
    sys_root = tmp_path / "sys"
    add_function(sys_root, H200)
    add_function(sys_root, "0000:00:01.0", vendor=0x8086, pci_class=0x060000)
    (tmp_path / "dev").mkdir()
    monkeypatch.setattr(_fd, "driver", _fd.Driver(str(tmp_path / "dev"), str(sys_root)))
    return sys_root


# --- listing ---------------------------------------------------------------


def test_buses_in_numeric_bus_order(tmp_path: Path) -> None:
    for name in ["0001:00:00.0", "0000:0a:00.0", "0000:09:00.0", "0000:09:00.1",
                 "0000:81:00.0", "0000:10:00.0"]:
        add_function(tmp_path, name, pci_class=0x030000 if "81" in name else 0x030200)
    assert _sysfs.buses(str(tmp_path)) == ["0000:09:00.0", "0000:09:00.1", "0000:0a:00.0",
                                           "0000:10:00.0", "0000:81:00.0", "0001:00:00.0"]


def test_buses_leave_out_other_functions(tmp_path: Path) -> None:
    add_function(tmp_path, "0000:00:06.0")
    add_function(tmp_path, "0000:00:06.1", pci_class=0x040300)  # the GPU's HDMI audio
    add_function(tmp_path, "0000:00:02.0", vendor=0x1002, pci_class=0x030000)  # AMD VGA
    add_function(tmp_path, "0000:00:1f.0", vendor=0x8086, pci_class=0x060100)
    (tmp_path / "devices" / "not-a-pci-name").mkdir()
    assert _sysfs.buses(str(tmp_path)) == ["0000:00:06.0"]


def test_unreadable_function_is_left_out(tmp_path: Path) -> None:
    add_function(tmp_path, "0000:00:05.0")
    broken = add_function(tmp_path, "0000:00:04.0")
    (broken / "vendor").unlink()
    (broken / "vendor").mkdir()  # reading it fails even as root
    garbled = add_function(tmp_path, "0000:00:03.0")
    (garbled / "class").write_text("not hex\n")
    gone = tmp_path / "devices" / "0000:00:02.0"
    gone.mkdir()  # being removed: no files left
    assert _sysfs.buses(str(tmp_path)) == ["0000:00:05.0"]


def test_missing_tree_is_empty(tmp_path: Path) -> None:
    assert _sysfs.buses(str(tmp_path / "nowhere")) == []
    assert _sysfs.buses(str(tmp_path)) == []  # root without devices/


def test_unlistable_tree_is_an_arig_error(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    add_function(tmp_path, H200)

    def no_files(path: str) -> list[str]:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), path)

    monkeypatch.setattr(os, "listdir", no_files)
    with pytest.raises(P.DriverError, match="cannot list the PCI functions") as caught:
        _sysfs.buses(str(tmp_path))
    assert caught.value.errno == errno.EMFILE
    assert isinstance(caught.value, ArigError)


def test_public_buses_and_count(machine: Path) -> None:
    add_function(machine, "0000:00:07.0")
    assert nvrm.buses() == [H200, "0000:00:07.0"]
    assert nvrm.count() == 2


# --- power state -----------------------------------------------------------


def test_runtime_status(tmp_path: Path) -> None:
    add_function(tmp_path, H200)
    add_function(tmp_path, "0000:00:07.0", status="suspended")
    assert _sysfs.runtime_status(H200, str(tmp_path)) == "active"
    _sysfs.require_active(H200, str(tmp_path))
    with pytest.raises(P.DriverError, match="'suspended'"):
        _sysfs.require_active("0000:00:07.0", str(tmp_path))
    with pytest.raises(P.DriverError, match="power state"):
        _sysfs.require_active("0000:00:08.0", str(tmp_path))


def test_suspended_gpu_is_not_read(machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (machine / "devices" / H200 / "power" / "runtime_status").write_text("suspended\n")
    monkeypatch.setattr(_rm, "client", lambda: pytest.fail("the driver was asked"))
    for read in (nvrm.usage, nvrm.describe):
        with pytest.raises(P.DriverError, match="runtime_status"):
            read(0)


# --- without the driver ----------------------------------------------------


def test_missing_driver_is_an_arig_error(machine: Path) -> None:
    for read in (nvrm.usage, nvrm.describe):
        with pytest.raises(P.DriverError, match="nvidiactl") as caught:
            read(0)
        assert isinstance(caught.value, ArigError)
        assert caught.value.errno == errno.ENOENT
        assert isinstance(caught.value.__cause__, OSError)


def test_no_such_gpu(machine: Path) -> None:
    with pytest.raises(nvrm.NoGpuError, match="no GPU 1: this machine has 1 NVIDIA GPU$"):
        nvrm.usage(1)
    with pytest.raises(LookupError):
        nvrm.describe(3)


@pytest.mark.parametrize(("i", "window"), [(-1, 1.0), (0, 0.0), (0, -2.0),
                                           (0, float("nan")), ("0", 1.0), (0, "1")])
def test_usage_misuse(machine: Path, i: Any, window: Any) -> None:
    with pytest.raises(ValueError):
        nvrm.usage(i, window)


@pytest.mark.asyncio
async def test_usage_async_misuse_and_errors(machine: Path) -> None:
    with pytest.raises(ValueError):
        await nvrm.usage_async(0, window=float("nan"))
    with pytest.raises(ValueError):
        await nvrm.usage_async(-1)
    with pytest.raises(P.DriverError, match="nvidiactl"):
        await nvrm.usage_async(0)


# --- the opener ------------------------------------------------------------


def test_opener_names_and_misuse() -> None:
    assert (nvrm.gpu(0).name, nvrm.gpu(0).index) == ("NV", 0)
    assert (nvrm.gpu(3).name, nvrm.gpu(3).index) == ("NV:3", 3)
    for bad in (-1, "0", 1.5, None, True):
        with pytest.raises(ValueError):
            nvrm.gpu(bad)  # type: ignore[arg-type]


def test_opener_make_refuses_honestly(machine: Path) -> None:
    with pytest.raises(OpenError, match="no GPU 2: this machine has 1"):
        nvrm.gpu(2).make()
    # the fake machine has a PCI tree, but no driver to open (the pure engine refuses first: no native core)
    with pytest.raises(OpenError, match="nvidiactl" if arig._native.library() is not None else "native core"):
        nvrm.gpu(0).make()


# --- the process's client, against a fake kernel driver ---------------------


class FakeDriver(_fd.Driver):
    """Stands in for arig.nvrm._fd.driver: one H200 held by a 580 driver."""

    def __init__(self, release: str = "580.159.04", watchdog: int = 0x5) -> None:
        super().__init__("/nowhere")
        self.release, self.watchdog = release, watchdog
        self.cards = {H200: (0, 0x6)}  # bus -> (minor, gpu_id)
        self.fail_subdevice = False
        self.util_supported = True
        self.open_fds: set[int] = set()
        self.calls: Counter[str] = Counter()
        self.freed: list[int] = []
        self._next = [100, 0xCAF00000]
        self._lock = threading.Lock()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(_fd, "driver", self)

    def _new(self, which: int) -> int:
        with self._lock:
            self._next[which] += 1
            return self._next[which]

    def open_file(self, path: str) -> int:
        name = os.path.basename(path)
        if name not in ("nvidiactl", *(f"nvidia{m}" for m, _ in self.cards.values())):
            raise P.DriverError(f"cannot open {path}", errno.ENOENT)
        fd = self._new(0)
        with self._lock:
            self.calls["open " + name] += 1
            self.open_fds.add(fd)
        return fd

    def close(self, fd: int) -> None:
        with self._lock:
            self.open_fds.discard(fd)

    def ioctl(self, fd: int, nr: int, arg: Any, what: str) -> None:
        with self._lock:
            self.calls[f"ioctl {nr}"] += 1
        if nr == P.NV_ESC_CHECK_VERSION_STR:
            arg.versionString, arg.reply = self.release.encode(), 1
        elif nr == P.NV_ESC_CARD_INFO:
            for k, (bus, (minor, gpu_id)) in enumerate(self.cards.items()):
                domain, b, rest = bus.split(":")
                arg[k].valid, arg[k].minor_number, arg[k].gpu_id = 1, minor, gpu_id
                arg[k].pci_info.domain, arg[k].pci_info.bus = int(domain, 16), int(b, 16)
                arg[k].pci_info.slot = int(rest.split(".")[0], 16)

    def rm_alloc(self, ctl: int, client: int, parent: int, cls: int, params: Any,
                 what: str) -> int:
        with self._lock:
            self.calls[f"alloc 0x{cls:x}"] += 1
        if cls == P.NV20_SUBDEVICE_0 and self.fail_subdevice:
            raise P.RmError(what, 0x1B)
        return self._new(1)

    def rm_free(self, ctl: int, client: int, parent: int, obj: int, what: str = "") -> None:
        self.freed.append(obj)

    def rm_control(self, ctl: int, client: int, obj: int, cmd: int, params: Any, what: str = "") -> None:
        with self._lock:
            self.calls[f"control 0x{cmd:x}"] += 1
        if cmd == P.CTRL_GPU_GET_ID_INFO_V2:
            params.deviceInstance = 0
        elif cmd == P.CTRL_FB_GET_INFO_V2:
            kib = {P.FB_RAM_SIZE: 147_221_504, P.FB_HEAP_FREE: 146_591_680,
                   P.FB_BAR1_SIZE: 268_435_456}
            for k in range(params.fbInfoListSize):
                params.fbInfoList[k].data = kib.get(params.fbInfoList[k].index, 0)
        elif cmd == P.CTRL_PERF_UTIL_SAMPLES_V2:
            if not self.util_supported:
                raise P.RmError("util", 0x56)
            for k in range(10):
                params.samples[k].timeStamp = (10 + k) * 200_000_000
                params.samples[k].gr.util = 5000
        elif cmd == P.CTRL_GPU_GET_NAME_STRING:
            params.gpuNameString[:11] = list(b"NVIDIA H200")
        elif cmd == P.CTRL_MC_GET_ARCH_INFO:
            params.architecture, params.implementation = 0x180, 0
        elif cmd == P.CTRL_GPU_GET_GID_INFO:
            text = b"GPU-7cc9fa83-3b2e-3e5a-008a-f824f2af7a22\0"
            params.data[: len(text)], params.length = list(text), len(text)
        elif cmd == P.CTRL_RC_GET_WATCHDOG_INFO:
            params.watchdogStatusFlags = self.watchdog


@pytest.fixture
def driver(machine: Path, monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    fake = FakeDriver()
    fake.pci_root = str(machine)  # the machine fixture's PCI tree, read through the driver object
    fake.install(monkeypatch)
    return fake


def test_usage_reads_and_reuses_objects(driver: FakeDriver) -> None:
    for _ in range(50):
        u = nvrm.usage(0, window=1.0)
    assert u == nvrm.Usage(memory_total=147_221_504 * 1024,
                           memory_free=146_591_680 * 1024, busy=50.0)
    made = {k: v for k, v in driver.calls.items() if k.startswith(("open", "alloc"))}
    assert made == {"open nvidiactl": 1, "open nvidia0": 1, "alloc 0x41": 1,
                    "alloc 0x80": 1, "alloc 0x2080": 1}
    assert driver.calls[f"ioctl {P.NV_ESC_REGISTER_FD}"] == 1
    assert driver.calls[f"control 0x{P.CTRL_FB_GET_INFO_V2:x}"] == 50
    assert len(driver.open_fds) == 2


def test_first_use_from_many_threads_makes_one_client(driver: FakeDriver) -> None:
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: nvrm.usage(0), range(64)))
    assert all(r.busy == 50.0 for r in results)
    assert driver.calls["alloc 0x41"] == driver.calls["alloc 0x2080"] == 1
    assert driver.calls["open nvidia0"] == 1


def test_busy_is_none_where_the_rm_takes_no_samples(driver: FakeDriver) -> None:
    driver.util_supported = False
    assert nvrm.usage(0).busy is None


@pytest.mark.asyncio
async def test_usage_async_runs_in_a_thread(driver: FakeDriver,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    caller = threading.get_ident()
    seen: list[int] = []
    real = driver.rm_control

    def spy(*args: Any) -> None:
        seen.append(threading.get_ident())
        real(*args)

    monkeypatch.setattr(driver, "rm_control", spy)
    u = await nvrm.usage_async(0, window=0.5)
    assert u.busy == 50.0 and seen and caller not in seen


@pytest.mark.parametrize(("flags", "hang_ms"), [(0x5, 30_000), (0x6, None)])
def test_describe_facts(driver: FakeDriver, flags: int, hang_ms: int | None) -> None:
    driver.watchdog = flags
    facts = nvrm.describe(0)
    assert dict(facts) == {
        "name": "NVIDIA H200", "arch": "sm_90", "chip": "GH100",
        "uuid": "GPU-7cc9fa83-3b2e-3e5a-008a-f824f2af7a22", "bus": H200,
        "memory_total": 147_221_504 * 1024, "bar1_size": 256 * 2**30, "hang_ms": hang_ms}
    with pytest.raises(TypeError):
        facts["name"] = "x"  # type: ignore[index]


def test_unsupported_release_is_refused(driver: FakeDriver) -> None:
    driver.release = "535.183.01"
    for _ in range(2):  # refused again, not half-made
        with pytest.raises(P.DriverError, match=r"release 535\.183\.01.*580\.x"):
            nvrm.usage(0)
    assert driver.calls["alloc 0x41"] == 0
    assert driver.open_fds == set()


def test_gpu_the_driver_does_not_hold(driver: FakeDriver) -> None:
    driver.cards = {}
    with pytest.raises(P.DriverError, match="does not hold GPU 0000:00:06.0"):
        nvrm.usage(0)


def test_failed_gpu_objects_are_given_back(driver: FakeDriver) -> None:
    driver.fail_subdevice = True
    with pytest.raises(P.RmError, match="subdevice") as caught:
        nvrm.usage(0)
    assert caught.value.status_name == "NV_ERR_INSUFFICIENT_PERMISSIONS"
    assert len(driver.freed) == 1  # the device made before it
    assert len(driver.open_fds) == 1  # only nvidiactl: /dev/nvidia0 was closed
    driver.fail_subdevice = False
    assert nvrm.usage(0).busy == 50.0  # the next call tries again


def test_child_forgets_the_client_after_fork() -> None:
    r, w = os.pipe()
    child = _rm.Process(_fd.Driver())
    child.ctl, child.root, child.release = r, 0xC1, "580.159.04"
    child.files.append(r)
    _rm._process = child
    _rm._forget_in_child()
    assert _rm._process is None
    with pytest.raises(OSError):
        os.fstat(r)  # the inherited file was let go
    os.close(w)


def test_ioctl_shell_turns_os_errors_into_driver_errors(tmp_path: Path) -> None:
    with open(tmp_path / "plain", "w") as f:
        with pytest.raises(P.DriverError, match="card info") as caught:
            _fd.Driver().ioctl(f.fileno(), P.NV_ESC_CARD_INFO, P.CardInfoArray(), "card info")
    assert caught.value.errno == errno.ENOTTY
    with pytest.raises(P.DriverError, match="cannot open"):
        _fd.Driver(str(tmp_path)).open_ctl()
    assert ctypes.sizeof(P.UtilSamplesV2) > P.MAX_IOCTL_SIZE  # control params go by pointer


# --- one client for reading and for devices, through one driver seam -------


def test_reading_and_devices_share_one_client_and_one_device_object() -> None:
    fake = FakeNvrm()
    with fake.installed():
        nvrm.usage(0)
        reader = _rm.client()
        p = _rm.process()
        gpu = p.gpu(fake.buses[0])
        assert p is reader and gpu is p.rm_gpu(fake.buses[0]) and gpu.ready
        classes = Counter(fake.live().values())
        assert classes[hex(P.NV01_ROOT_CLIENT)] == 1 and classes[hex(P.NV01_DEVICE_0)] == 1
        assert dict(nvrm.describe(0)) == {k: v for k, v in gpu.facts.items() if k != "driver"}
    assert fake.violations == []


def test_the_fake_swaps_only_the_driver_object() -> None:
    real_driver, real_root = _fd.driver, _sysfs.ROOT
    fake = FakeNvrm()
    with fake.installed():
        assert isinstance(_fd.driver, _fd.Driver) and _fd.driver is not real_driver
        assert _fd.driver.pci_root != real_driver.pci_root and real_root == _sysfs.ROOT  # the tree is the driver's
        assert nvrm.buses() == fake.buses
    assert (_fd.driver, _sysfs.ROOT) == (real_driver, real_root) and real_driver.pci_root == _fd.PCI_ROOT
    assert _rm._process is None  # what the fake's driver made is freed and forgotten


def test_a_failed_device_stage_is_undone_and_the_client_stays(driver: FakeDriver) -> None:
    assert nvrm.usage(0).busy == 50.0
    for _ in range(2):  # no /dev/nvidia-uvm here: refused each time, the reading client untouched
        with pytest.raises(P.DriverError, match="nvidia-uvm"):
            _rm.process()
    assert nvrm.usage(0).busy == 50.0
    assert driver.calls["alloc 0x41"] == 1 and driver.calls["open nvidiactl"] == 1
    assert len(driver.open_fds) == 2  # nvidiactl and nvidia0: nothing the failed stage opened is left


def test_a_client_is_set_aside_while_another_driver_is_installed(driver: FakeDriver) -> None:
    mine = _rm.client()
    with FakeNvrm().installed() as fake:
        assert _rm.client() is not mine and _rm.client().d is fake.driver
    assert _rm.client() is mine  # the same client, not a second one made
    assert driver.calls["alloc 0x41"] == 1
