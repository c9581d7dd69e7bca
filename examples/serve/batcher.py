"""Dynamic batching on the event loop: requests wait at most ``max_wait_ms`` to share one submit.

Each request appends its input and a future to ``pending``; one collector
task cuts batches of up to ``max_batch`` rows, as soon as a batch is full or
its oldest request has waited ``max_wait_ms``, and runs each batch as its own
task, at most ``max_inflight`` at once.  Everything here runs on the loop:
no request crosses a thread, and a batch costs one runner call (one submit).

Back-pressure: a request that finds ``max_queue`` requests already pending
is refused at once (``Overloaded``, the server's 503) instead of queueing
without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any

import numpy as np

from .metrics import Metrics

__all__ = ["Batcher", "Overloaded", "Stopped"]


class Overloaded(Exception):
    """More than ``max_queue`` requests are pending: answer 503 and ask the client to retry later."""


class Stopped(Exception):
    """The server is shutting down: the request was never run."""


class Batcher:
    """Cuts pending requests into batches and runs them on ``runner`` (``await runner.infer(x)``)."""

    def __init__(self, runner: Any, metrics: Metrics, *, max_batch: int, max_wait_ms: float, max_queue: int, max_inflight: int) -> None:
        if max_batch < 1 or max_queue < 1 or max_inflight < 1 or max_wait_ms < 0:
            raise ValueError("max_batch, max_queue and max_inflight must be >= 1 and max_wait_ms >= 0")
        self.runner = runner
        self.metrics = metrics
        self.max_batch = max_batch
        self.max_wait = max_wait_ms / 1000.0
        self.max_queue = max_queue
        self.max_inflight = max_inflight
        self.inflight = 0
        self._pending: deque[tuple[np.ndarray, asyncio.Future[np.ndarray], float]] = deque()
        self._slots = asyncio.Semaphore(max_inflight)
        self._wake: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._collector: asyncio.Task[None] | None = None
        self._loop = asyncio.get_running_loop()

    @property
    def depth(self) -> int:
        """Requests waiting for a batch (not yet running)."""
        return len(self._pending)

    def start(self) -> None:
        self._collector = self._loop.create_task(self._collect(), name="serve-batcher")

    async def infer(self, x: np.ndarray) -> np.ndarray:
        """The model's answer to one input row; raises Overloaded at once when the queue is full."""
        if self._collector is None or self._collector.done():
            raise Stopped("the server is not serving")
        if len(self._pending) >= self.max_queue:
            raise Overloaded(f"{len(self._pending)} requests pending (max_queue={self.max_queue})")
        fut: asyncio.Future[np.ndarray] = self._loop.create_future()
        self._pending.append((x, fut, self._loop.time()))
        n = len(self._pending)
        if (n == 1 or n >= self.max_batch) and self._wake is not None and not self._wake.done():
            self._wake.set_result(None)
        return await fut

    async def _sleep_until_woken(self, delay: float | None) -> None:
        wake = self._wake = self._loop.create_future()
        timer = None if delay is None else self._loop.call_later(delay, _settle, wake)
        try:
            await wake
        finally:
            self._wake = None
            if timer is not None:
                timer.cancel()

    async def _collect(self) -> None:
        pending, loop = self._pending, self._loop
        while True:
            if not pending:
                await self._sleep_until_woken(None)
                continue
            # Fill the batch until it is full or its oldest request has waited max_wait.
            deadline = pending[0][2] + self.max_wait
            while len(pending) < self.max_batch and (delay := deadline - loop.time()) > 0:
                await self._sleep_until_woken(delay)
            await self._slots.acquire()  # meanwhile more requests may join: the batch is cut after
            n = min(len(pending), self.max_batch)
            batch = [pending.popleft() for _ in range(n)]
            self.inflight += 1
            task = loop.create_task(self._run(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[tuple[np.ndarray, asyncio.Future[np.ndarray], float]]) -> None:
        try:
            x = np.stack([row for row, _, _ in batch]) if len(batch) > 1 else batch[0][0][None, :]
            y = await self.runner.infer(x)
        except asyncio.CancelledError:
            for _, fut, _ in batch:
                if not fut.done():
                    fut.set_exception(Stopped("the server stopped before the batch ran"))
            raise
        except Exception as exc:  # noqa: BLE001 - every waiter of the batch is told
            for _, fut, _ in batch:
                if not fut.done():
                    fut.set_exception(exc)
        else:
            for i, (_, fut, _) in enumerate(batch):
                if not fut.done():  # a client that went away cancelled its wait
                    fut.set_result(y[i])
        finally:
            self.metrics.batch(len(batch))
            self.inflight -= 1
            self._slots.release()

    async def stop(self) -> None:
        """Stop cutting batches, let running batches finish, refuse what is still pending."""
        if self._collector is not None:
            self._collector.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._collector
        if self._tasks:
            await asyncio.wait(list(self._tasks))
        while self._pending:
            _, fut, _ = self._pending.popleft()
            if not fut.done():
                fut.set_exception(Stopped("the server stopped before the request ran"))


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)

