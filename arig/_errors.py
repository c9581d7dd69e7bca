"""arig's one exception tree.

Every error arig raises on purpose descends from :class:`ArigError`.  Misuse
errors also inherit the matching built-in, so ``except ValueError`` keeps
working for callers that do not know arig.

Every error pickles, whatever arguments its constructor takes: a worker pool
or a process that holds a device sends its failures to another process, and
a :class:`DeviceLost` keeps its message and its cause's text there even when
the cause itself cannot be pickled.
"""

from __future__ import annotations

import pickle
import traceback
import weakref
from typing import Any

__all__ = [
    "ArigError",
    "OpenError",
    "DeviceLost",
    "DeviceStopped",
    "DeviceHang",
    "ArigValueError",
    "ArigTypeError",
    "ArigKeyError",
    "WrongLoopError",
    "FillError",
    "ForeignError",
]


def describe(exc: BaseException) -> str:
    """``"Type: text"`` of an exception, even one whose ``str()`` raises.

    A failure reaches every waiter through a message built from it; if
    building that message raised, the waiters would never be told.
    """
    if isinstance(exc, ForeignError):
        return f"{exc.type_name}: {exc}"
    try:
        text = str(exc)
    except BaseException:  # noqa: BLE001 - any __str__ may fail; the failure must still be told
        text = "<str() of this exception raised>"
    return f"{type(exc).__name__}: {text}"


def safe_repr(obj: object, limit: int = 120) -> str:
    """``repr(obj)`` shortened to ``limit`` characters, or its type's name if that repr raises.

    For messages about a caller's objects: refusing bad input must not fail
    on the bad input's own ``__repr__``.
    """
    try:
        text = repr(obj)
    except BaseException:  # noqa: BLE001 - see describe()
        return f"<{type(obj).__name__} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _rebuild(cls: type[ArigError], args: tuple[Any, ...]) -> ArigError:
    """Unpickle an error without calling its ``__init__`` (which takes other arguments than ``args``)."""
    # The built-in base whose __new__ the class's own construction uses: with
    # several built-in bases (CudaOutOfMemory is a MemoryError), cls.__new__
    # may name another, which refuses to make the class.
    base: Any = cls
    while base.__module__ != "builtins":
        base = base.__base__
    exc: ArigError = base.__new__(cls)
    exc.args = args
    return exc


class ArigError(Exception):
    """Root of every error arig raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        # The message is in args, the attributes in __dict__: neither needs __init__.
        return (_rebuild, (type(self), self.args), dict(self.__dict__) or None)


class OpenError(ArigError):
    """An opener could not make its device; the message says why."""


class DeviceStopped(ArigError):
    """The device was stopped: it takes no more work."""


class ForeignError(ArigError):
    """A failure that could not be pickled, as it crossed to another process.

    ``type_name`` is its type's name and ``str()`` its text: what a
    :class:`DeviceLost` keeps of a cause defined only in the process it
    happened in.
    """

    type_name: str

    @classmethod
    def of(cls, exc: BaseException) -> ForeignError:
        try:
            text = str(exc)
        except BaseException:  # noqa: BLE001 - see describe()
            text = "<str() of this exception raised>"
        new = cls(text)
        new.type_name = type(exc).__name__
        return new


def _portable(cause: BaseException | None) -> BaseException | None:
    """``cause`` if it survives a pickle round trip, else its :class:`ForeignError` stand-in."""
    if cause is None:
        return None
    try:
        pickle.loads(pickle.dumps(cause, pickle.HIGHEST_PROTOCOL))
    except BaseException:  # noqa: BLE001 - anything a foreign __reduce__/__init__ raises
        return ForeignError.of(cause)
    return cause


def forget_frames(exc: BaseException) -> None:
    """Drop ``exc``'s traceback, and those of the exceptions chained to it, keeping where it was raised as a note.

    A failure kept for the life of a device (``Device.lost``) would otherwise keep
    every frame its traceback reaches, and through each frame's callers the
    locals of the thread it was raised on: the arg of the fill that raised, the
    backend that called it.  Clearing frames is not enough (a frame keeps its
    caller, which may still run), so the traceback goes, and its text stays:
    printed, the failure still says where it was raised.  Loop thread.
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        tb = e.__traceback__
        if tb is not None:
            where = "".join(traceback.format_tb(tb)).rstrip()
            e.__traceback__ = None
            try:
                e.add_note(f"Traceback (most recent call last; its frames were let go when the device stopped):\n{where}")
            except Exception:  # noqa: BLE001 - an exception type that refuses notes keeps its message only
                pass
        todo += (e.__cause__, e.__context__)


#: A live DeviceLost per cause (by ``id``; the entry holds its cause, so the id stays its own):
#: every waiter of one loss gets its own exception, and they all share one message string.
_lost_by_cause: weakref.WeakValueDictionary[int, DeviceLost] = weakref.WeakValueDictionary()


class DeviceLost(ArigError):
    """The device failed and takes no more work.

    Every pending and later wait and every later submit raises this, with the
    failure that lost the device chained as ``__cause__`` and named in the
    message.  The same failure is kept in ``Device.lost``.
    """

    device: str

    def __init__(self, device: str, cause: BaseException) -> None:
        # Each waiter gets its own exception (each is raised, and grows its own traceback),
        # but one loss has one message: a cause with a long text would otherwise be
        # copied once per waiter and per later call.
        other = _lost_by_cause.get(id(cause))
        if other is not None and other.__cause__ is cause and other.device == device and other.args:
            message = other.args[0]
        else:
            message = f"device {device} lost: {describe(cause)}"
        super().__init__(message)
        self.device = device
        self.__cause__ = cause
        if other is None:
            _lost_by_cause[id(cause)] = self

    @property
    def cause(self) -> BaseException:
        """The failure that lost the device (a :class:`ForeignError` once unpickled, if it could not be pickled)."""
        assert self.__cause__ is not None
        return self.__cause__

    def __reduce__(self) -> tuple[Any, ...]:
        state = dict(self.__dict__)
        state["__cause__"] = _portable(self.__cause__)  # restored by BaseException.__setstate__
        return (_rebuild, (type(self), self.args), state)


class DeviceHang(ArigError):
    """Work was pending and the device made no progress for ``hang_ms``."""


class ArigValueError(ArigError, ValueError):
    """Bad input: a value out of range or of the wrong shape."""


class ArigTypeError(ArigError, TypeError):
    """Bad input: an object of the wrong type, or an operation this kind of device does not have."""


class ArigKeyError(ArigValueError, KeyError):
    """Bad input: a name that is not there (also a ``KeyError``, for lookups)."""

    # KeyError's str() is the repr of its argument: the message would print in quotes.
    __str__ = BaseException.__str__


class WrongLoopError(ArigError, RuntimeError):
    """A device was used from an event loop, or a thread, other than the one it was opened on.

    Its futures belong to that loop and its threads report to it, so it is
    refused before anything changes: open a device in each loop that uses one.
    """


class FillError(ArigError):
    """A fill returned a nonzero code: the device is lost with this as cause."""

    code: int

    def __init__(self, code: int, detail: str = "") -> None:
        self.code = code
        super().__init__(f"fill returned {code}" + (f" ({detail})" if detail else ""))
