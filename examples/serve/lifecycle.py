"""How a runner says it is lost or stopped (``Runner.stop``, ``lost``, ``stopped``), once
for the arig runners and once for the baselines; the runners add ``start`` and ``infer``.
All on the event loop."""

from __future__ import annotations

from typing import Any

__all__ = ["ArigRunner", "BaselineRunner"]


class ArigRunner:
    """An arig runner: ``self.dev`` is the device ``start`` opened (None before), and the
    device itself says whether it is lost or stopped."""

    dev: Any = None

    async def stop(self) -> None:
        if self.dev is not None:
            await self.dev.stop()

    @property
    def lost(self) -> BaseException | None:
        return None if self.dev is None else self.dev.lost

    @property
    def stopped(self) -> bool:
        return self.dev is not None and self.dev.stopped


class BaselineRunner:
    """A baseline runner: no device object to ask, so the runner keeps what broke it
    (``_lost``, set by a runner whose wait can fail) and whether ``stop`` ran."""

    _lost: BaseException | None = None
    _stopped = False

    async def stop(self) -> None:
        self._stopped = True

    @property
    def lost(self) -> BaseException | None:
        return self._lost

    @property
    def stopped(self) -> bool:
        return self._stopped
