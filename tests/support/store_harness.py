"""The storage engine under test: a harness that builds stores over one data directory, metadata
DB and object store, small thresholds that make uploads and compaction happen within a test, and
recognisable payloads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from tabletopic import database
from tabletopic.s3stream.config import StoreSettings
from tabletopic.s3stream.objectstore import (
    LocalObjectStoreSpec,
    ObjectStoreSpec,
    S3ObjectStoreSpec,
    open_object_store,
)
from tabletopic.s3stream.store import S3StreamStore

# Small thresholds so that uploads, splits and compaction all happen within a test's few MiB.
FAST = {
    "upload_interval_ms": 200,
    "upload_bytes": 256 * 1024,
    "object_batch_ms": 10,
    "object_batch_bytes": 256 * 1024,
    "split_bytes": 64 * 1024,
    "block_bytes": 8 * 1024,
    "readahead_bytes": 32 * 1024,
    "compaction_interval_ms": 0,
    "delete_grace_ms": 0,
    "small_object_bytes": 1024 * 1024,
    "max_object_bytes": 4 * 1024 * 1024,
    "compaction_rate": 256 * 1024 * 1024,
    "wal_segment_bytes": 4 * 1024 * 1024,  # each store zero-fills one spare segment ahead
}


def local_object_settings(tmp_path: Path) -> LocalObjectStoreSpec:
    return LocalObjectStoreSpec(root=str(tmp_path / "objects"))


def s3_object_settings(s3: dict[str, str]) -> S3ObjectStoreSpec:
    return S3ObjectStoreSpec(
        bucket=s3["s3.bucket"],
        endpoint=s3["s3.endpoint"],
        region=s3["s3.region"],
        access_key=s3["s3.access.key"],
        secret_key=s3["s3.secret.key"],
        path_style=True,
        prefix=s3["s3.prefix"],
        retries=3,
    )


@dataclass
class StoreHarness:
    """Builds stores over one data directory, metadata DB and object store, so that a test can
    close (or abandon) a store and open a new one on the same state."""

    root: Path
    wal_mode: str
    object_settings: ObjectStoreSpec
    url: str
    overrides: dict[str, Any] = field(default_factory=dict)
    stores: list[S3StreamStore] = field(default_factory=list)
    engines: list[Engine] = field(default_factory=list)

    def settings(self, **changes: Any) -> StoreSettings:
        values = {**FAST, **self.overrides, **changes}
        return StoreSettings(wal_mode=self.wal_mode, wal_dir=self.root / "wal", **values)

    def object_store(self) -> Any:
        return open_object_store(self.object_settings)

    async def open(self, owned_only: bool = False, **changes: Any) -> S3StreamStore:
        engine = database.create_engine(self.url)
        self.engines.append(engine)
        store = S3StreamStore(self.settings(**changes), engine, self.object_store(), owned_only=owned_only)
        await store.start()
        self.stores.append(store)
        return store

    async def reopen(self, store: S3StreamStore, **changes: Any) -> S3StreamStore:
        await store.close()
        return await self.open(**changes)

    async def close_all(self) -> None:
        for store in self.stores:
            await store.close()
        for engine in self.engines:
            engine.dispose()


def payload_for(stream_id: int, index: int, size: int) -> bytes:
    """Deterministic, distinguishable bytes for the ``index``-th batch of a stream."""
    head = f"{stream_id}:{index}:".encode()
    return (head * (size // len(head) + 1))[:size]


PayloadFn = Callable[[int, int, int], bytes]
