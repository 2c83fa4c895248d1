"""Typed settings of one store, resolved from :class:`tabletopic.config.Config` once at start-up so
the hot path never looks keys up (and so tests and benches can build a store without a Config)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tabletopic.config import Config
from tabletopic.s3stream import settings as keys
from tabletopic.s3stream.settings import WalMode

__all__ = ["StoreSettings", "WalMode"]


@dataclass(frozen=True)
class StoreSettings:
    wal_mode: WalMode = WalMode.LOCAL
    wal_dir: Path = Path("./data/wal")
    # Shared mode: the directory every broker reaches (``wal_dir`` is this node's under it).
    wal_path: Path | None = None
    node_id: int = 0  # shared mode: broker.id, which names this broker's directory under wal_path
    wal_segment_bytes: int = 64 * keys.MiB
    wal_capacity_bytes: int = 1024 * keys.MiB
    object_batch_ms: int = 5
    object_max_in_flight: int = 1
    object_batch_bytes: int = 8 * keys.MiB
    upload_interval_ms: int = 10_000
    upload_bytes: int = 64 * keys.MiB
    split_bytes: int = 16 * keys.MiB
    block_bytes: int = 1 * keys.MiB
    log_cache_bytes: int = 256 * keys.MiB
    block_cache_bytes: int = 128 * keys.MiB
    readahead_bytes: int = 4 * keys.MiB
    append_timeout_ms: int = 30_000
    compaction_interval_ms: int = 60_000
    compaction_rate: int = 64 * keys.MiB
    small_object_bytes: int = 32 * keys.MiB
    max_object_bytes: int = 256 * keys.MiB
    delete_grace_ms: int = 120_000
    object_threads: int = 8

    @classmethod
    def from_config(cls, config: Config) -> StoreSettings:
        mode = WalMode(config.get(keys.WAL_MODE))
        wal_dir = config.get(keys.WAL_DIR) or str(config.data_dir / "wal")
        wal_path = None
        if mode is WalMode.SHARED:
            wal_path = shared_wal_path(config)
            wal_dir = str(wal_path / str(config.get("broker.id")))
        return cls(
            wal_mode=mode,
            wal_dir=Path(wal_dir).expanduser().resolve(),
            wal_path=wal_path,
            node_id=int(config.get("broker.id")) if wal_path is not None else 0,
            wal_segment_bytes=config.get(keys.WAL_SEGMENT_BYTES),
            wal_capacity_bytes=config.get(keys.WAL_CAPACITY_BYTES),
            object_batch_ms=config.get(keys.WAL_OBJECT_BATCH_MS),
            object_batch_bytes=config.get(keys.WAL_OBJECT_BATCH_BYTES),
            object_max_in_flight=config.get(keys.WAL_OBJECT_MAX_IN_FLIGHT),
            upload_interval_ms=config.get(keys.UPLOAD_INTERVAL_MS),
            upload_bytes=config.get(keys.UPLOAD_BYTES),
            split_bytes=config.get(keys.STREAM_SPLIT_BYTES),
            block_bytes=config.get(keys.BLOCK_BYTES),
            log_cache_bytes=config.get(keys.LOG_CACHE_BYTES),
            block_cache_bytes=config.get(keys.BLOCK_CACHE_BYTES),
            readahead_bytes=config.get(keys.READAHEAD_BYTES),
            append_timeout_ms=config.get(keys.APPEND_TIMEOUT_MS),
            compaction_interval_ms=config.get(keys.COMPACTION_INTERVAL_MS),
            compaction_rate=config.get(keys.COMPACTION_RATE),
            small_object_bytes=config.get(keys.COMPACTION_SMALL_OBJECT_BYTES),
            max_object_bytes=config.get(keys.COMPACTION_MAX_OBJECT_BYTES),
            delete_grace_ms=config.get(keys.DELETE_GRACE_MS),
            object_threads=config.get(keys.OBJECT_THREADS),
        )

    @property
    def wal_on_disk(self) -> bool:
        """Whether appends are acknowledged after an fsync of WAL files (local or shared mode)."""
        return self.wal_mode is not WalMode.OBJECT

    def __post_init__(self) -> None:
        # Callers (tests, benches) may pass the mode as its configuration string.
        object.__setattr__(self, "wal_mode", WalMode(self.wal_mode))

    def with_changes(self, **changes: Any) -> StoreSettings:
        return replace(self, **changes)


def shared_wal_path(config: Config) -> Path:
    """The directory ``s3stream.wal.path`` names (``shared-wal`` under data.dir when empty)."""
    raw = config.get(keys.WAL_PATH) or str(config.data_dir / "shared-wal")
    return Path(raw).expanduser().resolve()
