"""The node's :class:`QuotaService`: the client quotas of the metadata database, which
DescribeClientQuotas and AlterClientQuotas (``broker/handlers/client_quotas.py``) read and alter and
:mod:`~tabletopic.broker.security.quota_guard` enforces."""

from __future__ import annotations

import asyncio

from tabletopic.broker.security import settings
from tabletopic.broker.security.quotas import QuotaTracker, decode_entity
from tabletopic.broker.security.shared_cache import SharedCache
from tabletopic.broker.security.store import SecurityStore
from tabletopic.config import Config


class QuotaService(SharedCache):
    """The quotas of one node: stored in the database, held by a :class:`QuotaTracker` that measures
    rates; quotas altered through another broker of a cluster apply here as soon as it announces them
    (:mod:`~tabletopic.broker.security.shared_cache`)."""

    what = "client quotas"
    kind = "quotas"

    def __init__(self, config: Config, store: SecurityStore) -> None:
        super().__init__()
        self.store = store
        self.tracker = QuotaTracker(
            config.get(settings.QUOTA_WINDOW_NUM), config.get(settings.QUOTA_WINDOW_SIZE_SECONDS)
        )

    async def refresh(self) -> None:
        stored = await asyncio.to_thread(self.store.quotas)
        self.tracker.replace({decode_entity(entity): values for entity, values in stored.items()})

    async def alter(self, changes: list[tuple[str, str, float | None]]) -> None:
        """Store ``(encoded entity, key, value or None to remove)`` changes and put them in force
        here and, in a cluster, on every broker."""
        await asyncio.to_thread(self.store.alter_quotas, changes)
        await self.changed()
