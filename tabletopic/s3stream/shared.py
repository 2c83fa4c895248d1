"""The store of a cluster node, as the broker sees it: :class:`SharedStreamStore`.

In a cluster every broker reaches the same streams through object storage and the metadata
database; each holds (opens, appends to, closes) only the streams of the partitions it leads and
reads the others' from object storage. What the broker needs beyond :class:`StreamStore` for that
(opening and closing many streams at once, following the ranges of streams led elsewhere, reading
them, steering compaction to the controller) is this Protocol, so no broker module depends on the
concrete :class:`~tabletopic.s3stream.store.S3StreamStore`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, runtime_checkable

from tabletopic.ids import NodeId, StreamId
from tabletopic.s3stream.objectstore import AsyncObjectStore
from tabletopic.s3stream.state import StoreState
from tabletopic.s3stream.streams import StoredBatch, StreamError, StreamInfo, StreamStore


class CompactionSwitch(Protocol):
    """The compactor's two knobs a cluster node turns: whether it runs now (only on the
    controller), and whom it tells of streams whose objects it swapped."""

    active: Callable[[], bool]
    on_swapped: Callable[[set[int]], None] | None


class ObjectAccess(Protocol):
    """The object store under the streams, for objects of the broker's own (zone-routed batches)."""

    @property
    def objects(self) -> AsyncObjectStore: ...


@runtime_checkable
class SnapshotReader(Protocol):
    """A store that reads streams it does not hold straight from object storage."""

    async def read_snapshot(
        self, stream_id: int, start_offset: int, max_bytes: int, max_age_s: float = 0.05
    ) -> tuple[StreamInfo, list[StoredBatch]]:
        """The stream's info and its batches from ``start_offset`` (at least one, up to about
        ``max_bytes``), from a view of its objects at most ``max_age_s`` old.

        Raises:
            OffsetOutOfRange: ``start_offset`` is outside the stream as last seen.
            StreamNotFound: no such stream.
            StreamError: object storage failed.
        """


@runtime_checkable
class SharedStreamStore(StreamStore, SnapshotReader, Protocol):
    """A :class:`StreamStore` whose streams other brokers hold too (cluster mode)."""

    @property
    def owned_only(self) -> bool:
        """True in a cluster: only streams opened here may be written, and compaction waits for
        the controller's go (:attr:`compactor`)."""

    @property
    def compactor(self) -> CompactionSwitch: ...

    @property
    def state(self) -> StoreState:
        """The store's parts (metadata, objects, settings, WAL), for the takeover of another
        broker's shared WAL, which works on them directly."""

    @property
    def wal_directory(self) -> str | None:
        """The shared WAL directory this incarnation writes (None on the object WAL)."""

    @property
    def wal_incarnation(self) -> str | None:
        """This incarnation's token in its shared WAL's fence (None on the object WAL)."""

    @property
    def recovered_wals(self) -> list[str]:
        """Directories of this broker's earlier incarnations it took back at start."""

    def is_open(self, stream_id: int) -> bool:
        """Whether this broker holds the stream now."""

    def known_streams(self) -> set[int]:
        """Streams held here and streams followed (read-only views of other brokers' streams)."""

    async def open_streams(
        self, requests: Sequence[tuple[StreamId, int, NodeId]]
    ) -> dict[int, StreamInfo | StreamError]:
        """Open many ``(stream_id, epoch, owner)`` at once; each answer is the stream's info or
        why it did not open (``StreamFenced`` when a newer owner holds it)."""

    async def close_streams(self, stream_ids: Sequence[int]) -> dict[int, StreamError]:
        """Close many streams at once (their pending data uploaded first); the errors by stream."""

    async def reload_ranges(self, stream_ids: Iterable[int]) -> None:
        """Reload the object ranges of streams held or followed from the metadata database."""

    async def recorded_ends(self, stream_ids: Sequence[int]) -> dict[int, int]:
        """The end offsets the metadata database records for these streams (led elsewhere), in one
        query; a stream that does not exist is left out."""
