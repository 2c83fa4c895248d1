"""``StorageComponent``: builds the S3Stream store from the node's configuration and starts it; the
parts above it get the started store (:attr:`StorageComponent.store`) and the object-store spec
Spark executors use to read object slices directly (:attr:`StorageComponent.object_store_spec`)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from sqlalchemy.engine import Engine

from tabletopic.component import Started
from tabletopic.config import Config
from tabletopic.s3stream.config import StoreSettings
from tabletopic.s3stream.objectstore import (
    ObjectStoreSpec,
    S3ObjectStore,
    object_store_spec,
    open_object_store,
)
from tabletopic.s3stream.store import S3StreamStore

log = logging.getLogger(__name__)


def build_store(
    config: Config, engine: Engine, registry: CollectorRegistry | None = None, owned_only: bool = False
) -> S3StreamStore:
    """The configured store, not yet started (``owned_only``: cluster mode, see S3StreamStore)."""
    return S3StreamStore(
        StoreSettings.from_config(config),
        engine,
        open_object_store(object_store_spec(config)),
        registry,
        owned_only,
    )


@dataclass(eq=False)
class StorageComponent:
    """The node's stream store.

    Args:
        metrics: where the store's metrics go (None: nowhere).
        owned_only: cluster mode (see :class:`~tabletopic.s3stream.store.S3StreamStore`).
    """

    name = "storage"

    config: Config
    engine: Engine
    metrics: CollectorRegistry | None = None
    owned_only: bool = False
    _store: S3StreamStore | None = field(default=None, init=False)
    _object_store_spec: ObjectStoreSpec | None = field(default=None, init=False)

    store = Started[S3StreamStore]("stream store")
    # Where the objects live, for Spark executors (frozen, picklable).
    object_store_spec = Started[ObjectStoreSpec]("object store spec")

    async def start(self) -> None:
        self._object_store_spec = object_store_spec(self.config)
        objects = open_object_store(self._object_store_spec)
        if isinstance(objects, S3ObjectStore):
            await asyncio.to_thread(objects.check_bucket)  # a user-fixable failure reads as one line
        store = S3StreamStore(
            StoreSettings.from_config(self.config), self.engine, objects, self.metrics, self.owned_only
        )
        await store.start()
        self._store = store

    async def stop(self) -> None:
        if self._store is not None:
            await self._store.close()
            self._store = None
