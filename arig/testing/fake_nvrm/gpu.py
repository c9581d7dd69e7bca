"""The fake GPU: a thread per scheduled channel runs its GPFIFO entries' pushbuffer words.

It polls GPPut (USERD+0x8C), runs the entries and advances GPGet (+0x88):
host semaphore release (payload, GPU time) and acquire (bounded),
NON_STALL_INTERRUPT, SET_OBJECT, the compute methods arig sends (SEND_PCAS_A +
SEND_SIGNALING_PCAS2_B launches the QMD: the kernel at its program address,
known from the images the device loaded and checked byte for byte, runs as the
Python function registered by name with its parameter bytes from constant bank
0), the copy engine's copies and semaphore releases.  A GPU access outside
GPU-mapped memory is an MMU fault: Xid 31 in the channel's error notifier,
and the channel group stops.

Threads: each channel's own fake GPU thread; it takes ``_State._lock`` for
what it shares with the RM side.
"""

from __future__ import annotations

import ctypes
import os
import select
import struct
import threading
import time

from ...nvrm import _cubin, _launch, _qmd
from ...nvrm import _exec_params
from ...nvrm import _push
from .state import NvFault, _bits, _Channel, _Obj, _Refused, _State, _Stop

__all__ = ["Gpu"]


class Gpu(_State):
    """The GPU interpreter: scheduling, the GPFIFO and method decoding, launches, copies, semaphores, interrupts."""

    stamps = True  # a release writes the GPU's time beside its payload (FakeNvrm's docstring)

    def _schedule(self, tsg: _Obj) -> None:
        chans = [self.objects[c].channel for c in tsg.children if self.objects[c].channel is not None]
        if not chans:
            self._violation("GPFIFO_SCHEDULE of a channel group without channels")
            raise _Refused("INVALID_STATE")
        for ch in chans:
            assert ch is not None
            if ch.thread is None:
                ch.thread = threading.Thread(target=self._gpu_thread, args=(ch,), name=f"fake-nvrm-channel-{ch.handle:x}", daemon=True)
                ch.thread.start()

    # -- the fake GPU ----------------------------------------------------------------------------
    def _gpu_thread(self, ch: _Channel) -> None:
        pause = 10e-6
        while not ch.stop.is_set():
            try:
                worked = self._step(ch)
            except _Stop as e:
                self._stop_group(ch, str(e), e.xid)
                worked = False
            except Exception as e:  # noqa: BLE001 - the fake's own bug: say so, stop the channel
                self._violation(f"the fake GPU of channel {ch.handle:#x} failed: {type(e).__name__}: {e}")
                self._stop_group(ch, str(e), None)
                worked = False
            if worked:
                pause = 10e-6
                continue
            self._drain_events()
            ch.stop.wait(pause)
            pause = min(pause * 2, 1e-3)

    def _step(self, ch: _Channel) -> bool:
        """Run one GPFIFO entry if GPPut is ahead of GPGet; whether one ran."""
        if ch.dead is not None:
            return False
        with self._lock:
            if ch.stop.is_set() or not self._mapped(ch.userd, _exec_params.USERD_BYTES):
                return False
            put = ctypes.c_uint32.from_address(ch.userd + _exec_params.USERD_GP_PUT).value
        if put == ch.get:
            return False
        if put >= ch.entries:
            raise _Stop(f"GPPut {put} is past the ring's {ch.entries} entries", 43)
        self._check(ch.ring + ch.get * 8, 8, "GPFIFO entry read")
        entry = ctypes.c_uint64.from_address(ch.ring + ch.get * 8).value
        e0, e1 = entry & 0xFFFFFFFF, entry >> 32
        address = (e0 & ~3) | (e1 & 0xFF) << 32
        length = (e1 >> 10) & 0x1FFFFF
        if length:
            self._check(address, length * 4, "pushbuffer read")
            self._run_segment(ch, struct.unpack(f"<{length}I", ctypes.string_at(address, length * 4)))
        ch.get = (ch.get + 1) % ch.entries
        with self._lock:
            if not ch.stop.is_set():
                ctypes.c_uint32.from_address(ch.userd + _exec_params.USERD_GP_GET).value = ch.get
        return True

    def _check(self, addr: int, n: int, what: str) -> int:
        """The host address of ``n`` GPU-mapped bytes at ``addr``; an MMU fault where they are not mapped."""
        if not self._mapped(addr, n):
            self._violation(f"GPU {what} of {n} bytes at {addr:#x}: not GPU-mapped (MMU fault)")
            raise _Stop(f"MMU fault at {addr:#x}", 31)
        return self._host_of(addr)

    def _run_segment(self, ch: _Channel, words: tuple[int, ...]) -> None:
        i = 0
        while i < len(words):
            w = words[i]
            sec, count, subch, mthd = w >> 29, (w >> 16) & 0x1FFF, (w >> 13) & 7, (w & 0xFFF) << 2
            i += 1
            if sec == _push.C86F.DMA_SEC_OP_IMMD_DATA_METHOD:
                self._method(ch, subch, mthd, count)
                continue
            if sec not in (_push.C86F.DMA_SEC_OP_INC_METHOD, _push.C86F.DMA_SEC_OP_NON_INC_METHOD, _push.C86F.DMA_SEC_OP_ONE_INC):
                self._violation(f"channel {ch.handle:#x}: method header {w:#010x} of SEC_OP {sec}")
                raise _Stop("bad method header", 43)
            data = words[i : i + count]
            if len(data) < count:
                self._violation(f"channel {ch.handle:#x}: method {mthd:#x} wants {count} words, the segment has {len(data)}")
                raise _Stop("short segment", 43)
            i += count
            for k, v in enumerate(data):
                if sec == _push.C86F.DMA_SEC_OP_NON_INC_METHOD:
                    at = mthd
                elif sec == _push.C86F.DMA_SEC_OP_ONE_INC:
                    at = mthd + (4 if k else 0)
                else:
                    at = mthd + 4 * k
                self._method(ch, subch, at, v)

    def _method(self, ch: _Channel, subch: int, mthd: int, v: int) -> None:
        H = _push.C86F
        if mthd == H.SET_OBJECT:
            engines = {self.objects[c].cls for c in self.objects[ch.handle].children if c in self.objects} if ch.handle in self.objects else set()
            bound = v & 0xFFFF
            if bound not in engines:
                self._violation(f"channel {ch.handle:#x}: SET_OBJECT of class {bound:#x}, which has no object on the channel")
                raise _Stop("SET_OBJECT of a missing engine", 13)
            ch.subch[subch] = bound
        elif mthd < 0x100:  # host methods, on any subchannel
            if mthd in (H.SEM_ADDR_LO, H.SEM_ADDR_HI, H.SEM_PAYLOAD_LO, H.SEM_PAYLOAD_HI):
                ch.sem[mthd] = v
            elif mthd == H.SEM_EXECUTE:
                self._sem_execute(ch, v)
            elif mthd == H.NON_STALL_INTERRUPT:
                self._interrupt(ch)
            elif mthd == H.WFI:
                pass  # the fake runs everything in order: always idle
            else:
                self._violation(f"channel {ch.handle:#x}: unknown host method {mthd:#x}")
                raise _Stop("unknown host method", 13)
        else:
            cls = ch.subch.get(subch)
            if cls is None:
                self._violation(f"channel {ch.handle:#x}: method {mthd:#x} on subchannel {subch}, which has no engine bound")
                raise _Stop("method on an unbound subchannel", 13)
            ch.state[(cls, mthd)] = v
            if cls in _exec_params.COMPUTE_CLASSES:
                self._compute(ch, cls, mthd, v)
            else:
                self._copy(ch, cls, mthd, v)

    def _sem_execute(self, ch: _Channel, v: int) -> None:
        H = _push.C86F
        addr = (ch.sem.get(H.SEM_ADDR_LO, 0) & ~3) | (ch.sem.get(H.SEM_ADDR_HI, 0) & 0x1FFFFFF) << 32
        payload = ch.sem.get(H.SEM_PAYLOAD_LO, 0) | ch.sem.get(H.SEM_PAYLOAD_HI, 0) << 32
        op, wide, stamp = v & 7, (v >> 24) & 1, (v >> 25) & 1
        if not wide:
            payload &= 0xFFFFFFFF
        if op == H.SEM_EXECUTE_OPERATION_RELEASE:
            self._release_sem(addr, payload, wide=bool(wide), stamp=bool(stamp))
        elif op in (H.SEM_EXECUTE_OPERATION_ACQUIRE, 2, H.SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ):
            self._acquire(ch, addr, payload, wide=bool(wide), op=op)
        else:
            self._violation(f"channel {ch.handle:#x}: SEM_EXECUTE operation {op}")
            raise _Stop("unknown semaphore operation", 13)

    def _release_sem(self, addr: int, payload: int, *, wide: bool, stamp: bool) -> None:
        addr = self._check(addr, 16 if stamp else 8 if wide else 4, "semaphore release")
        if stamp:
            ctypes.c_uint64.from_address(addr + 8).value = time.monotonic_ns() if self.stamps else 0
        if wide:
            ctypes.c_uint64.from_address(addr).value = payload
        else:
            ctypes.c_uint32.from_address(addr).value = payload

    def _acquire(self, ch: _Channel, addr: int, value: int, *, wide: bool, op: int) -> None:
        addr = self._check(addr, 8 if wide else 4, "semaphore acquire")
        bits = 64 if wide else 32
        kind = ctypes.c_uint64 if wide else ctypes.c_uint32
        deadline = time.monotonic() + self.acquire_timeout
        pause = 5e-6
        while True:
            cur = kind.from_address(addr).value
            if op == 0:
                ok = cur == value
            elif op == 2:
                ok = cur >= value
            else:
                ok = (cur - value) % (1 << bits) < 1 << (bits - 1)
            if ok:
                return
            if ch.stop.is_set():
                raise _Stop("the channel was freed during an acquire", None)
            if time.monotonic() > deadline:
                self._violation(f"channel {ch.handle:#x}: acquire of {addr:#x} >= {value} never satisfied in {self.acquire_timeout} s (it holds {cur})")
                raise _Stop("acquire timed out", None)
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)

    def _interrupt(self, ch: _Channel) -> None:
        with self._lock:
            for o in self.objects.values():
                if o.cls == _exec_params.NV01_EVENT_OS_EVENT and self._gpu_of(o) == ch.gpu and o.event_fd in self._os_events:
                    mine = self._os_events[o.event_fd]
                    if not os.get_blocking(mine):
                        # As nvidia_poll: a file with O_NONBLOCK gets no poll waiter, so no poller wakes.
                        self.interrupts_unheard += 1
                        continue
                    os.write(mine, (1).to_bytes(8, "little"))
                    self.interrupts += 1
                    self._drain[mine] = time.monotonic() + 1e-3

    def _drain_events(self) -> None:
        if not self._drain:
            return
        now = time.monotonic()
        with self._lock:
            for mine, at in list(self._drain.items()):
                if now >= at:
                    del self._drain[mine]
                    try:
                        if select.select([mine], [], [], 0)[0]:  # the file is blocking: read only what is there
                            os.read(mine, 8)
                    except OSError:
                        pass

    def _compute(self, ch: _Channel, cls: int, mthd: int, v: int) -> None:
        C = _push.CBC0
        if mthd == C.SEND_SIGNALING_PCAS2_B:
            if v & 0xF != C.SEND_SIGNALING_PCAS2_B_PCAS_ACTION_PREFETCH_SCHEDULE:
                self._violation(f"channel {ch.handle:#x}: PCAS action {v & 0xF}")
                raise _Stop("unknown PCAS action", 13)
            self._launch(ch, ch.state.get((cls, C.SEND_PCAS_A), 0) << 8)
        elif mthd not in (C.WAIT_FOR_IDLE, C.INVALIDATE_SHADER_CACHES_NO_WFI, C.SEND_PCAS_A,
                          C.SET_SHADER_SHARED_MEMORY_WINDOW_A, C.SET_SHADER_SHARED_MEMORY_WINDOW_B,
                          C.SET_SHADER_LOCAL_MEMORY_WINDOW_A, C.SET_SHADER_LOCAL_MEMORY_WINDOW_B,
                          C.SET_SHADER_LOCAL_MEMORY_A, C.SET_SHADER_LOCAL_MEMORY_B,
                          C.SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A, C.SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B,
                          C.SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C):  # fmt: skip
            self._violation(f"channel {ch.handle:#x}: compute method {mthd:#x} the fake does not know")
            raise _Stop("unknown compute method", 13)

    def _launch(self, ch: _Channel, qmd_at: int) -> None:
        self._check(qmd_at, _qmd.QMD_BYTES, "QMD read")
        qmd = ctypes.string_at(qmd_at, _qmd.QMD_BYTES)
        if _bits(qmd, "QMD_MAJOR_VERSION") != 4:
            self._violation(f"channel {ch.handle:#x}: QMD at {qmd_at:#x} is version {_bits(qmd, 'QMD_MAJOR_VERSION')}, not 4")
            raise _Stop("bad QMD", 13)
        program = _bits(qmd, "PROGRAM_ADDRESS_LOWER") | _bits(qmd, "PROGRAM_ADDRESS_UPPER") << 32
        grid = (_bits(qmd, "GRID_WIDTH"), _bits(qmd, "GRID_HEIGHT"), _bits(qmd, "GRID_DEPTH"))
        block = (_bits(qmd, "CTA_THREAD_DIMENSION0"), _bits(qmd, "CTA_THREAD_DIMENSION1"), _bits(qmd, "CTA_THREAD_DIMENSION2"))
        cb0 = (_bits(qmd, "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)") | _bits(qmd, "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(0)") << 32) << 6
        cb0_size = _bits(qmd, "CONSTANT_BUFFER_SIZE_SHIFTED4(0)") << 4
        kernel = self._kernel_at(program)
        if self._fault is not None:
            xid, self._fault = self._fault, None
            raise _Stop(f"injected fault in {kernel.name}", xid)
        if kernel.param_base + kernel.param_size > cb0_size or cb0_size < _qmd.CB0_PREFIX:
            self._violation(f"launch of {kernel.name}: constant bank 0 of {cb0_size} bytes lacks its parameters")
            raise _Stop("bad constant bank", 13)
        self._check(cb0, cb0_size, "constant bank 0 read")
        params = ctypes.string_at(cb0 + kernel.param_base, kernel.param_size)
        fn = self.kernels.get(kernel.name)
        self.launches.append((kernel.name, grid, block))
        if fn is None:
            self._violation(f"launch of {kernel.name!r}, for which no fake kernel is registered (FakeNvrm.kernel)")
            return
        try:
            fn(params, grid, block)
        except NvFault as e:
            raise _Stop(str(e), e.xid) from e
        except Exception as e:  # noqa: BLE001 - a broken fake kernel: a graphics exception, said
            self._violation(f"fake kernel {kernel.name!r} raised {type(e).__name__}: {e}")
            raise _Stop(f"kernel {kernel.name} raised", 13) from e

    def _kernel_at(self, program: int) -> _cubin.Kernel:
        """The kernel whose code is at ``program``: one of the device's loaded kernels there, its bytes checked."""
        for lk in list(_launch._KERNELS.values()):
            if lk.program_address == program:
                n = len(lk.kernel.text)
                self._check(program, n, "code read")
                if ctypes.string_at(program, n) != lk.kernel.text:
                    self._violation(f"the code at {program:#x} is not kernel {lk.kernel.name!r}'s")
                    raise _Stop("illegal instruction", 13)
                return lk.kernel
        self._violation(f"launch of code at {program:#x}, where no loaded kernel lies")
        raise _Stop("illegal instruction", 13)

    def _copy(self, ch: _Channel, cls: int, mthd: int, v: int) -> None:
        C = _push.C8B5
        if mthd != C.LAUNCH_DMA:
            if mthd not in (C.SET_SEMAPHORE_A, C.SET_SEMAPHORE_B, C.SET_SEMAPHORE_PAYLOAD, C.SET_SEMAPHORE_PAYLOAD_UPPER,
                            C.OFFSET_IN_UPPER, C.OFFSET_IN_LOWER, C.OFFSET_OUT_UPPER, C.OFFSET_OUT_LOWER,
                            C.PITCH_IN, C.PITCH_OUT, C.LINE_LENGTH_IN, C.LINE_COUNT):  # fmt: skip
                self._violation(f"channel {ch.handle:#x}: copy method {mthd:#x} the fake does not know")
                raise _Stop("unknown copy method", 13)
            return
        s = ch.state

        def get(m: int) -> int:
            return s.get((cls, m), 0)

        transfer = v & 3
        if transfer:
            if not (v >> 7) & 1 or not (v >> 8) & 1:
                self._violation(f"channel {ch.handle:#x}: a block-linear copy (LAUNCH_DMA {v:#x}), which the fake does not model")
                raise _Stop("block-linear copy", 13)
            src = (get(C.OFFSET_IN_UPPER) & 0x1FFFFFF) << 32 | get(C.OFFSET_IN_LOWER)
            dst = (get(C.OFFSET_OUT_UPPER) & 0x1FFFFFF) << 32 | get(C.OFFSET_OUT_LOWER)
            n = get(C.LINE_LENGTH_IN)
            lines = get(C.LINE_COUNT) if (v >> 9) & 1 else 1
            pin, pout = (get(C.PITCH_IN), get(C.PITCH_OUT)) if lines > 1 else (0, 0)
            for k in range(lines):
                at_src = self._check(src + k * pin, n, "copy read")
                at_dst = self._check(dst + k * pout, n, "copy write")
                ctypes.memmove(at_dst, at_src, n)
        sem = (v >> 3) & 3
        if sem:
            addr = (get(C.SET_SEMAPHORE_A) & 0x1FFFFFF) << 32 | get(C.SET_SEMAPHORE_B)
            payload = get(C.SET_SEMAPHORE_PAYLOAD)
            two = (v >> 27) & 1
            if two:
                payload |= get(C.SET_SEMAPHORE_PAYLOAD_UPPER) << 32
            if sem == C.LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_ONE_WORD_SEMAPHORE:
                self._release_sem(addr, payload & 0xFFFFFFFF, wide=False, stamp=False)
            elif sem == C.LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_FOUR_WORD_SEMAPHORE:
                if addr % 16:
                    self._violation(f"channel {ch.handle:#x}: a four-word semaphore at {addr:#x}")
                    raise _Stop("misaligned semaphore", 13)
                self._release_sem(addr, payload, wide=True, stamp=True)
            else:
                self._violation(f"channel {ch.handle:#x}: LAUNCH_DMA semaphore type {sem}")
                raise _Stop("unknown semaphore type", 13)
        if (v >> 5) & 3 == C.LAUNCH_DMA_INTERRUPT_TYPE_NON_BLOCKING:
            self._interrupt(ch)

    def _stop_group(self, ch: _Channel, why: str, xid: int | None) -> None:
        """The channel (and its group) stops; with ``xid``, the RM writes the channel's error notifier."""
        with self._lock:
            if xid is not None:
                n = self.objects.get(ch.notifier)
                if n is not None and n.view:
                    ctypes.memmove(n.view, struct.pack("<QIHH", time.monotonic_ns(), xid, 0, 0xFFFF), 16)
            tsg = self.objects.get(ch.tsg)
            for c in tsg.children if tsg is not None else []:
                o = self.objects.get(c)
                if o is not None and o.channel is not None and o.channel.dead is None:
                    o.channel.dead = why
            ch.dead = why
        if xid is not None:
            self._interrupt(ch)  # the RM's RC handling wakes the event fds too
