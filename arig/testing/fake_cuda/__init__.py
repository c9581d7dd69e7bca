"""A fake libcuda for deterministic CPU tests of arig's CUDA device:
``FakeCuda`` implements, in Python and with libcuda's
calling conventions, the driver functions arig calls.  See ``FakeCuda``.

``FakeCuda`` is assembled from one class per area of the driver, each the
driver functions of one kind of object and its lifetime: ``_contexts``
(init, GPU queries, primary contexts), ``_streams`` (streams, their writes
and host functions, events), ``_memory``, ``_modules`` (modules, functions,
launches) and ``_graphs``; ``_driver`` holds the state and the dispatch
they share, ``_objects`` the objects in its tables.
"""

from __future__ import annotations

from ctypes import c_uint64

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partialmethod
from typing import Any

from ...cuda import _gpu, _launch
from ...cuda import _lib as lib_module
from ._contexts import _Contexts
from ._graphs import _Graphs
from ._memory import _Memory
from ._modules import _Modules
from ._objects import ERRORS, Call, FakeGpu, Fault, _Context, _images, _layout
from ._streams import _Streams, _geq

__all__ = ["ERRORS", "Call", "FakeCuda", "FakeGpu", "Fault"]


class FakeCuda(_Contexts, _Streams, _Memory, _Modules, _Graphs):
    """A fake libcuda; ``installed()`` puts it in place of ``arig.cuda._lib.lib``::

        fake = FakeCuda(gpus=2)
        image = fake.image(store=(store, (8, 4, 8)))  # name=(fn(arg_bytes), parameter sizes)
        with fake.installed():
            async with await arig.open(arig.cuda.gpu(0)) as dev:
                img = await dev.load(image)

    As libcuda (an H200 with driver 580 was asked): each GPU's primary context
    is refcounted; released to 0, or reset, it dies with its streams, memory,
    modules and graphs, and the next retain makes a fresh one under the same
    handle.  A stream's destroy returns at once and its queued work still runs;
    ``cuMemFree``, ``cuMemFreeHost``, ``cuModuleLoadData`` and the last
    release wait until the context's queued work is done.  A kernel raising ``Fault(code)`` (anything
    else: 719) sets the context's sticky ``faulted`` code, which later calls
    return, and its queued work, host functions included, never runs.

    Each stream is a thread, the fake GPU, running kernels, copies,
    ``cuStreamWriteValue64`` writes, host functions (as
    ``CFUNCTYPE(None, c_void_p)(fn)(userdata)``) and graph launches (each a
    snapshot of its exec) in order; ``hold``/``release`` stop and restart it
    between items.  Memory is host memory: device pointers are addresses, and
    freed blocks stay mapped until ``shutdown``.  ``log`` records every call
    (name, calling thread, arguments, result); ``destroyed`` exec and graph
    destroys and module unloads, in order; ``violations`` misuse a real driver
    might not report at once (queued work touching freed memory, a destroyed
    handle destroyed again, a module unloaded under a graph, a double free).

    ``gpus``: how many (or their ``FakeGpu``); ``memops=False``: no
    cuStreamWriteValue64_v2; ``available=False``: as if libcuda.so.1 could not
    be loaded; ``sticky_faults=True``: a fault poisons the process, as 700/719
    do on a real GPU (every context, even a fresh one, returns the code).
    """

    # -- for tests -----------------------------------------------------------------
    def image(self, **kernels: tuple[Callable[[bytes], Any], Sequence[int]]) -> bytes:
        """Image bytes declaring ``name=(fn, param_sizes)`` kernels; the fake GPU calls ``fn(arg_bytes)``."""
        n = next(_images)
        self._specs[n] = {k: (fn, _layout(sizes)) for k, (fn, sizes) in kernels.items()}
        return f"// arig fake image {n}\n".encode()

    def hold(self, stream: int | None = None, held: bool = True) -> None:
        """Stop ``stream``'s fake GPU (every stream's if None) before its next item."""
        with self._cond:
            for s in self.streams.values() if stream is None else [self.streams[stream]]:
                s.held = held
            self._cond.notify_all()

    release = partialmethod(hold, held=False)

    def drain(self, stream: int, timeout: float = 10.0) -> bool:
        """Wait until ``stream`` has nothing queued; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self.streams[stream].items, timeout)

    def calls(self, name: str | None = None) -> list[Call]: return [c for c in list(self.log) if name is None or c.name == name]
    def primary(self, ordinal: int = 0) -> _Context: return self._primary[ordinal]  # GPU ordinal's latest context

    @contextmanager
    def installed(self) -> Iterator[FakeCuda]:
        """Be libcuda for arig (``arig.cuda._lib.lib.swap``), with fresh process-wide CUDA
        state (GPU states, kernel layouts); restore everything and shut down on exit."""
        saved = lib_module.lib.swap(self), _gpu._states, dict(_launch._LAYOUTS)
        _gpu._states = {}
        _launch._LAYOUTS.clear()
        try:
            yield self
        finally:
            lib_module.lib.swap(saved[0])
            _gpu._states = saved[1]
            _launch._LAYOUTS.clear()
            _launch._LAYOUTS.update(saved[2])
            self.shutdown()

    def shutdown(self) -> None:
        """Destroy every context: queued work is dropped and the fake GPU threads end."""
        with self._cond:
            for st in self.streams.values():
                waits = getattr(st.items[0], "waits_for", None) if st.items and st.alive else None
                if waits is not None and (self._find(waits[0], 8) is None or not _geq(c_uint64.from_address(waits[0]).value, waits[1])):
                    self.violations.append(f"stream 0x{st.handle:x} still waits for the word at 0x{waits[0]:x} to reach {waits[1]}: on a GPU it would wait for ever")
            for ctx in list(self.contexts.values()):
                self._destroy_context(ctx)
        for t in self._threads:
            t.join(timeout=5.0)
