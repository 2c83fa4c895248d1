"""A local WAL whose write fails stops the store accepting appends (fail-stop), and what it then
uploads is what it acknowledged: not the appends of the failed group, and no trace of the appends
refused after it (they once kept their offsets and their place in the log cache, and the next
upload committed them, a record per retry nobody was told was written)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tabletopic import database
from tabletopic.s3stream.db import StreamMetadata
from tabletopic.s3stream.streams import StorageUnavailable
from tests.support.store_harness import StoreHarness, local_object_settings


async def test_after_a_failed_fsync_only_what_was_acknowledged_is_uploaded(tmp_path: Path) -> None:
    harness = StoreHarness(tmp_path, "local", local_object_settings(tmp_path), database.default_url(tmp_path))
    harness.overrides["upload_interval_ms"] = 600_000  # uploads only when flushed
    try:
        store = await harness.open()
        sid = await store.create_stream()
        await store.append(sid, b"acknowledged" * 20, 1)
        wal = store.state.wal
        assert wal is not None

        def disk_error(*_args: Any) -> None:
            raise OSError(5, "Input/output error")

        wal._sync = disk_error  # type: ignore[method-assign]
        with pytest.raises(StorageUnavailable):
            await store.append(sid, b"in the failed group" * 20, 1)
        for attempt in range(3):  # a producer's retries, each refused
            with pytest.raises(StorageUnavailable):
                await store.append(sid, f"retry {attempt}".encode() * 20, 1)
        await store.flush()
        assert [bytes(b.payload) for b in await store.fetch(sid, 0, 1 << 20)] == [b"acknowledged" * 20]
        engine = database.create_engine(harness.url)
        harness.engines.append(engine)
        assert StreamMetadata(engine).stream_ends([sid])[sid][0] == 1  # only that one committed
    finally:
        await harness.close_all()
