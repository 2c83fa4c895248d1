"""The broker sees a cluster node's store only through :class:`SharedStreamStore`; the concrete
store must keep satisfying it, and a store without snapshot reads must not pass for one."""

from __future__ import annotations

from tabletopic.s3stream.memory import MemoryStreamStore
from tabletopic.s3stream.shared import SharedStreamStore, SnapshotReader
from tabletopic.s3stream.streams import StreamStore
from tests.support.store_harness import StoreHarness


async def test_the_object_storage_store_is_a_shared_stream_store(local_harness: StoreHarness) -> None:
    store = await local_harness.open(owned_only=True)
    assert isinstance(store, SharedStreamStore)
    assert isinstance(store, SnapshotReader)
    assert store.owned_only


def test_the_memory_store_reads_no_snapshots_so_fetch_refuses_partitions_led_elsewhere() -> None:
    store = MemoryStreamStore()
    assert isinstance(store, StreamStore)
    assert not isinstance(store, SnapshotReader)
    assert not isinstance(store, SharedStreamStore)
