"""The contract between s3stream and its users (the broker, the table workers, the Spark job).

s3stream knows nothing of Kafka. A *stream* is an append-only sequence of opaque *batches*; each
batch carries a record count and occupies that many consecutive offsets, so a Kafka partition stored
as one stream has stream offsets equal to Kafka offsets.

Every engine implements :class:`StreamStore`. The semantics every engine must keep:

- ``append`` returns only once the batch is durable (fsynced local WAL, or stored object plus
  committed index), and returns base offsets in call order per stream.
- ``fetch`` returns whole batches, starting with the one that contains ``start_offset``; it returns
  at least one batch when one exists at ``start_offset`` even if larger than ``max_bytes``.
- Offsets below ``start_offset(stream)`` (after ``trim``) raise :class:`OffsetOutOfRange`;
  so do offsets above ``end_offset(stream)``. ``start_offset == end_offset`` means no data.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

from tabletopic.fencing import Fenced
from tabletopic.s3stream.epochs import EpochHistory


class StreamError(Exception):
    """Root of every error s3stream raises."""


class StreamNotFound(StreamError):
    """The stream id is unknown or the stream was deleted."""


class OffsetOutOfRange(StreamError):
    """The requested offset lies outside ``[start_offset, end_offset]`` of the stream."""

    def __init__(self, stream_id: int, offset: int, start: int, end: int) -> None:
        super().__init__(f"offset {offset} of stream {stream_id} is outside [{start}, {end}]")
        self.stream_id = stream_id
        self.offset = offset
        self.start = start
        self.end = end


class StorageUnavailable(StreamError):
    """The object store or WAL cannot accept or serve data right now (retriable)."""


class StreamFenced(StorageUnavailable, Fenced):
    """A newer owner opened the stream (a higher epoch, or the same epoch by another owner): this
    store may no longer commit, trim or close it, and nothing it appended since is acknowledged.

    ``stream_ids`` are the streams found fenced."""

    def __init__(self, message: str, stream_ids: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.stream_ids = stream_ids


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """One appended batch as stored: offsets ``[base_offset, base_offset + record_count)``."""

    base_offset: int
    record_count: int
    payload: bytes | memoryview
    # The payload's CRC32C when the appender knew it (see :mod:`tabletopic.checksum`), else None;
    # not part of the batch's identity (the same batch read back from an object has none).
    crc: int | None = field(default=None, compare=False)

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count


def kept_payload(payload: bytes | bytearray | memoryview) -> bytes | memoryview:
    """What a store keeps of an appended batch: bytes and read-only memoryviews as they are (a
    caller hands a read-only view only over memory nobody writes again, such as a produce request's
    records lent by its frame), anything writable copied, since its owner may reuse it."""
    if type(payload) is bytes or (type(payload) is memoryview and payload.readonly):
        return payload
    return bytes(payload)


@dataclass(frozen=True, slots=True)
class ObjectSlice:
    """Where a run of a stream's batches lives in object storage, so a reader (a Spark task) can
    fetch it with one range GET and decode it with :func:`tabletopic.s3stream.objects.read_slice`
    without asking the broker or the metadata DB.

    ``position``/``size`` delimit the data blocks inside the object; the slice may begin before
    ``start_offset`` and end after ``end_offset`` (whole blocks): readers drop the excess.
    """

    object_key: str
    position: int
    size: int
    stream_id: int
    start_offset: int
    end_offset: int


class StreamInfo(NamedTuple):
    """A stream's offsets as of the call. A named tuple, not a frozen dataclass: a Fetch asks it of
    every partition in its session, and a frozen dataclass takes twice as long to build."""

    stream_id: int
    start_offset: int
    end_offset: int


# A stream rewrite (see :meth:`StreamStore.rewrite`): batches in, same-offset batches out.
BatchTransform = Callable[[list[StoredBatch]], list[StoredBatch]]


class PendingAppend(Protocol):
    """The acknowledgement of an append begun with :meth:`StreamStore.start_append`: awaiting it
    returns once the batch is durable, or raises as :meth:`StreamStore.append` does.

    :meth:`failed` answers without waiting. An object-WAL upload that fails fails every append
    queued behind it at that moment and rewinds the streams, but the callers only learn of it
    when their tasks next run. In between, the caller's own bookkeeping (an idempotent producer's
    next expected sequence) must not count these appends as written: the same producer's next batch
    would be accepted past a gap, and the client would take the failed batch as delivered."""

    def __await__(self) -> Generator[Any, None, None]: ...

    def failed(self) -> bool:
        """True once the append is known to fail (awaiting it raises)."""
        ...


class _Acknowledged:
    """An append already acknowledged: what :meth:`StreamStore.start_append` returns from a store
    whose appends are durable at once."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        return
        yield

    def failed(self) -> bool:
        return False


ACKNOWLEDGED: PendingAppend = _Acknowledged()


class DataWatch:
    """One long poll over any number of streams (a Fetch's partitions, however many).

    :attr:`ready` resolves when the first of them passes the offset it was watched at, or is
    closed, lost or deleted here (the poller then re-reads it and finds out which); until the
    poller calls :meth:`close`, :attr:`woken` collects every stream that did so, so that it
    re-reads only those. One future for the whole poll: a Fetch of 170 partitions used to make 170
    futures and wait on them all, which cost more than reading the partitions.
    """

    __slots__ = ("closed", "ready", "woken")

    def __init__(self) -> None:
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.woken: set[int] = set()
        self.closed = False

    def wake(self, stream_id: int) -> None:
        self.woken.add(stream_id)
        if not self.ready.done():
            self.ready.set_result(None)

    def close(self) -> None:
        """The poller is done with it: the streams drop it at their next change."""
        self.closed = True
        if not self.ready.done():
            self.ready.cancel()


@runtime_checkable
class StreamStore(Protocol):
    """A node's stream storage. All methods are coroutines except the cheap in-memory offset reads."""

    async def start(self) -> None:
        """Open the store: create metadata tables, replay the WAL, start background tasks."""

    async def close(self) -> None:
        """Flush what is pending, stop background tasks, release files. Idempotent."""

    async def create_stream(self) -> int:
        """Create an empty stream and return its id (never reused)."""

    async def create_streams(self, count: int) -> list[int]:
        """Create ``count`` empty streams at once (a topic's partitions) and return their ids."""

    async def delete_stream(self, stream_id: int) -> None:
        """Delete a stream; its data becomes garbage for compaction. Raises StreamNotFound."""

    def stream_info(self, stream_id: int) -> StreamInfo:
        """Current start and end offsets. Raises StreamNotFound."""

    def epochs(self, stream_id: int) -> EpochHistory:
        """Which epoch wrote which offsets (see :mod:`tabletopic.s3stream.epochs`); a stream never
        opened with an epoch is epoch 0 throughout. Raises StreamNotFound."""

    async def append(self, stream_id: int, payload: bytes | memoryview, record_count: int) -> int:
        """Durably append one batch; return its base offset. Raises StreamNotFound,
        StorageUnavailable."""

    async def wait_for_room(self) -> None:
        """Wait (bounded) until the store takes appends again (a full WAL); raises
        StorageUnavailable. Call right before :meth:`start_append`."""

    def start_append(
        self, stream_id: int, payload: bytes | memoryview, record_count: int, crc: int | None = None
    ) -> tuple[int, PendingAppend]:
        """Assign a batch its offsets at once (no suspension, so appends keep the order of the
        caller's checks) and return the base offset and what to await for the acknowledgement,
        which raises as :meth:`append` does. Does not wait for room: see :meth:`wait_for_room`.
        ``crc``: the payload's CRC32C if the caller has it (it must be right: the store's own
        checksums are derived from it instead of reading the payload again)."""

    async def fetch(
        self, stream_id: int, start_offset: int, max_bytes: int, end_offset: int | None = None
    ) -> list[StoredBatch]:
        """Read whole batches from ``start_offset`` up to ``max_bytes`` (at least one batch if any)
        and not past ``end_offset``. Raises StreamNotFound, OffsetOutOfRange."""

    async def trim(self, stream_id: int, new_start_offset: int) -> None:
        """Advance the start offset (never backwards); older data becomes garbage."""

    def wait_for_data(self, wanted: Iterable[tuple[int, int]]) -> DataWatch:
        """A watch over the ``(stream_id, offset)`` pairs, woken by each stream once
        ``end_offset(stream) > offset`` (at once if already so) or once the stream is closed,
        deleted or lost here (a stream not held here wakes it at once). Used for Fetch long polls;
        callers bound the wait on :attr:`DataWatch.ready` and then :meth:`DataWatch.close` it."""

    async def flush(self, stream_ids: Iterable[int] | None = None) -> None:
        """Make every acknowledged batch of these streams (all if None) readable from object
        storage, uploading from the WAL/LogCache if needed."""

    def not_uploaded(self, stream_ids: Iterable[int]) -> list[int]:
        """The streams among these, held here, with acknowledged batches not yet in object storage
        (always none where an append is acknowledged by its upload)."""

    async def rewrite(self, stream_id: int, transform: BatchTransform) -> int:
        """Replace the stream's batches stored in object storage by ``transform(batches)`` (whole
        runs of consecutive batches in offset order; the result must cover exactly the same offsets,
        batch for batch), atomically: a crash leaves either every old or every new batch. Batches
        not yet in object storage are left alone. Returns the bytes rewritten. Used for log
        compaction; rate-limited like the store's own compaction. ``transform`` may run in a
        worker thread: it must depend on its batches alone, not on state the event loop changes."""

    async def refresh(self, stream_ids: Iterable[int]) -> None:
        """Read streams this store does not hold from the metadata database, so that
        :meth:`stream_info` and :meth:`locate` see what their owners committed (a cluster node
        reading partitions other brokers lead). A store that holds every stream does nothing."""

    async def locate(self, stream_id: int, start_offset: int, end_offset: int) -> list[ObjectSlice]:
        """Object slices covering ``[start_offset, end_offset)`` in order; call :meth:`flush` first.
        Raises OffsetOutOfRange when the range is not (yet) in object storage."""


async def read_to_end(
    store: StreamStore, stream_id: int, offset: int, chunk_bytes: int
) -> AsyncIterator[StoredBatch]:
    """The stream's batches from the one holding ``offset`` to the end it has when called, read
    ``chunk_bytes`` at a time so that memory stays bounded: how a new leader rebuilds what it keeps
    of a stream (producer sequences, open transactions) from its log. What retention trimmed,
    before or during the read, is skipped, as Kafka forgets what it deletes.

    Raises:
        StreamError: the stream is gone, or a read stopped short of the end it had (state
            rebuilt from part of the log would be wrong, not just old).
    """
    info = store.stream_info(stream_id)
    offset = max(offset, info.start_offset)
    while offset < info.end_offset:
        try:
            batches = await store.fetch(stream_id, offset, chunk_bytes)
        except OffsetOutOfRange as exc:
            start = store.stream_info(stream_id).start_offset
            if start <= offset:
                raise StreamError(f"stream {stream_id}: read failed at offset {offset}") from exc
            offset = start
            continue
        if not batches:
            raise StreamError(f"stream {stream_id}: read stopped at offset {offset} of {info.end_offset}")
        for stored in batches:
            if stored.next_offset > offset:
                yield stored
        offset = batches[-1].next_offset
