"""Probe: open a compute channel on an NVIDIA GPU through the kernel driver alone and run axpy.

No libcuda: /dev/nvidiactl, /dev/nvidiaN and /dev/nvidia-uvm only, opened and
driven by arig.nvrm._rm's own functions (the process's client, the GPU's
objects, a channel, memory, the OS event fd), with the methods of
arig.nvrm._push and the QMD of arig.nvrm._qmd.  It submits by hand, so
it shows the driver path apart from the device's queues.

Every step prints one line, ``<step>: ok (x ms)`` or ``<step>: FAILED <why>``,
and the run stops at the first failure; everything made so far is freed in
reverse order either way (each undo prints ``undo <what>: ok|failed``).  A
failed step's message names the RM call that failed.  Every wait is bounded
(2 s per GPU wait, and a whole-run alarm).  With $OUT set the steps and
results go to $OUT/nv_probe.json as well.

Usage (GPU machine, repository root):
    python3 scripts/nv_probe.py [--gpu 0] [--n 100000] [--vamode 0] [--timeout 60]

It makes its own RM client (an ``_rm.Process`` of its own, not the process's
shared one), so it owns, and frees, every object it makes.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import select
import signal
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from arig.nvrm import _cubin, _rm, _rmobjects, _sysfs  # noqa: E402
from arig.nvrm import _exec_params as E  # noqa: E402
from arig.nvrm import _params as P  # noqa: E402
from arig.nvrm import _push as pb  # noqa: E402
from arig.nvrm import _qmd as q  # noqa: E402

CUBIN = ROOT / "tests" / "data" / "nv" / "probe.sm_90.cubin"
GPU_WAIT_S = 2.0
MAX_TPCS = 72  # GH100's full TPC count: local memory is sized for every TPC index the GPU may use


class StepFailed(Exception):
    """A step failed; the message is what the step line says after FAILED."""


class ProbeTimeout(Exception):
    """The whole-probe alarm went off."""


def _why(e: BaseException) -> str:
    if isinstance(e, StepFailed):
        return str(e)
    if isinstance(e, P.RmError):
        return f"{e.status_name} (0x{e.status:X}) in {e.op}"
    if isinstance(e, P.DriverError):
        return f"errno {e.errno} {os.strerror(e.errno) if e.errno else ''}: {e}"
    if isinstance(e, OSError):
        return f"errno {e.errno} {e.strerror}"
    return f"{type(e).__name__}: {e}"


def _read(m: _rm.Mem, offset: int, n: int) -> bytes:
    return ctypes.string_at(m.va + offset, n)


class Probe:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.steps: list[dict[str, Any]] = []
        self.undo: list[tuple[str, Callable[[], None]]] = []
        self.results: dict[str, Any] = {}

    # --- bookkeeping -----------------------------------------------------------------------

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        try:
            got = fn()
        except ProbeTimeout:
            raise
        except Exception as e:  # noqa: BLE001 - every failure is reported as the step's
            ms = (time.perf_counter() - t0) * 1e3
            why = _why(e)
            print(f"{name}: FAILED {why} ({ms:.1f} ms)", flush=True)
            self.steps.append({"step": name, "ok": False, "ms": round(ms, 3), "error": why})
            raise StepFailed(f"{name}: {why}") from e
        ms = (time.perf_counter() - t0) * 1e3
        extra = f" {got}" if isinstance(got, str) else ""
        print(f"{name}: ok ({ms:.1f} ms){extra}", flush=True)
        self.steps.append({"step": name, "ok": True, "ms": round(ms, 3), **({"info": got} if extra else {})})
        return got

    def defer(self, what: str, fn: Callable[[], None]) -> None:
        self.undo.append((what, fn))

    def cleanup(self) -> None:
        while self.undo:
            what, fn = self.undo.pop()
            try:
                fn()
                print(f"undo {what}: ok", flush=True)
                self.steps.append({"step": f"undo {what}", "ok": True})
            except Exception as e:  # noqa: BLE001 - keep freeing the rest
                print(f"undo {what}: failed {_why(e)}", flush=True)
                self.steps.append({"step": f"undo {what}", "ok": False, "error": _why(e)})

    def freed(self, what: str, free: Callable[[], list[str]]) -> None:
        """Defer ``free`` (an undo list's unwind); its failures fail the undo step."""

        def run() -> None:
            failures = free()
            if failures:
                raise StepFailed("; ".join(failures))

        self.defer(what, run)

    def mem(self, what: str, make: Callable[[], _rm.Mem]) -> _rm.Mem:
        m: _rm.Mem = self.step(what, make)
        self.freed(f"free {m.what}", m.free)
        return m

    # --- the run ----------------------------------------------------------------------------

    def run(self) -> None:
        a = self.args
        _rmobjects.VAMODE = a.vamode  # the one knob the run turns: the device object's VA mode
        p = self.p = _rm.Process()
        self.freed("free the RM client (root client, UVM files, reservation, ctl fd)", p.undo.unwind)

        def client() -> str:
            p.open_client()
            self.results["driver"] = p.release
            return f"driver {p.release}, root client 0x{p.root:08X}"

        self.step("RM client (nvidiactl, release, root client)", client)

        def devices() -> str:
            p.open_devices()
            assert p.va is not None
            return f"reservation {p.va.base:#x}+{p.va.size:#x}"

        self.step("UVM initialize + CPU=GPU address reservation", devices)
        buses = _sysfs.buses()
        if a.gpu >= len(buses):
            raise StepFailed(f"GPU {a.gpu} asked, the machine has {len(buses)}")
        bus = self.results["bus"] = buses[a.gpu]

        def rm_gpu() -> str:
            g = p.rm_gpu(bus)
            self.freed("free the GPU's objects", g.undo.unwind)
            return f"{bus} minor {g.minor} device 0x{g.device:08X} subdevice 0x{g.subdevice:08X}"

        self.step("GPU RM objects (card info, /dev/nvidiaN, device, subdevice)", rm_gpu)

        def device_objects() -> str:
            g = self.g = p.gpu(bus)
            self.results["classes"] = {"usermode": hex(g.usermode_cls), "gpfifo": hex(g.gpfifo_cls), "compute": hex(g.compute_cls)}
            return f"uuid {g.uuid.hex()} doorbell {g.doorbell:#x} vaspace 0x{g.vaspace:08X} {self.results['classes']}"

        self.step("GPU device objects (UUID, classes, UVM, virtual memory, usermode, VA space)", device_objects)
        g = self.g

        def channel() -> str:
            ch = self.ch = _rm.Channel(g)
            self.freed("free the channel group", ch.free)
            return f"tsg 0x{ch.tsg:08X} channel 0x{ch.channel:08X} token 0x{ch.token:x}"

        self.step("channel group + GPFIFO channel + compute object + UVM + schedule", channel)
        self.ring, self.userd_offset, self.entries, self.token = self.ch.ring, self.ch.userd_offset, self.ch.entries, self.ch.token

        def event() -> str:
            undo = _rm.Undo()
            ev = self.ev = g.os_event(undo)
            self.defer("close event fd", lambda: p.d.close(ev))
            self.freed("free OS event", undo.unwind)
            return f"fd {ev}"

        self.step("OS event fd", event)

        self.sem = self.mem("semaphore page (host memory, GPU-mapped)", lambda: g.host("semaphore", 4096))

        kernel = self.step("parse cubin", lambda: _cubin.parse(CUBIN.read_bytes()).kernels["axpy"])

        def no_relocations() -> None:
            if kernel.relocations:  # axpy's code is position-independent; a relocated kernel needs patching first
                raise StepFailed(f"axpy has {len(kernel.relocations)} relocations")

        self.step("axpy needs no relocation", no_relocations)
        n = a.n
        per_tpc = pb.local_bytes_per_tpc(q.local_bytes_per_thread(kernel))
        self.code = self.mem("code buffer (VRAM)", lambda: g.vram("code", len(kernel.text) + 256))
        self.args_buf = self.mem("argument buffer (VRAM)", lambda: g.vram("args", 64 * 1024))
        self.data = self.mem("data buffers x, y (VRAM)", lambda: g.vram("data", 2 * n * 4 + 4096))
        self.local = self.mem("local memory (VRAM)", lambda: g.vram("local", per_tpc * MAX_TPCS, cpu=False))
        self.cmd = self.mem("pushbuffer (VRAM)", lambda: g.vram("pushbuffer", _rm.PAGE_2M))

        rng = np.random.default_rng(1)
        x = rng.standard_normal(n, dtype=np.float32)
        y = rng.standard_normal(n, dtype=np.float32)
        alpha = np.float32(2.5)
        x_va, y_va = self.data.va, self.data.va + ((n * 4 + 4095) // 4096) * 4096

        def fill() -> str:
            self.code.write(0, kernel.text)
            self.data.write(x_va - self.data.va, x.tobytes())
            self.data.write(y_va - self.data.va, y.tobytes())
            back = np.frombuffer(_read(self.data, x_va - self.data.va, n * 4), dtype=np.float32)
            if not np.array_equal(back, x):
                raise StepFailed("BAR1 read-back of x differs from what was written")
            return f"{len(kernel.text)} B code, {n} floats each"

        self.step("write code and data through BAR1", fill)

        grid, block = (n + 255) // 256, 256
        params = struct.pack("<f4xQQi", float(alpha), x_va, y_va, n)

        def build() -> str:
            cb0 = q.cbank0(kernel, grid, block, params, shared_window=pb.SHARED_WINDOW, local_window=pb.LOCAL_WINDOW)
            qmd_off = -(-len(cb0) // 256) * 256
            self.qmd_va = self.args_buf.va + qmd_off
            fields = q.kernel_qmd(kernel, grid=grid, block=block, program_address=self.code.va,
                                  cbank0_address=self.args_buf.va, cbank0_size=len(cb0),
                                  release=q.Release(self.sem.va + 16, 0xA5A5))  # a QMD release too: does it land?
            self.args_buf.write(0, cb0)
            self.args_buf.write(qmd_off, q.pack(fields))
            return f"grid {grid} block {block} cb0 {len(cb0)} B, QMD at {self.qmd_va:#x}"

        self.step("constant bank 0 + QMD", build)

        self.put = 0
        self.cmd_off = 0

        def submit(push: pb.Push) -> None:
            data = push.data()
            if self.cmd_off + len(data) > self.cmd.size:
                self.cmd_off = 0
            seg = self.cmd.va + self.cmd_off
            self.cmd.write(self.cmd_off, data)
            self.cmd_off += -(-len(data) // 256) * 256
            self.ring.u64((self.put % self.entries) * 8).value = pb.gpfifo_entry(seg, len(push))
            self.put += 1
            self.ring.u32(self.userd_offset + E.USERD_GP_PUT).value = self.put % self.entries
            _ = self.ring.u32(self.userd_offset + E.USERD_GP_PUT).value  # read back: the WC writes are out
            ctypes.c_uint32.from_address(g.doorbell + E.USERMODE_NOTIFY_CHANNEL_PENDING).value = self.token

        def sem_value() -> int:
            return int(self.sem.u64(0).value)

        def state() -> str:
            get = self.ring.u32(self.userd_offset + E.USERD_GP_GET).value
            return f"GPGet={get} GPPut={self.put % self.entries} semaphore={sem_value()}"

        def poll(value: int) -> str:
            t0 = time.perf_counter()
            deadline = t0 + GPU_WAIT_S
            while sem_value() < value:
                if time.perf_counter() > deadline:
                    raise StepFailed(f"semaphore did not reach {value} in {GPU_WAIT_S} s ({state()})")
            return f"{(time.perf_counter() - t0) * 1e6:.0f} us after submit"

        def wait_event(value: int) -> str:
            # Done when the semaphore holds the value AND the fd has woken at least once: a release that
            # lands before select() must still wake the fd, else the fd path is not shown to work.
            t0 = time.perf_counter()
            deadline = t0 + GPU_WAIT_S
            wakes, woke_us = 0, -1.0
            while sem_value() < value or not wakes:
                left = deadline - time.perf_counter()
                if left <= 0:
                    landed = "landed" if sem_value() >= value else "did not land"
                    raise StepFailed(f"{wakes} wake(s) in {GPU_WAIT_S} s and the semaphore {landed} ({state()})")
                r, _, _ = select.select([self.ev], [], [], left)
                if r:
                    wakes += 1
                    woke_us = woke_us if woke_us >= 0 else (time.perf_counter() - t0) * 1e6
            return f"first wake {woke_us:.0f} us after submit, {wakes} wake(s)"

        def drain_event() -> None:
            select.select([self.ev], [], [], 0)  # poll clears a stale pending flag

        self.step("submit setup + host release 1", lambda: submit(
            pb.setup(g.compute_cls, None, local_address=self.local.va, local_per_tpc=per_tpc)
            .release(self.sem.va, 1).non_stall_interrupt()))
        self.results["release_poll"] = self.step("wait release 1 (poll)", lambda: poll(1))

        self.step("submit axpy + release 2", lambda: submit(pb.launch_and_signal(self.qmd_va, self.sem.va, 2)))
        self.results["kernel_poll"] = self.step("wait axpy (poll)", lambda: poll(2))

        def check() -> str:
            got = np.frombuffer(_read(self.data, y_va - self.data.va, n * 4), dtype=np.float32)
            want = alpha * x + y
            err = float(np.max(np.abs(got - want)))
            bad = int(np.count_nonzero(~np.isclose(got, want, rtol=1e-5, atol=1e-6)))
            self.results["axpy_max_abs_err"], self.results["axpy_bad"] = err, bad
            if bad:
                raise StepFailed(f"{bad}/{n} wrong, max abs err {err:g}, first y {got[:4].tolist()} want {want[:4].tolist()}")
            return f"{n}/{n} right, max abs err {err:g}"

        self.step("check axpy against numpy", check)
        qmd_rel = int(self.sem.u64(16).value)
        self.results["qmd_release_seen"] = qmd_rel == 0xA5A5
        print(f"info: QMD RELEASE_SEMAPHORE0 {'landed' if qmd_rel == 0xA5A5 else f'did not land (0x{qmd_rel:x})'}", flush=True)

        self.step("drain stale event", drain_event)
        self.step("submit host release 3 + interrupt", lambda: submit(pb.Push().release(self.sem.va, 3).non_stall_interrupt()))
        self.results["release_event"] = self.step("wait release 3 (event fd)", lambda: wait_event(3))

        y1 = alpha * x + y  # what y holds now; a second axpy computes alpha*x + y1
        self.step("drain stale event 2", drain_event)
        self.step("submit axpy + release 4", lambda: submit(pb.launch_and_signal(self.qmd_va, self.sem.va, 4)))
        self.results["kernel_event"] = self.step("wait axpy (event fd)", lambda: wait_event(4))

        def check2() -> str:
            got = np.frombuffer(_read(self.data, y_va - self.data.va, n * 4), dtype=np.float32)
            want = alpha * x + y1
            bad = int(np.count_nonzero(~np.isclose(got, want, rtol=1e-5, atol=1e-5)))
            if bad:
                raise StepFailed(f"{bad}/{n} wrong after the second launch")
            return f"{n}/{n} right"

        self.step("check second axpy", check2)
        ts = int(self.sem.u64(8).value)
        self.results["gpu_timestamp_ns"] = ts
        print(f"info: GPU timestamp of the last release {ts} ns (Unix time {time.time_ns()} ns)", flush=True)



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", type=int, default=0, help="index among the driver's GPUs")
    ap.add_argument("--n", type=int, default=100_000, help="axpy length")
    ap.add_argument("--vamode", type=int, default=0, help="NV0080 vaMode (0 optional-multiple, 2 multiple)")
    ap.add_argument("--timeout", type=int, default=60, help="whole-probe limit, seconds")
    args = ap.parse_args()
    probe = Probe(args)

    def alarm(_sig: int, _frame: Any) -> None:
        raise ProbeTimeout(f"the run went past {args.timeout} s")

    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(args.timeout)
    failed: str | None = None
    t0 = time.perf_counter()
    try:
        probe.run()
    except StepFailed as e:
        failed = str(e)
    except ProbeTimeout as e:
        failed = str(e)
        print(f"TIMEOUT: {e}", flush=True)
    except Exception as e:  # noqa: BLE001 - report it, then free what was made
        failed = _why(e)
        print(f"ERROR: {failed}", flush=True)
    finally:
        signal.alarm(20)  # the cleanup gets its own bound
        try:
            probe.cleanup()
        except ProbeTimeout:
            print("TIMEOUT during cleanup", flush=True)
        finally:
            signal.alarm(0)
    total = (time.perf_counter() - t0) * 1e3
    summary = {"ok": failed is None, "failed": failed, "total_ms": round(total, 1), "steps": probe.steps,
               "results": probe.results, "args": vars(args)}
    print(f"nv_probe: {'OK' if failed is None else 'FAILED at ' + failed} ({total:.0f} ms)", flush=True)
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "nv_probe.json").write_text(json.dumps(summary, indent=1, default=str))
    return 0 if failed is None else 1


if __name__ == "__main__":
    sys.exit(main())
