"""Pushbuffers for a GPFIFO channel: method headers, GPFIFO entries, and the methods a launch needs.

Pure: values in, 32-bit words out; no file descriptor, any thread.  A channel
fetches its work as *pushbuffer segments*, runs of 32-bit words in GPU memory,
each named by an 8-byte GPFIFO entry.  A segment is a sequence of methods:
a header word (which subchannel, which method offset, how many data words)
and then its data words.  Host methods (semaphores, interrupts) go to any
subchannel; engine methods go to the subchannel the engine object was bound
to with ``SET_OBJECT``.

Every offset and field is from NVIDIA's MIT-licensed class headers, copies of
which are in ``tests/data/nv/`` and which the tests parse and compare:

* ``clc86f.h`` (HOPPER_CHANNEL_GPFIFO_A, open-gpu-kernel-modules 580.142): the
  semaphore methods, SEM_EXECUTE's fields and the GPFIFO entry format.  This
  Hopper header omits what did not change since Ampere, so the method header
  format (``NVC56F_DMA_*``), ``NON_STALL_INTERRUPT`` and the ``_EN``/``_64BIT``
  values come from ``clc56f.h`` (AMPERE_CHANNEL_GPFIFO_A, same tag); the tests
  check that the two agree wherever both define a name.  UVM's own Hopper
  code emits the same NON_STALL_INTERRUPT (``uvm_hal`` uses the Maxwell
  host's interrupt for every later GPU).
* ``clcbc0.h`` (HOPPER_COMPUTE_A, open-gpu-doc 5d957df).
* ``clc8b5.h`` (HOPPER_DMA_COPY_A, open-gpu-doc c8607fe).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from .._errors import ArigValueError, safe_repr

__all__ = [
    "SUBCH_HOST", "SUBCH_COMPUTE", "SUBCH_COPY", "method_header", "gpfifo_entry", "Push",
    "C86F", "CBC0", "C8B5", "local_bytes_per_tpc", "setup", "launch_and_signal", "words_of", "check_copy_args", "wait_words",
]


def _fit(what: str, value: int, hi: int, lo: int) -> int:
    if not 0 <= value < (1 << (hi - lo + 1)):
        raise ArigValueError(f"{what} {value:#x} does not fit bits {hi}:{lo}")
    return value << lo


# --- the host class: HOPPER_CHANNEL_GPFIFO_A (clc86f.h, clc56f.h) --------------------


class C86F:
    """Method offsets and fields of the GPFIFO class (``NVC86F_*``, older ones ``NVC56F_*``)."""

    # Method header (NVC56F_DMA_*): 31:29 SEC_OP, 28:16 COUNT, 15:13 SUBCHANNEL, 11:0 ADDRESS (dwords)
    DMA_METHOD_ADDRESS = (11, 0)
    DMA_METHOD_SUBCHANNEL = (15, 13)
    DMA_METHOD_COUNT = (28, 16)
    DMA_IMMD_DATA = (28, 16)
    DMA_SEC_OP = (31, 29)
    DMA_SEC_OP_INC_METHOD = 1
    DMA_SEC_OP_NON_INC_METHOD = 3
    DMA_SEC_OP_IMMD_DATA_METHOD = 4
    DMA_SEC_OP_ONE_INC = 5

    SET_OBJECT = 0x0000
    NON_STALL_INTERRUPT = 0x0020  # NVC56F_NON_STALL_INTERRUPT (HANDLE 31:0)
    SEM_ADDR_LO = 0x005C
    SEM_ADDR_LO_OFFSET = (31, 2)
    SEM_ADDR_HI = 0x0060
    SEM_ADDR_HI_OFFSET = (24, 0)
    SEM_PAYLOAD_LO = 0x0064
    SEM_PAYLOAD_HI = 0x0068
    SEM_EXECUTE = 0x006C
    SEM_EXECUTE_OPERATION = (2, 0)
    SEM_EXECUTE_OPERATION_ACQUIRE = 0
    SEM_EXECUTE_OPERATION_RELEASE = 1
    SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ = 3
    SEM_EXECUTE_ACQUIRE_SWITCH_TSG = (12, 12)
    SEM_EXECUTE_ACQUIRE_SWITCH_TSG_EN = 1
    SEM_EXECUTE_RELEASE_WFI = (20, 20)
    SEM_EXECUTE_RELEASE_WFI_DIS = 0
    SEM_EXECUTE_RELEASE_WFI_EN = 1  # NVC56F_
    SEM_EXECUTE_PAYLOAD_SIZE = (24, 24)
    SEM_EXECUTE_PAYLOAD_SIZE_32BIT = 0
    SEM_EXECUTE_PAYLOAD_SIZE_64BIT = 1  # NVC56F_
    SEM_EXECUTE_RELEASE_TIMESTAMP = (25, 25)
    SEM_EXECUTE_RELEASE_TIMESTAMP_DIS = 0
    SEM_EXECUTE_RELEASE_TIMESTAMP_EN = 1
    WFI = 0x0078

    # GPFIFO entry (NVC86F_GP_ENTRY*): two words, entry0 then entry1.
    GP_ENTRY__SIZE = 8
    GP_ENTRY0_GET = (31, 2)
    GP_ENTRY1_GET_HI = (7, 0)
    GP_ENTRY1_LEVEL = (9, 9)
    GP_ENTRY1_LEVEL_MAIN = 0
    GP_ENTRY1_LEVEL_SUBROUTINE = 1
    GP_ENTRY1_LENGTH = (30, 10)
    GP_ENTRY1_SYNC = (31, 31)
    GP_ENTRY1_SYNC_PROCEED = 0


# --- the compute class: HOPPER_COMPUTE_A (clcbc0.h) -----------------------------------


class CBC0:
    """Method offsets and fields of HOPPER_COMPUTE_A (``NVCBC0_*``)."""

    SET_OBJECT = 0x0000
    SET_OBJECT_CLASS_ID = (15, 0)
    SET_OBJECT_ENGINE_ID = (20, 16)
    WAIT_FOR_IDLE = 0x0110
    WAIT_FOR_IDLE_V = (31, 0)
    SET_SHADER_SHARED_MEMORY_WINDOW_A = 0x02A0
    SET_SHADER_SHARED_MEMORY_WINDOW_A_BASE_ADDRESS_UPPER = (16, 0)
    SET_SHADER_SHARED_MEMORY_WINDOW_B = 0x02A4
    SET_SHADER_SHARED_MEMORY_WINDOW_B_BASE_ADDRESS = (31, 0)
    SEND_PCAS_A = 0x02B4
    SEND_PCAS_A_QMD_ADDRESS_SHIFTED8 = (31, 0)
    SEND_SIGNALING_PCAS2_B = 0x02C0
    SEND_SIGNALING_PCAS2_B_PCAS_ACTION = (3, 0)
    SEND_SIGNALING_PCAS2_B_PCAS_ACTION_PREFETCH_SCHEDULE = 0x9
    SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A = 0x02E4
    SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A_SIZE_UPPER = (7, 0)
    SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B = 0x02E8
    SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B_SIZE_LOWER = (31, 0)
    SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C = 0x02EC
    SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C_MAX_SM_COUNT = (8, 0)
    SET_SHADER_LOCAL_MEMORY_A = 0x0790
    SET_SHADER_LOCAL_MEMORY_A_ADDRESS_UPPER = (24, 0)
    SET_SHADER_LOCAL_MEMORY_B = 0x0794
    SET_SHADER_LOCAL_MEMORY_B_ADDRESS_LOWER = (31, 0)
    SET_SHADER_LOCAL_MEMORY_WINDOW_A = 0x07B0
    SET_SHADER_LOCAL_MEMORY_WINDOW_A_BASE_ADDRESS_UPPER = (16, 0)
    SET_SHADER_LOCAL_MEMORY_WINDOW_B = 0x07B4
    SET_SHADER_LOCAL_MEMORY_WINDOW_B_BASE_ADDRESS = (31, 0)
    INVALIDATE_SHADER_CACHES_NO_WFI = 0x1698
    INVALIDATE_SHADER_CACHES_NO_WFI_INSTRUCTION = (0, 0)
    INVALIDATE_SHADER_CACHES_NO_WFI_INSTRUCTION_TRUE = 1
    INVALIDATE_SHADER_CACHES_NO_WFI_GLOBAL_DATA = (4, 4)
    INVALIDATE_SHADER_CACHES_NO_WFI_GLOBAL_DATA_TRUE = 1
    INVALIDATE_SHADER_CACHES_NO_WFI_CONSTANT = (12, 12)
    INVALIDATE_SHADER_CACHES_NO_WFI_CONSTANT_TRUE = 1


# --- the copy class: HOPPER_DMA_COPY_A (clc8b5.h) --------------------------------------


class C8B5:
    """Method offsets and fields of HOPPER_DMA_COPY_A (``NVC8B5_*``)."""

    SET_SEMAPHORE_A = 0x0240
    SET_SEMAPHORE_A_UPPER = (24, 0)
    SET_SEMAPHORE_B = 0x0244
    SET_SEMAPHORE_B_LOWER = (31, 0)
    SET_SEMAPHORE_PAYLOAD = 0x0248
    SET_SEMAPHORE_PAYLOAD_UPPER = 0x024C
    LAUNCH_DMA = 0x0300
    LAUNCH_DMA_DATA_TRANSFER_TYPE = (1, 0)
    LAUNCH_DMA_DATA_TRANSFER_TYPE_NONE = 0
    LAUNCH_DMA_DATA_TRANSFER_TYPE_PIPELINED = 1
    LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED = 2
    LAUNCH_DMA_FLUSH_ENABLE = (2, 2)
    LAUNCH_DMA_FLUSH_ENABLE_TRUE = 1
    LAUNCH_DMA_SEMAPHORE_TYPE = (4, 3)
    LAUNCH_DMA_SEMAPHORE_TYPE_NONE = 0
    LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_ONE_WORD_SEMAPHORE = 1
    LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_FOUR_WORD_SEMAPHORE = 2
    LAUNCH_DMA_INTERRUPT_TYPE = (6, 5)
    LAUNCH_DMA_INTERRUPT_TYPE_NONE = 0
    LAUNCH_DMA_INTERRUPT_TYPE_NON_BLOCKING = 2
    LAUNCH_DMA_SRC_MEMORY_LAYOUT = (7, 7)
    LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH = 1
    LAUNCH_DMA_DST_MEMORY_LAYOUT = (8, 8)
    LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH = 1
    LAUNCH_DMA_MULTI_LINE_ENABLE = (9, 9)
    LAUNCH_DMA_MULTI_LINE_ENABLE_TRUE = 1
    LAUNCH_DMA_SEMAPHORE_PAYLOAD_SIZE = (27, 27)
    LAUNCH_DMA_SEMAPHORE_PAYLOAD_SIZE_ONE_WORD = 0
    LAUNCH_DMA_SEMAPHORE_PAYLOAD_SIZE_TWO_WORD = 1
    OFFSET_IN_UPPER = 0x0400
    OFFSET_IN_UPPER_UPPER = (24, 0)
    OFFSET_IN_LOWER = 0x0404
    OFFSET_OUT_UPPER = 0x0408
    OFFSET_OUT_UPPER_UPPER = (24, 0)
    OFFSET_OUT_LOWER = 0x040C
    PITCH_IN = 0x0410
    PITCH_OUT = 0x0414
    LINE_LENGTH_IN = 0x0418
    LINE_COUNT = 0x041C


#: Subchannels: host methods work on any; the channels' first pushbuffers bind compute to 1, copy to 4.
SUBCH_HOST = 0
SUBCH_COMPUTE = 1
SUBCH_COPY = 4

#: One copy moves at most this many bytes (LINE_LENGTH_IN is 32 bits; copies stay below 2 GiB, a size the copy engine is known to take).
COPY_MAX = 1 << 31
#: The shared and local memory windows' bases (sm_90 code reads them from c[0][0x18], c[0][0x20]); kernels ran with these on an H200.
SHARED_WINDOW = 0x7294_0000_0000
LOCAL_WINDOW = 0x7293_0000_0000
#: GPFIFO entries reach 40 bits of address (GET 31:2 + GET_HI 7:0).
GPFIFO_ADDRESS_LIMIT = 1 << 40
#: LENGTH is 21 bits of dwords.
GPFIFO_MAX_DWORDS = (1 << 21) - 1


def method_header(subch: int, mthd: int, count: int, *, incrementing: bool = True) -> int:
    """The header word of ``count`` data words for method byte offset ``mthd`` on ``subch``.

    Incrementing (SEC_OP 1): the words go to ``mthd``, ``mthd+4`` ...; non-incrementing
    (SEC_OP 3): all to ``mthd``.
    """
    if mthd % 4:
        raise ArigValueError(f"method offset {mthd:#x} is not a multiple of 4")
    sec = C86F.DMA_SEC_OP_INC_METHOD if incrementing else C86F.DMA_SEC_OP_NON_INC_METHOD
    return (_fit("SEC_OP", sec, *C86F.DMA_SEC_OP) | _fit("method count", count, *C86F.DMA_METHOD_COUNT)
            | _fit("subchannel", subch, *C86F.DMA_METHOD_SUBCHANNEL)
            | _fit("method address", mthd >> 2, *C86F.DMA_METHOD_ADDRESS))


def check_copy_args(dst: object, src: object, nbytes: object) -> None:
    """A queue's ``copy(dst, src, nbytes)`` takes ints >= 0: ArigValueError naming the one that is not."""
    for what, x in (("dst", dst), ("src", src), ("nbytes", nbytes)):
        if isinstance(x, bool) or not isinstance(x, int) or x < 0:
            raise ArigValueError(f"queue.copy: {what} must be an int >= 0, got {safe_repr(x)}")


def gpfifo_entry(address: int, ndwords: int, *, subroutine: bool = True) -> int:
    """The 64-bit GPFIFO entry (entry0 | entry1 << 32) for a segment of ``ndwords`` words at ``address``.

    LEVEL_SUBROUTINE: the segment
    returns to the ring when done (no CALL/RETURN state).  The address must be
    4-byte aligned and below 2**40.
    """
    if address % 4 or not 0 <= address < GPFIFO_ADDRESS_LIMIT:
        raise ArigValueError(f"a pushbuffer segment must be 4-byte aligned and below 2**40, not at {address:#x}")
    if not 1 <= ndwords <= GPFIFO_MAX_DWORDS:
        raise ArigValueError(f"a pushbuffer segment is 1..{GPFIFO_MAX_DWORDS} words, not {ndwords}")
    level = C86F.GP_ENTRY1_LEVEL_SUBROUTINE if subroutine else C86F.GP_ENTRY1_LEVEL_MAIN
    entry0 = _fit("GET", (address & 0xFFFFFFFF) >> 2, *C86F.GP_ENTRY0_GET)
    entry1 = (_fit("GET_HI", address >> 32, *C86F.GP_ENTRY1_GET_HI) | _fit("LEVEL", level, *C86F.GP_ENTRY1_LEVEL)
              | _fit("LENGTH", ndwords, *C86F.GP_ENTRY1_LENGTH))
    return entry0 | entry1 << 32


def _lo(v: int) -> int:
    return v & 0xFFFFFFFF


def _hi(v: int) -> int:
    return v >> 32


class Push:
    """A pushbuffer segment under construction: methods in, 32-bit words out (:meth:`data`)."""

    def __init__(self) -> None:
        self.words: list[int] = []

    def __len__(self) -> int:
        return len(self.words)

    def data(self) -> bytes:
        """The words as little-endian bytes, ready to copy to GPU memory."""
        return struct.pack(f"<{len(self.words)}I", *self.words)

    # --- raw methods -------------------------------------------------------------

    def method(self, subch: int, mthd: int, *values: int, incrementing: bool = True) -> Push:
        """Append one method header and its data words (each must fit 32 bits)."""
        if not values:
            raise ArigValueError("a method needs at least one data word")
        for v in values:
            if not 0 <= v <= 0xFFFFFFFF:
                raise ArigValueError(f"method data {v:#x} does not fit 32 bits")
        self.words.append(method_header(subch, mthd, len(values), incrementing=incrementing))
        self.words.extend(values)
        return self

    def extend(self, words: Iterable[int]) -> Push:
        """Append words built elsewhere (another :class:`Push`'s ``words``)."""
        self.words.extend(words)
        return self

    # --- host methods (any subchannel) --------------------------------------------------

    def _sem(self, address: int, payload: int, execute: int, *, payload64: bool, align: int) -> Push:
        if address % align or not 0 <= address < 1 << 57:
            raise ArigValueError(f"semaphore address {address:#x} is not {align}-byte aligned in 57 bits")
        if not 0 <= payload < 1 << (64 if payload64 else 32):
            raise ArigValueError(f"semaphore payload {payload:#x} does not fit {64 if payload64 else 32} bits")
        return self.method(SUBCH_HOST, C86F.SEM_ADDR_LO,
                           _fit("SEM_ADDR_LO", _lo(address) >> 2, *C86F.SEM_ADDR_LO_OFFSET),
                           _fit("SEM_ADDR_HI", _hi(address), *C86F.SEM_ADDR_HI_OFFSET),
                           _lo(payload), _hi(payload), execute)

    def release(self, address: int, payload: int, *, payload64: bool = True, timestamp: bool = True,
                wfi: bool = True) -> Push:
        """A host semaphore release: write ``payload`` (and the GPU time) at ``address``.

        The layout is arig's 16-byte signal: a u64 value, then the u64 GPU
        timestamp when ``timestamp``.  ``wfi`` waits for the engine to go idle
        first, so the release comes after the work before it.
        """
        execute = (_fit("OPERATION", C86F.SEM_EXECUTE_OPERATION_RELEASE, *C86F.SEM_EXECUTE_OPERATION)
                   | _fit("RELEASE_WFI", C86F.SEM_EXECUTE_RELEASE_WFI_EN if wfi else C86F.SEM_EXECUTE_RELEASE_WFI_DIS,
                          *C86F.SEM_EXECUTE_RELEASE_WFI)
                   | _fit("PAYLOAD_SIZE", C86F.SEM_EXECUTE_PAYLOAD_SIZE_64BIT if payload64 else C86F.SEM_EXECUTE_PAYLOAD_SIZE_32BIT,
                          *C86F.SEM_EXECUTE_PAYLOAD_SIZE)
                   | _fit("RELEASE_TIMESTAMP", C86F.SEM_EXECUTE_RELEASE_TIMESTAMP_EN if timestamp else C86F.SEM_EXECUTE_RELEASE_TIMESTAMP_DIS,
                          *C86F.SEM_EXECUTE_RELEASE_TIMESTAMP))
        return self._sem(address, payload, execute, payload64=payload64, align=16 if timestamp else 8 if payload64 else 4)

    def acquire(self, address: int, payload: int, *, payload64: bool = True, switch_tsg: bool = True) -> Push:
        """Wait until the semaphore at ``address`` is >= ``payload`` (circular compare, ACQ_CIRC_GEQ).

        ``switch_tsg`` lets the scheduler switch the channel group out while it
        waits; a wait on a channel of the same group must not (:func:`wait_words`)."""
        switch = C86F.SEM_EXECUTE_ACQUIRE_SWITCH_TSG_EN if switch_tsg else 0
        execute = (_fit("OPERATION", C86F.SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ, *C86F.SEM_EXECUTE_OPERATION)
                   | _fit("ACQUIRE_SWITCH_TSG", switch, *C86F.SEM_EXECUTE_ACQUIRE_SWITCH_TSG)
                   | _fit("PAYLOAD_SIZE", C86F.SEM_EXECUTE_PAYLOAD_SIZE_64BIT if payload64 else C86F.SEM_EXECUTE_PAYLOAD_SIZE_32BIT,
                          *C86F.SEM_EXECUTE_PAYLOAD_SIZE))
        return self._sem(address, payload, execute, payload64=payload64, align=8 if payload64 else 4)

    def non_stall_interrupt(self) -> Push:
        """Raise the engine's non-stall interrupt: wakes the OS event fds (after a release)."""
        return self.method(SUBCH_HOST, C86F.NON_STALL_INTERRUPT, 0)

    # --- engine binding and compute setup -------------------------------------------------

    def set_object(self, subch: int, cls: int) -> Push:
        """Bind engine class ``cls`` to ``subch`` (SET_OBJECT, CLASS_ID 15:0)."""
        return self.method(subch, CBC0.SET_OBJECT, _fit("class id", cls, *CBC0.SET_OBJECT_CLASS_ID))

    def compute_windows(self, shared: int = SHARED_WINDOW, local: int = LOCAL_WINDOW,
                        subch: int = SUBCH_COMPUTE) -> Push:
        """Where the shared and local memory windows sit in the generic address space."""
        self.method(subch, CBC0.SET_SHADER_SHARED_MEMORY_WINDOW_A,
                    _fit("shared window", _hi(shared), *CBC0.SET_SHADER_SHARED_MEMORY_WINDOW_A_BASE_ADDRESS_UPPER),
                    _lo(shared))
        return self.method(subch, CBC0.SET_SHADER_LOCAL_MEMORY_WINDOW_A,
                           _fit("local window", _hi(local), *CBC0.SET_SHADER_LOCAL_MEMORY_WINDOW_A_BASE_ADDRESS_UPPER),
                           _lo(local))

    def local_memory(self, address: int, bytes_per_tpc: int, max_sm_count: int = 0xFF,
                     subch: int = SUBCH_COMPUTE) -> Push:
        """The channel's local (stack) memory: base address and size per TPC (see :func:`local_bytes_per_tpc`)."""
        self.method(subch, CBC0.SET_SHADER_LOCAL_MEMORY_A,
                    _fit("local memory address", _hi(address), *CBC0.SET_SHADER_LOCAL_MEMORY_A_ADDRESS_UPPER),
                    _lo(address))
        return self.method(subch, CBC0.SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A,
                           _fit("local memory size", _hi(bytes_per_tpc), *CBC0.SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A_SIZE_UPPER),
                           _lo(bytes_per_tpc),
                           _fit("max SM count", max_sm_count, *CBC0.SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C_MAX_SM_COUNT))

    def wait_for_idle(self, subch: int = SUBCH_COMPUTE) -> Push:
        """Wait until the engine's earlier work (a grid still running) is done: a queue's launches run in order."""
        return self.method(subch, CBC0.WAIT_FOR_IDLE, 0)

    def invalidate_shader_caches(self, subch: int = SUBCH_COMPUTE) -> Push:
        """Drop instruction, global-data and constant caches without waiting for idle."""
        return self.method(subch, CBC0.INVALIDATE_SHADER_CACHES_NO_WFI,
                           _fit("INSTRUCTION", 1, *CBC0.INVALIDATE_SHADER_CACHES_NO_WFI_INSTRUCTION)
                           | _fit("GLOBAL_DATA", 1, *CBC0.INVALIDATE_SHADER_CACHES_NO_WFI_GLOBAL_DATA)
                           | _fit("CONSTANT", 1, *CBC0.INVALIDATE_SHADER_CACHES_NO_WFI_CONSTANT))

    def launch(self, qmd_address: int, subch: int = SUBCH_COMPUTE) -> Push:
        """Launch the QMD at ``qmd_address`` (256-byte aligned, below 2**40): SEND_PCAS_A, then PREFETCH_SCHEDULE."""
        if qmd_address % 256 or not 0 <= qmd_address < GPFIFO_ADDRESS_LIMIT:
            raise ArigValueError(f"a QMD must be 256-byte aligned and below 2**40, not at {qmd_address:#x}")
        self.method(subch, CBC0.SEND_PCAS_A, qmd_address >> 8)
        return self.method(subch, CBC0.SEND_SIGNALING_PCAS2_B,
                           _fit("PCAS_ACTION", CBC0.SEND_SIGNALING_PCAS2_B_PCAS_ACTION_PREFETCH_SCHEDULE,
                                *CBC0.SEND_SIGNALING_PCAS2_B_PCAS_ACTION))

    # --- copy engine ------------------------------------------------------------------------

    def copy(self, dst: int, src: int, nbytes: int, subch: int = SUBCH_COPY) -> Push:
        """Copy ``nbytes`` from ``src`` to ``dst`` (pitch layout, one line, non-pipelined), in pieces under 2 GiB."""
        if nbytes <= 0:
            raise ArigValueError(f"a copy moves at least one byte, not {nbytes}")
        launch = (_fit("DATA_TRANSFER_TYPE", C8B5.LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED, *C8B5.LAUNCH_DMA_DATA_TRANSFER_TYPE)
                  | _fit("FLUSH_ENABLE", C8B5.LAUNCH_DMA_FLUSH_ENABLE_TRUE, *C8B5.LAUNCH_DMA_FLUSH_ENABLE)
                  | _fit("SRC_MEMORY_LAYOUT", C8B5.LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH, *C8B5.LAUNCH_DMA_SRC_MEMORY_LAYOUT)
                  | _fit("DST_MEMORY_LAYOUT", C8B5.LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH, *C8B5.LAUNCH_DMA_DST_MEMORY_LAYOUT))
        done = 0
        while done < nbytes:
            n = min(nbytes - done, COPY_MAX - 1)
            s, d = src + done, dst + done
            self.method(subch, C8B5.OFFSET_IN_UPPER, _fit("source", _hi(s), *C8B5.OFFSET_IN_UPPER_UPPER), _lo(s),
                        _fit("destination", _hi(d), *C8B5.OFFSET_OUT_UPPER_UPPER), _lo(d))
            self.method(subch, C8B5.LINE_LENGTH_IN, n)
            self.method(subch, C8B5.LAUNCH_DMA, launch)
            done += n
        return self

    def copy_release(self, address: int, payload: int, *, interrupt: bool = False, subch: int = SUBCH_COPY) -> Push:
        """The copy engine's four-word semaphore release (u64 payload, then GPU time) after its copies."""
        if address % 16:
            raise ArigValueError(f"a four-word semaphore must be 16-byte aligned, not at {address:#x}")
        if not 0 <= payload < 1 << 64:
            raise ArigValueError(f"semaphore payload {payload:#x} does not fit 64 bits")
        self.method(subch, C8B5.SET_SEMAPHORE_A, _fit("semaphore", _hi(address), *C8B5.SET_SEMAPHORE_A_UPPER),
                    _lo(address), _lo(payload), _hi(payload))
        launch = (_fit("FLUSH_ENABLE", C8B5.LAUNCH_DMA_FLUSH_ENABLE_TRUE, *C8B5.LAUNCH_DMA_FLUSH_ENABLE)
                  | _fit("SEMAPHORE_TYPE", C8B5.LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_FOUR_WORD_SEMAPHORE, *C8B5.LAUNCH_DMA_SEMAPHORE_TYPE)
                  | _fit("SEMAPHORE_PAYLOAD_SIZE", C8B5.LAUNCH_DMA_SEMAPHORE_PAYLOAD_SIZE_TWO_WORD, *C8B5.LAUNCH_DMA_SEMAPHORE_PAYLOAD_SIZE)
                  | _fit("INTERRUPT_TYPE", C8B5.LAUNCH_DMA_INTERRUPT_TYPE_NON_BLOCKING if interrupt else C8B5.LAUNCH_DMA_INTERRUPT_TYPE_NONE,
                         *C8B5.LAUNCH_DMA_INTERRUPT_TYPE))
        return self.method(subch, C8B5.LAUNCH_DMA, launch)


def local_bytes_per_tpc(bytes_per_thread: int, warps_per_sm: int = 64, sms_per_tpc: int = 2) -> int:
    """SET_SHADER_LOCAL_MEMORY_NON_THROTTLED's size per TPC for ``bytes_per_thread`` of local memory.

    A warp's 32 threads, rounded to 512 bytes, for every warp an SM can hold
    and both SMs of a TPC, rounded to 32 KiB (the size the driver accepts on an H200;
    Hopper: 64 warps per SM, 2 SMs per TPC).
    """
    per_warp = -(-(bytes_per_thread * 32) // 0x200) * 0x200
    return -(-(per_warp * warps_per_sm * sms_per_tpc) // 0x8000) * 0x8000


def setup(compute_class: int, copy_class: int | None, *, local_address: int, local_per_tpc: int) -> Push:
    """The first pushbuffer of a channel: bind the engines, place the windows and local memory."""
    p = Push().set_object(SUBCH_COMPUTE, compute_class)
    if copy_class is not None:
        p.set_object(SUBCH_COPY, copy_class)
    p.compute_windows()
    p.local_memory(local_address, local_per_tpc)
    return p


def launch_and_signal(qmd_address: int, signal_address: int, value: int, *, interrupt: bool = True) -> Push:
    """Launch the QMD at ``qmd_address``, then release ``value`` at ``signal_address`` after it (WFI), and interrupt.

    The release waits for the grid (RELEASE_WFI), writes the u64 value and
    the GPU time, and NON_STALL_INTERRUPT then wakes the OS event fd.
    """
    p = Push().invalidate_shader_caches().launch(qmd_address)
    p.release(signal_address, value)
    if interrupt:
        p.non_stall_interrupt()
    return p


def words_of(data: bytes | bytearray | memoryview) -> Sequence[int]:
    """The 32-bit words of a pushbuffer's bytes (for tests and for reading one back)."""
    if len(data) % 4:
        raise ArigValueError(f"a pushbuffer is whole 32-bit words, not {len(data)} bytes")
    return struct.unpack(f"<{len(data) // 4}I", bytes(data))


def wait_words(address: int, value: int) -> list[int]:
    """A host acquire (ACQ_CIRC_GEQ, u64) that spins in its channel rather than switching the channel group out.

    What the queues' ordering rule and the copy queue's interrupt use: the
    channels that wait for each other are in one group, and switching the
    group out would also stop the channel being waited for.  Waits on
    anything else keep ACQUIRE_SWITCH_TSG (:meth:`Push.acquire`)."""
    return Push().acquire(address, value, switch_tsg=False).words
