"""The calls of what only some devices offer: ``adopt``, ``join_event``, ``dma``, ``map_host``, ``wrap``.

``Device`` inherits them.  Which of them work is found once, at open
(``_find_features``): the backend once more under each feature's protocol of
``arig._backend``, or None where it lacks it, and each call reaches its feature
through that attribute only, so a device names no driver.  A call a device lacks
raises ``ArigTypeError`` naming who has it.  Event-loop thread only, as every
``Device`` method: the driver work of ``dma`` and ``map_host`` runs on the submit
thread (``Device._control``), ``join_event``'s through the submitter.
"""

from __future__ import annotations

from collections.abc import Callable
from threading import get_ident
from typing import TYPE_CHECKING, Any, TypeVar

from ._backend import Adopts, Backend, ExportsDmabuf, MapsHost, Submitter, WaitsEvents, WaitsPeers, Wraps, features_of
from ._device_args import check_buffer, check_index, dma_region, host_memory, owned
from ._errors import ArigTypeError, ArigValueError
from ._memory import Buffer
from .queue import AdoptedQueue

_T = TypeVar("_T")


class FeatureCalls:
    """The methods of the optional features; mixed into ``Device``, which owns the state they read."""

    name: str
    #: What this device offers beyond the common model, fixed at open: a subset of
    #: ``"adopt"``, ``"wait_event"``, ``"dma"``, ``"map_host"`` and ``"wrap"``, each the
    #: name of the method that works here (``"wait_event"``: ``join_event``, and so
    #: ``arig.cuda.wait_event``); the others raise ``ArigTypeError`` naming who has them.
    #: ``"wait_peers"``: ``after=`` (every device's) waits on the device itself, not on the loop.
    features: frozenset[str]
    # The backend once more under each feature it has (None where it lacks it), typed by
    # the feature's protocol: the methods below call a feature through these only.
    _adopts: Adopts | None
    _waits: WaitsEvents | None
    _dmabuf: ExportsDmabuf | None
    _maps_host: MapsHost | None
    _wraps: Wraps | None
    _waits_peers: WaitsPeers | None
    _sub: Submitter
    _full: Any
    _tid: int
    _running: Callable[[], bool]

    if TYPE_CHECKING:  # Device's own, which these calls share with the common ones

        def _check_loop(self) -> None: ...
        def _check_usable(self) -> None: ...
        def _check_here_and_usable(self) -> None: ...
        def _hand_over(self, qi: int, item: Any, held: Any) -> int: ...
        async def _control(self, fn: Callable[..., _T], *args: Any) -> _T: ...

    def _find_features(self, backend: Backend) -> None:
        self.features = features_of(backend)
        self._adopts = backend if isinstance(backend, Adopts) else None
        self._waits = backend if isinstance(backend, WaitsEvents) else None
        self._dmabuf = backend if isinstance(backend, ExportsDmabuf) else None
        self._maps_host = backend if isinstance(backend, MapsHost) else None
        self._wraps = backend if isinstance(backend, Wraps) else None
        self._waits_peers = backend if isinstance(backend, WaitsPeers) else None

    def adopt(self, stream: Any) -> AdoptedQueue:
        """A queue made from a stream another library owns (CUDA devices).

        ``stream``: an object with ``__cuda_stream__`` (cuda.core's
        protocol), a ``torch.cuda.Stream``, a ``cupy.cuda.Stream``, or a raw
        ``CUstream`` int, of this device's GPU and primary context.  Work
        enqueued on that stream before a submit on the queue is ordered
        before that submit's value: ``await dev.wait(await dev.submit(None,
        queue=q))`` awaits it with no thread blocked.  A Python fill on the
        queue receives the stream's handle.  Adopting a stream again gives
        the same queue; the stream object stays referenced until the device
        stops.  Calls no driver function (the loop thread's rule).
        """
        self._check_here_and_usable()
        adopts = self._adopts
        if adopts is None:
            raise ArigTypeError(f"{self.name} has no streams to adopt: adopt() is for CUDA devices")
        return adopts.adopt(stream)

    def _adopted_item(self, queue: AdoptedQueue, fill: Any, arg: Any) -> tuple[int, Any]:
        adopts = self._adopts
        if adopts is None or queue.device != self.name or adopts.adopted(queue.handle) is not queue:
            raise ArigValueError(f"{queue!r} is not a queue of this device")
        return queue.index, adopts.prepare_adopted(queue, fill, arg)

    async def join_event(self, handle: int, *, keep: Any = ()) -> int:
        """Submit a wait, on the device's join lane, for the event ``handle`` another library
        records (devices with ``"wait_event"``); return the value it completes on.

        The event's latest record when the device reaches the wait is what is
        awaited.  ``arig.cuda.wait_event`` is the friendly form: it reads the handle
        out of torch, CuPy or cuda.core events and awaits the value.  ``keep`` (the
        event object) stays referenced until the value is reached.  Back-pressure,
        cancellation and loss are ``submit``'s.
        """
        if get_ident() != self._tid or not self._running():
            self._check_loop()
        waits = self._waits
        if waits is None:
            raise ArigTypeError(f"{self.name} cannot wait for CUDA events: pass a CUDA device")
        if not 0 < check_index(handle, "handle") < 1 << 64:  # 0 is no event: the driver would refuse the wait, and lose the device
            raise ArigValueError(f"handle must be an event's handle, in 1..2**64-1, got {handle}")
        self._check_usable()
        slot = waits.event_slot(handle)
        item = waits.prepare_event(slot)
        if self._full():
            await self._sub.wait_space(self._check_usable)
            self._check_usable()
        return self._hand_over(waits.join_lane, item, (slot, keep))

    async def dma(self, buf: Buffer, offset: int = 0, nbytes: int | None = None) -> Any:
        """``nbytes`` (all that follows ``offset`` if None) of ``buf`` as a dma-buf another driver can
        import (NV devices, NVIDIA's open kernel modules): a ``Dmabuf`` with ``fd``, ``offset`` and
        ``size``.  The export runs on the submit thread; the kernel driver's refusal raises ``RmError``."""
        self._check_loop()
        dma = self._dmabuf
        if dma is None:
            raise ArigTypeError(f"{self.name} exports no dma-bufs: dma() is for NV devices")
        try:
            offset, n = dma_region(check_buffer(buf, self), offset, nbytes)
        except ArigValueError:
            self._check_usable()  # its own buffer, closed by its stop: refused for the stop (see submit)
            raise
        return await self._control(dma.dma, buf, offset, n)

    async def map_host(self, obj: Any) -> Buffer:
        """Host memory the program already has, mapped for the GPU without a copy (NV devices).

        ``obj``: a writable, C-contiguous object with the buffer protocol (a numpy array, a
        ``bytearray``, an ``mmap``).  The buffer's ``address`` is where the GPU sees it (an address of
        its own: the host's may lie higher than the GPU reaches), ``numpy()`` views ``obj``'s own
        memory, and kernels, copies and releases reach it directly.  The kernel driver pins the pages
        for writing while the buffer lives (``obj`` stays referenced until the GPU's mapping is undone,
        after the work submitted before ``close()``); pages it will not pin (not mapped or not writable,
        a shared mapping of a file on ext4 or xfs since Linux 6.5) raise ``arig.nvrm.PinRefused``, a
        ``ValueError``, as they always would."""
        self._check_loop()
        mh = self._maps_host
        if mh is None:
            raise ArigTypeError(f"{self.name} maps no host memory: map_host() is for NV devices")
        view, address = host_memory(obj)
        self._check_usable()
        buf: Buffer = await self._control(mh.map_host, address, view.nbytes, obj)
        return owned(buf, self)

    def wrap(self, array: Any) -> Buffer:
        """Another library's GPU array (torch, CuPy, anything with ``__cuda_array_interface__``
        or ``__dlpack__``) as a buffer of this device, sharing its memory: ``upload`` and
        ``download`` copy through it.  The array stays referenced while the buffer lives; its
        library frees the memory, never arig.  Order its library's pending writes first (for
        example ``await dev.wait(await dev.submit(None, queue=dev.adopt(stream)))``)."""
        self._check_here_and_usable()
        wraps = self._wraps
        if wraps is None:
            raise ArigTypeError(f"{self.name} wraps no foreign arrays: wrap() is for CUDA devices")
        return owned(wraps.wrap(array), self)
