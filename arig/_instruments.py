"""Instruments: objects told what devices do, for tools that watch them (tests, tracing, metrics).

An ``Instrument`` overrides the hooks it cares about; each is called on the
device's event-loop thread (all but ``on_graph``: see below), synchronously,
at the point named below, with the device first.  Instruments are added for the whole process or for one
device (``add_instrument(ins)``, ``add_instrument(ins, dev)``); a device's
hooks go to the process-wide ones first, then its own, each in the order
added.

Zero cost when none is registered: a device holds ``_ins``, None while no
instrument concerns it, and its hot paths (``submit``, ``wait``) test only
that.  Adding or removing an instrument rebuilds the ``Dispatch`` of the
devices concerned, so the hooks read an immutable tuple and an instrument
may add or remove instruments from inside a hook.

An instrument whose hook raises is a bug in the instrument, not in the
device: the exception is logged at ERROR on the ``arig`` logger, with its
traceback, the instrument is removed (so that a broken one does not flood
the log at every call), and the device goes on as if the hook had returned.
The one way an instrument affects the device is the documented one:
``before_submit`` may hand back a different fill, which is how
``arig.testing.faults`` injects a failing one.

Hooks run on the device's loop thread, but one: ``on_graph`` runs on the
thread that built the graph (a worker thread for ``graph_async``), because
a record, not the device, builds graphs, and it tells the instruments
before the graph reaches the program, so that none is missed.
``add_instrument``, ``remove_instrument`` and ``instruments`` take a lock
and may be called from any thread; an instrument added meanwhile is told
from the device's next call on.

A backend's records (``dev.capability(key)``) know their backend, not the
device over it: ``tell_graph`` and ``tell_loss_seen`` find the device's
dispatch in ``_watched``, a map from backend to device holding both weakly
(a stopped device is collected as if the map were not there), with an entry
only while the device has instruments, so a record that finds the map
empty does nothing more.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ._errors import ArigTypeError, DeviceLost
from ._log import logger
from ._memory import Buffer, Image
from ._port import LoopPort, port_of
from ._timeline import Timeline

if TYPE_CHECKING:  # the device imports this module: its type is for annotations only
    from .device import Device

__all__ = ["Instrument", "Dispatch", "add_instrument", "remove_instrument", "instruments", "attach", "tell_graph", "tell_loss_seen"]


class Instrument:
    """Base class of instruments: every hook does nothing.  Override the ones you need.

    ``dev`` is the ``arig.Device`` concerned.  Hooks run on its loop thread
    (``on_graph`` excepted) and must not block: the device's caller waits for them.
    """

    def before_submit(self, dev: Device, fill: Any, arg: Any, queue: Any, keep: Any) -> tuple[Any, Any, Any] | None:
        """A submission is about to be checked and queued (``queue`` as the caller gave it).

        Return None to leave it be, or ``(fill, arg, keep)`` to submit those
        instead: the substitute is checked as any submission, and ``keep``
        stays referenced until its value is reached.
        """
        return None

    def on_submit(self, dev: Device, v: int, fill: Any, arg: Any, queue: int) -> None:
        """Value ``v`` was assigned to ``fill`` (the one queued) on queue index ``queue``."""

    def before_wait(self, dev: Device, v: int) -> None:
        """A task starts waiting for ``v``, not reached yet (``wait``, or the wait of ``run``)."""

    def after_wait(self, dev: Device, v: int) -> None:
        """That task stopped waiting: ``v`` was reached, the device lost, or the task cancelled."""

    def on_alloc(self, dev: Device, buf: Buffer) -> None:
        """The device made ``buf`` for the program (``alloc``, ``map_host``)."""

    def on_load(self, dev: Device, image: Image) -> None:
        """The device loaded ``image`` (``load``)."""

    def on_loss(self, dev: Device, cause: BaseException) -> None:
        """The device was lost with ``cause`` (once)."""

    def on_loss_seen(self, dev: Device, cause: BaseException) -> None:
        """The program saw the loss: it read ``dev.lost``, or ``DeviceLost`` left a wait or a call
        that runs on the submit thread (``alloc``, ``load``, ``map_host``, ``dma``).

        A call refused at once with ``DeviceLost`` is not told here: ``dev.loss_delivered`` counts it.
        ``DeviceLost`` leaving a CUDA record's ``graph`` or ``graph_async`` is told here too, on
        the loop thread, soon after it left.
        """

    def on_graph(self, dev: Device, graph: Any) -> None:
        """The device's CUDA record (``dev.capability(arig.cuda_abi.KEY)``) made ``graph``.

        Unlike the other hooks, this one runs on the thread that built the
        graph, before the graph reaches the program: a worker thread for
        ``graph_async``, the caller's for ``graph``, and several may run at
        once on devices of one process.  Make it thread-safe, and do not keep
        ``graph`` strongly unless you mean to keep it alive.
        """


_HOOKS = tuple(name for name in vars(Instrument) if name.startswith(("on_", "before_", "after_")))


def _overrides(ins: Instrument, hook: str) -> bool:
    return getattr(type(ins), hook, None) is not getattr(Instrument, hook)


class Dispatch:
    """The instruments of one device, frozen: for each hook, the bound methods that override it."""

    __slots__ = ("_hooks", "own")

    def __init__(self, everywhere: tuple[Instrument, ...], own: tuple[Instrument, ...]) -> None:
        # The device's own instruments live here, on the device, rather than in
        # a table of this module: an instrument that holds its device (a fault
        # does) would keep a table's entry, and so the device, alive for good.
        self.own = own
        found = (*everywhere, *own)
        # Only instruments that override a hook are called for it: an instrument
        # that watches losses is not called at every submission.
        self._hooks: dict[str, tuple[tuple[Instrument, Callable[..., Any]], ...]] = {
            hook: tuple((ins, getattr(ins, hook)) for ins in found if _overrides(ins, hook)) for hook in _HOOKS
        }

    def call(self, hook: str, dev: Device, *args: Any) -> None:
        for ins, fn in self._hooks[hook]:
            try:
                fn(dev, *args)
            except Exception as exc:  # noqa: BLE001 - an instrument's bug is reported, never the device's loss
                _broken(ins, hook, dev, exc)

    def before_submit(self, dev: Device, fill: Any, arg: Any, queue: Any, keep: Any) -> tuple[Any, Any, Any]:
        for ins, fn in self._hooks["before_submit"]:
            try:
                got = fn(dev, fill, arg, queue, keep)
                if got is not None:
                    fill, arg, keep = got
            except Exception as exc:  # noqa: BLE001
                _broken(ins, "before_submit", dev, exc)
        return fill, arg, keep

    async def wait(self, dev: Device, v: int, wait: Callable[[int], Awaitable[None]]) -> None:
        if v <= dev.reached:
            await wait(v)
            return
        self.call("before_wait", dev, v)
        try:
            await wait(v)
        except DeviceLost as lost:
            self.call("on_loss_seen", dev, lost.cause)
            raise
        finally:
            self.call("after_wait", dev, v)

    async def control(self, dev: Device, result: Awaitable[Any]) -> Any:
        """Await a control's result (alloc, map_host, load, dma) and tell what it made."""
        try:
            made = await result
        except DeviceLost as lost:
            self.call("on_loss_seen", dev, lost.cause)
            raise
        if isinstance(made, Buffer):
            self.call("on_alloc", dev, made)
        elif isinstance(made, Image):
            self.call("on_load", dev, made)
        return made


def _broken(ins: Instrument, hook: str, dev: Device, exc: Exception) -> None:
    logger.error("instrument %r raised in %s on device %s; it was removed", ins, hook, dev.name, exc_info=exc)
    with _lock:
        everywhere = ins in _global
        if everywhere:
            _global.remove(ins)
        _set_own(dev, tuple(i for i in _own(dev) if i is not ins))
    if everywhere:
        _refresh(None)


_lock = threading.Lock()
_global: list[Instrument] = []
#: Every device, to a port of its loop: ``tell_loss_seen`` posts from other threads, and ports are made on the loop's.
_attached: weakref.WeakKeyDictionary[Device, LoopPort] = weakref.WeakKeyDictionary()
#: Backend -> its device, for the devices that have instruments (see the module's docstring).
_watched: weakref.WeakKeyDictionary[Any, weakref.ref[Device]] = weakref.WeakKeyDictionary()


def attach(dev: Device, tl: Timeline) -> None:
    """``dev`` was made over ``tl`` (loop thread, in its construction): give it its dispatch."""
    dev._ins = None
    with _lock:
        _attached[dev] = port_of(dev._loop)
    tl.on_fail(_loss_callback(weakref.ref(dev), tl))
    _refresh(dev)


def _loss_callback(ref: weakref.ref[Device], tl: Timeline) -> Callable[[], None]:
    def lost() -> None:  # holds the device weakly: the device's finalizer must still run
        dev = ref()
        if dev is not None and dev._ins is not None and tl.cause is not None:
            dev._ins.call("on_loss", dev, tl.cause)

    return lost


def _own(dev: Device) -> tuple[Instrument, ...]:
    return () if dev._ins is None else dev._ins.own


def _set_own(dev: Device, own: tuple[Instrument, ...]) -> None:
    """Give ``dev`` a dispatch of the process's instruments and ``own`` (under the lock)."""
    everywhere = tuple(_global)
    dev._ins = Dispatch(everywhere, own) if everywhere or own else None
    if dev._ins is not None:
        _watched[dev._backend] = weakref.ref(dev)
    else:
        _watched.pop(dev._backend, None)


def _watcher(backend: Any) -> tuple[Device, Dispatch] | None:
    """The device over ``backend`` and its dispatch, if it has instruments (any thread)."""
    if not _watched:  # no instrument anywhere: nothing more to look up
        return None
    with _lock:
        ref = _watched.get(backend)
    dev = None if ref is None else ref()
    ins = None if dev is None else dev._ins
    return None if dev is None or ins is None else (dev, ins)


def tell_graph(backend: Any, graph: Any) -> None:
    """A record of ``backend`` made ``graph``: call ``on_graph`` here, on the thread that built it."""
    found = _watcher(backend)
    if found is not None:
        found[1].call("on_graph", found[0], graph)


def tell_loss_seen(backend: Any, cause: BaseException) -> None:
    """``DeviceLost`` with ``cause`` left a call of a record of ``backend`` (any thread): call
    ``on_loss_seen`` on the device's loop thread, as every hook but ``on_graph``."""
    found = _watcher(backend)
    if found is not None:
        with _lock:
            port = _attached.get(found[0])
        if port is not None:
            port.post(_loss_seen, weakref.ref(found[0]), cause)


def _loss_seen(ref: weakref.ref[Device], cause: BaseException) -> None:
    dev = ref()  # weakly: a device dropped meanwhile is told nothing, and collected
    if dev is not None and dev._ins is not None:
        dev._ins.call("on_loss_seen", dev, cause)


def _refresh(dev: Device | None) -> None:
    """Rebuild the dispatch of ``dev`` (every attached device if None): the process's instruments changed."""
    with _lock:
        for d in [dev] if dev is not None else list(_attached):
            _set_own(d, _own(d))


def _check(instrument: Any, device: Any) -> None:
    if not isinstance(instrument, Instrument):
        raise ArigTypeError(f"expected an arig Instrument, got {type(instrument).__name__}")
    if device is not None and not hasattr(device, "_ins"):  # only devices made by arig.open are attached
        raise ArigTypeError(f"device must be an open arig.Device or None, got {type(device).__name__}")


def add_instrument(instrument: Instrument, device: Device | None = None) -> None:
    """Tell ``instrument`` what ``device`` does (every device, existing and later, if None).

    Adding an instrument already there does nothing: each is called once per event.
    """
    _check(instrument, device)
    with _lock:
        if device is not None:
            if instrument not in _own(device):
                _set_own(device, (*_own(device), instrument))
            return
        if instrument not in _global:
            _global.append(instrument)
    _refresh(None)


def remove_instrument(instrument: Instrument, device: Device | None = None) -> None:
    """Stop telling ``instrument`` (added for ``device``, or process-wide if None); KeyError if it was not added."""
    with _lock:
        where = list(_global if device is None else _own(device))
        if instrument not in where:
            raise KeyError(f"{instrument!r} is not an instrument of {'the process' if device is None else device.name}")
        where.remove(instrument)
        if device is not None:
            _set_own(device, tuple(where))
            return
        _global[:] = where
    _refresh(None)


def instruments(device: Device | None = None) -> tuple[Instrument, ...]:
    """The process-wide instruments (None), or those added for ``device`` alone."""
    with _lock:
        return tuple(_global) if device is None else _own(device)
