"""The node's :class:`QuotaService`: the client quotas of the metadata database, which
DescribeClientQuotas and AlterClientQuotas (``broker/handlers/client_quotas.py``) read and alter and
:mod:`~tabletopic.broker.security.quota_guard` enforces."""

from __future__ import annotations

import asyncio
import logging

from tabletopic.broker.security import settings
from tabletopic.broker.security.quotas import QuotaTracker, decode_entity
from tabletopic.broker.security.store import SecurityStore
from tabletopic.config import Config
from tabletopic.tasks import cancel_and_wait

log = logging.getLogger(__name__)

REFRESH_SECONDS = 5.0


class QuotaService:
    """The quotas of one node: stored in the database, held by a :class:`QuotaTracker` that measures
    rates; re-read every few seconds so quotas altered through another node apply here too."""

    def __init__(self, config: Config, store: SecurityStore) -> None:
        self.store = store
        self.tracker = QuotaTracker(
            config.get(settings.QUOTA_WINDOW_NUM), config.get(settings.QUOTA_WINDOW_SIZE_SECONDS)
        )
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.refresh()
        self._task = asyncio.create_task(self._refresh_loop(), name="quota-refresh")

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None

    async def refresh(self) -> None:
        stored = await asyncio.to_thread(self.store.quotas)
        self.tracker.replace({decode_entity(entity): values for entity, values in stored.items()})

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_SECONDS)
            try:
                await self.refresh()
            except Exception:  # keep the quotas in force; the database may be back soon
                log.warning("could not re-read client quotas; keeping the previous ones", exc_info=True)
