"""``StorageComponent``: builds the S3Stream store from the node's configuration, starts it and
publishes it as ``platform.services["streams"]`` (plus the object-store settings Spark executors use
to read object slices directly, as ``platform.services["object_store_settings"]``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from tabletopic.config import Config
from tabletopic.s3stream.config import StoreSettings
from tabletopic.s3stream.objectstore import object_store_settings, open_object_store
from tabletopic.s3stream.store import S3StreamStore

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from sqlalchemy.engine import Engine

    from tabletopic.platform import Platform

log = logging.getLogger(__name__)


def build_store(config: Config, engine: Engine, registry: CollectorRegistry | None = None) -> S3StreamStore:
    """The configured store, not yet started."""
    store_settings = object_store_settings(config)
    return S3StreamStore(
        StoreSettings.from_config(config), engine, open_object_store(store_settings), registry
    )


class StorageComponent:
    name = "storage"

    def __init__(self) -> None:
        self.store: S3StreamStore | None = None
        self.object_store_settings: dict[str, Any] = {}

    async def start(self, platform: Platform) -> None:
        self.object_store_settings = object_store_settings(platform.config)
        self.store = build_store(platform.config, platform.engine, platform.metrics)
        await self.store.start()
        platform.services["streams"] = self.store
        platform.services["object_store_settings"] = dict(self.object_store_settings)

    async def stop(self) -> None:
        if self.store is not None:
            await self.store.close()
            self.store = None
