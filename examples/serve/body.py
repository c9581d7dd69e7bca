"""Reading and parsing ``POST /infer``'s body: bounded in size, off the event loop when large.

A body is read chunk by chunk up to ``max_body_bytes`` (its ``Content-Length``
is checked first, so an announced oversize body is refused unread): past it
the answer is 413, and the rest is never buffered.  Parsing a large body
takes the event loop long enough to delay every other request, so a body of
more than ``PARSE_OFF_LOOP_BYTES`` is parsed on a worker thread.  Every way a
body can be wrong, non-finite numbers included (JSON's ``NaN`` and
``Infinity``, and ``1e400`` or ``1e39``, which overflow to infinity), is a
:class:`BadBody` naming the problem, which the app answers with its status.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio.to_thread
import numpy as np
from starlette.requests import ClientDisconnect, Request

from .model import IN

__all__ = ["BadBody", "Gone", "read_x", "PARSE_OFF_LOOP_BYTES", "DEFAULT_MAX_BODY_BYTES"]

#: A body of ``{"x": [64 numbers]}`` is a few KiB; the default limit leaves room for any spelling of them.
DEFAULT_MAX_BODY_BYTES = 1 << 20
#: Bodies larger than this are parsed on a worker thread: the loop keeps serving meanwhile.
PARSE_OFF_LOOP_BYTES = 64 << 10

log = logging.getLogger("examples.serve")


class BadBody(Exception):
    """A body the server refuses: ``status`` (400 or 413) and a message for the client."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Gone(Exception):
    """The client disconnected before its body was read: nobody is left to answer."""


async def read_x(request: Request, max_body_bytes: int) -> np.ndarray:
    """The request's ``x`` as float32 numbers, all finite, of shape ``(IN,)``."""
    body = await _read(request, max_body_bytes)
    if len(body) > PARSE_OFF_LOOP_BYTES:
        return await anyio.to_thread.run_sync(parse_x, body)
    return parse_x(body)


async def _read(request: Request, limit: int) -> bytes:
    announced = request.headers.get("content-length")
    if announced is not None and announced.isdigit() and int(announced) > limit:
        raise BadBody(413, f"the body of {announced} bytes is larger than this server takes ({limit} bytes)")
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BadBody(413, f"the body is larger than this server takes ({limit} bytes)")
            chunks.append(chunk)
    except ClientDisconnect:
        log.debug("client disconnected after %d bytes of its body", size)
        raise Gone from None
    return b"".join(chunks)


def _no_constant(name: str) -> Any:
    raise BadBody(400, f"x must be finite numbers, got {name}")


def parse_x(body: bytes) -> np.ndarray:
    """``body``'s ``x`` (any thread: pure); BadBody naming why it is not ``{"x": [IN finite numbers]}``."""
    expected = f'expected JSON {{"x": [{IN} numbers]}}'
    try:
        doc = json.loads(body, parse_constant=_no_constant)
    except RecursionError:
        raise BadBody(400, f"{expected}: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise BadBody(400, f"{expected}: {exc}") from None
    if not isinstance(doc, dict) or "x" not in doc:
        raise BadBody(400, f"{expected}, got {type(doc).__name__ if not isinstance(doc, dict) else 'an object with no x'}")
    try:
        with np.errstate(over="ignore"):  # 1e39 becomes inf, refused just below
            x = np.asarray(doc["x"], dtype=np.float32)
    except (ValueError, TypeError, OverflowError) as exc:  # OverflowError: an int like 10**400
        raise BadBody(400, f"{expected}: {exc}") from None
    if x.shape != (IN,):
        raise BadBody(400, f"x must be {IN} numbers, got shape {list(x.shape)}")
    if not np.isfinite(x).all():
        raise BadBody(400, "x must be finite numbers: some are too large for float32 (past 3.4e38)")
    return x
