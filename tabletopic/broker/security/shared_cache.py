"""A broker's in-memory copy of security state every broker of a cluster shares: the ACLs and the
client quotas, stored in the metadata database and checked on every request, so never read from
it per request.

A change made through one broker is re-read there at once and announced to the others
(:attr:`SharedCache.on_change`; in a cluster a NOTIFY, see ``ClusterRole.follow``), which re-read it
when the NOTIFY arrives: a grant made through broker 1 holds on broker 3 tens of milliseconds later,
as a KRaft cluster's metadata log delivers it, not after a polling interval. The copy is also
re-read every :data:`REFRESH_SECONDS`, for a change whose announcement was lost (the database
connection dropped in between).
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable

from tabletopic.tasks import cancel_and_wait

log = logging.getLogger(__name__)

REFRESH_SECONDS = 5.0


class SharedCache(ABC):
    """Start, stop, periodic re-reading and change announcements of one cached piece of shared
    state; subclasses say how it is read (:meth:`refresh`) and what it is called in the log."""

    what: str  # "ACLs", "client quotas": named in log lines
    kind: str  # "acls", "quotas": names the change in announcements

    def __init__(self) -> None:
        # Awaited after a change made through this broker: the cluster tells the other brokers.
        self.on_change: list[Callable[[], Awaitable[None]]] = []
        self._task: asyncio.Task[None] | None = None

    @abstractmethod
    async def refresh(self) -> None:
        """Replace the copy with what the database holds now."""

    async def start(self, poll: bool = True) -> None:
        """Read the state; with ``poll``, re-read it every :data:`REFRESH_SECONDS` from now on."""
        await self.refresh()
        if poll:
            self._task = asyncio.create_task(self._refresh_loop(), name=f"refresh {self.what}")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None

    async def changed(self) -> None:
        """After a change stored through this broker: re-read it here, then announce it. An
        announcement that fails is logged, not raised: the change is stored, and the other
        brokers' periodic re-read still finds it."""
        await self.refresh()
        for announce in self.on_change:
            try:
                await announce()
            except Exception:
                log.warning(
                    "could not tell the other brokers that %s changed; they re-read them within %.0f s",
                    self.what,
                    REFRESH_SECONDS,
                    exc_info=True,
                )

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_SECONDS)
            try:
                await self.refresh()
            except Exception:  # keep the copy in force; the database may be back soon
                log.warning("could not re-read %s; keeping the previous ones", self.what, exc_info=True)
