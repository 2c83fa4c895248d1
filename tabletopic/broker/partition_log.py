"""The partition log: appending a partition's record batches, with everything Kafka's ``UnifiedLog``
checks on the way in. The Produce handler maps requests to :meth:`PartitionLog.append` and its
:class:`AppendResult` back to responses; the zone router appends handed-over data through the same
call, so both paths check the same things.

One append, in order:

1. the partition exists and this broker leads it; the batch headers and CRC32C are valid
   (``records.validate_batches``: no record is decoded); no batch exceeds ``max.message.bytes``;
   a compacted topic refuses records without a key;
2. the partition's turn (:meth:`~tabletopic.broker.producers.ProducerStates.ordering`): from here
   until its batches have offsets, the appends of one stream keep the order their requests
   reached this call in, or an idempotent producer's batches land out of sequence;
3. schema validation when the topic asks for it; a transactional batch only from the producer
   owning the open transaction the partition joined; room in the store; leadership again;
4. producer sequences (a retry is answered with its original offset); offsets from the stream;
   a transactional batch opens its transaction on the partition before it can be acknowledged;
5. outside the turn: wait for each append to be durable and record it in the producer state.

An append outlives its request: the caller shields it from the handler's cancellation, so a
retry on a new connection is answered as a duplicate with the original offset, as Kafka answers it.
A cancelled append would leave its sequence reserved with no one to resolve it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from tabletopic.broker.metrics import BrokerMetrics
from tabletopic.broker.ports import OpenTransactions, PartitionHost
from tabletopic.broker.producers import ProducerStates, SequenceCheck
from tabletopic.broker.protocol.answers import current_leader
from tabletopic.broker.protocol.responses import PartitionProduceResponse
from tabletopic.broker.record_validation import RecordError, RecordValidator, Rejection
from tabletopic.broker.topics import Topic
from tabletopic.log_limit import RateLimitedLog
from tabletopic.records.crc import whole_batch_crc
from tabletopic.records.errors import BatchFault, RecordBatchError
from tabletopic.records.header import BatchHeader, validate_batches, with_log_append_time
from tabletopic.records.keys import keyless_records
from tabletopic.s3stream.streams import (
    PendingAppend,
    StorageUnavailable,
    StreamError,
    StreamFenced,
    StreamNotFound,
)

log = logging.getLogger(__name__)
# A failed store (a full disk, an object store that is down) fails every append of every partition
# until it is back: one line per kind of failure every ten seconds, with how many were held back.
APPEND_FAILED_LOG = RateLimitedLog(log, interval_s=10.0)

Records = bytes | memoryview

# What an append says about a batch the record codec refused.
FAULT_ERROR_CODES = {
    BatchFault.CORRUPT: ErrorCode.corrupt_message,
    BatchFault.UNSUPPORTED_FORMAT: ErrorCode.unsupported_for_message_format,
    BatchFault.INVALID_RECORD: ErrorCode.invalid_record,
}


@dataclass(frozen=True, slots=True)
class AppendResult:
    """The outcome of one partition's append: its first offset, or why nothing was appended.

    ``base_offset``, ``log_append_time`` and ``log_start_offset`` are -1 when unknown (failed
    appends, or the topic stores create times); ``record_errors`` name refused records by their
    index inside their batch (schema validation, keyless records of a compacted topic).
    """

    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    record_errors: tuple[RecordError, ...] = ()
    # NOT_LEADER_OR_FOLLOWER: the broker that leads instead and its epoch, as Metadata would name
    # them. Produce v10+ carries them (KIP-951), so a client moves without asking Metadata first.
    leader: tuple[int, int] | None = None

    @classmethod
    def failed(
        cls, code: ErrorCode, message: str | None = None, record_errors: tuple[RecordError, ...] = ()
    ) -> AppendResult:
        return cls(code, message, record_errors=record_errors)

    def response(self, index: int, name_leader: bool = True) -> PartitionProduceResponse:
        """Partition ``index``'s entry of a Produce response (also the zone router's stored
        hand-over answer); ``name_leader``: with the leader a refusal names, if any."""
        response: PartitionProduceResponse = {
            "index": index,
            "error_code": self.error_code,
            "error_message": self.error_message,
            "base_offset": self.base_offset,
            "log_append_time": self.log_append_time,
            "log_start_offset": self.log_start_offset,
        }
        if self.record_errors:
            response["record_errors"] = [
                {"batch_index": error.batch_index, "batch_index_error_message": error.message}
                for error in self.record_errors
            ]
        if name_leader and self.leader is not None:
            response["current_leader"] = current_leader(self.leader)
        return response

    @classmethod
    def from_response(cls, fields: Mapping[str, Any]) -> AppendResult:
        """The result :meth:`response` described (read back from JSON)."""
        return cls(
            ErrorCode(int(fields["error_code"])),
            fields.get("error_message"),
            int(fields.get("base_offset", -1)),
            int(fields.get("log_append_time", -1)),
            int(fields.get("log_start_offset", -1)),
            tuple(
                RecordError(int(e["batch_index"]), e.get("batch_index_error_message") or "")
                for e in fields.get("record_errors") or ()
            ),
        )


class ProduceVerifier(Protocol):
    """The transaction coordinator as the log asks it (KIP-890's verification)."""

    @property
    def partitions(self) -> OpenTransactions: ...

    async def verify_produce(
        self, transactional_id: str, producer_id: int, epoch: int, stream_id: int, topic: str, partition: int
    ) -> ErrorCode:
        """Whether ``producer_id`` at ``epoch`` owns the open transaction ``transactional_id``
        that the partition joined (NONE), else the error to answer."""
        ...


class LogHost(PartitionHost, Protocol):
    """What the partition log reads of its broker (see :mod:`tabletopic.broker.ports`)."""

    @property
    def node_id(self) -> int: ...

    @property
    def clustered(self) -> bool: ...

    @property
    def producers(self) -> ProducerStates: ...

    @property
    def transactions(self) -> ProduceVerifier: ...

    @property
    def record_validator(self) -> RecordValidator | None: ...

    @property
    def metrics(self) -> BrokerMetrics | None: ...

    def count_append(self, topic: str, partition: int, size: int, records: int) -> None:
        """Count what was appended to a partition (cluster mode: balancing, the cluster charts)."""
        ...


@dataclass(slots=True)
class _Started:
    """A batch admitted to the partition: appended with offsets from ``base``, or a retry of a
    batch appended before (``acknowledged`` None, the offset is the check's duplicate's)."""

    header: BatchHeader
    check: SequenceCheck
    base: int = -1
    acknowledged: PendingAppend | None = None


@dataclass(slots=True)
class _Admitted:
    started: list[_Started]
    failure: BaseException | None  # why the batches after ``started`` were not appended
    log_append_time: int


class PartitionLog:
    """Appends to the partitions of one broker (Kafka's ``UnifiedLog.appendAsLeader`` with the
    leader check ``ReplicaManager`` makes before it)."""

    def __init__(self, host: LogHost) -> None:
        self._host = host

    async def append(
        self, topic_name: str, index: int, records: Records | None, transactional_id: str | None = None
    ) -> AppendResult:
        """Append one partition's batches exactly as received (see the module docstring).

        Args:
            topic_name: the topic.
            index: the partition.
            records: the partition's record batches (v2), lent: kept by the store, never copied.
            transactional_id: the producer's transactional id (Produce v3+), None when it has none.

        Returns:
            The first offset given, or the error to answer; nothing of a refused partition is
            appended.
        """
        host = self._host
        topic = host.topics.get(topic_name)
        if topic is None or not 0 <= index < topic.partition_count:
            return AppendResult.failed(
                ErrorCode.unknown_topic_or_partition, f"{topic_name}-{index} does not exist"
            )
        if not host.leadership.leads(topic_name, index):
            if records:
                self._note_refused(topic.streams[index], records)
            return self.not_leader(topic_name, index)
        if not records:
            return AppendResult.failed(ErrorCode.invalid_record, "empty record set")
        try:
            headers = validate_batches(records)
        except RecordBatchError as exc:
            log.warning("rejected produce to %s-%d: %s", topic_name, index, exc)
            return AppendResult.failed(FAULT_ERROR_CODES[exc.fault], str(exc))
        max_bytes = int(host.topic_config(topic, "max.message.bytes"))
        for header in headers:
            if header.size > max_bytes:
                return AppendResult.failed(
                    ErrorCode.message_too_large,
                    f"batch of {header.size} bytes exceeds max.message.bytes {max_bytes}",
                )
        if "compact" in host.topic_config(topic, "cleanup.policy"):
            refused = _keyless(records, headers, f"{topic_name}-{index}")
            if refused is not None:
                log.info("produce to compacted %s-%d refused: %s", topic_name, index, refused.error_message)
                return refused
        stream_id = topic.streams[index]
        # From here until its batches have offsets, a request waits its turn on the partition: the
        # requests of a connection reach this line in order (nothing above awaits), and appends must
        # keep that order, or an idempotent producer's batches land out of sequence in the stream.
        async with host.producers.ordering(stream_id):
            admitted = await self._admit(topic, index, stream_id, records, headers, transactional_id)
        if isinstance(admitted, AppendResult):
            return admitted
        return await self._acknowledge(topic_name, index, stream_id, admitted)

    def _note_refused(self, stream_id: int, records: Records) -> None:
        """Tell the producer state which idempotent batches are refused as not led here (headers
        only, no CRC: nothing of them is kept)."""
        try:
            headers = validate_batches(records, verify_crc=False)
        except RecordBatchError:
            return
        self._host.producers.note_refused(stream_id, headers)

    def not_leader(self, topic: str, index: int) -> AppendResult:
        """NOT_LEADER_OR_FOLLOWER, naming the broker that leads the partition."""
        host = self._host
        leader, epoch = host.leadership.leader(topic, index)
        return AppendResult(
            ErrorCode.not_leader_or_follower,
            f"broker {host.node_id} does not lead {topic}-{index} (broker {leader} does, epoch {epoch})",
            leader=(leader, epoch),
        )

    async def _admit(
        self,
        topic: Topic,
        index: int,
        stream_id: int,
        records: Records,
        headers: list[BatchHeader],
        transactional_id: str | None,
    ) -> _Admitted | AppendResult:
        """Validate, check sequences and give the batches their offsets (the partition's turn)."""
        host = self._host
        topic_name = topic.name
        validator = host.record_validator
        if validator is not None and validator.enabled(topic.configs):
            # Schema validation (off unless a topic asks): nothing of a refused partition is appended.
            rejection = await validator.check(topic_name, topic.configs, records, headers)
            if rejection is not None:
                return _rejected(rejection)
        for header in headers:
            if header.is_transactional:
                # Only the producer owning the open transaction this partition joined may write it.
                code = (
                    await host.transactions.verify_produce(
                        transactional_id,
                        header.producer_id,
                        header.producer_epoch,
                        stream_id,
                        topic_name,
                        index,
                    )
                    if transactional_id
                    else ErrorCode.invalid_txn_state
                )
                if code is not ErrorCode.none:
                    log.info("transactional produce to %s-%d refused: %s", topic_name, index, code.name)
                    return AppendResult.failed(code, f"transactional batch refused: {code.name}")
        try:
            # The last wait before the offsets: between a sequence check and its offsets nothing may
            # run that appends to this stream.
            await host.store.wait_for_room()
        except StreamError as exc:
            APPEND_FAILED_LOG.warning(
                type(exc).__name__, "append to %s-%d failed: %s", topic_name, index, exc
            )
            return AppendResult.failed(ErrorCode.kafka_storage_error, str(exc))
        if not host.leadership.leads(topic_name, index):
            # Deposed (or not yet done rebuilding the producer state after gaining it again) while
            # this request waited: its state is not the one to check against.
            host.producers.note_refused(stream_id, headers)
            return self.not_leader(topic_name, index)
        producers = host.producers
        checks: list[SequenceCheck] = []
        for header in headers:
            check = producers.check(stream_id, header)
            if check.error_code is not ErrorCode.none:
                for earlier, done in zip(headers, checks, strict=False):
                    if done.reservation is not None:
                        producers.failed(
                            stream_id, earlier.producer_id, done.reservation, RuntimeError(check.message)
                        )
                log.info("produce to %s-%d refused: %s", topic_name, index, check.message)
                return AppendResult.failed(check.error_code, check.message)
            checks.append(check)
        log_append_time = -1
        if host.topic_config(topic, "message.timestamp.type") == "LogAppendTime":
            log_append_time = int(time.time() * 1000)
        return self._start_appends(stream_id, records, headers, checks, log_append_time)

    def _start_appends(
        self,
        stream_id: int,
        records: Records,
        headers: list[BatchHeader],
        checks: list[SequenceCheck],
        log_append_time: int,
    ) -> _Admitted:
        """Give each admitted batch its offsets (nothing awaits here: still the partition's turn)."""
        host = self._host
        producers = host.producers
        view = memoryview(records)
        started: list[_Started] = []
        failure: BaseException | None = None
        for position, (header, check) in enumerate(zip(headers, checks, strict=True)):
            if check.duplicate is not None:
                started.append(_Started(header, check))
                continue
            # The records are bytes or a read-only view lent by the request's frame: the store keeps
            # them, and the slices of several batches, as they are (no copy).
            whole = header.position == 0 and header.size == len(records)
            payload: Any = records if whole else view[header.position : header.position + header.size]
            crc: int | None = None
            if log_append_time >= 0:
                payload = with_log_append_time(payload, log_append_time)
            else:  # stored as received: its CRC was just verified, so the store need not read it again
                crc = whole_batch_crc(payload, header.crc)
            try:
                base, acknowledged = host.store.start_append(stream_id, payload, header.record_count, crc)
                if check.reservation is not None:
                    check.reservation.append = acknowledged
            except StreamError as exc:
                # Neither this batch nor the following ones are appended: free their sequences.
                for later, unsent in zip(headers[position:], checks[position:], strict=True):
                    if unsent.reservation is not None:
                        producers.failed(stream_id, later.producer_id, unsent.reservation, exc)
                failure = exc
                break
            if header.is_transactional:  # verified by _admit
                # Open from here on, before the append can be acknowledged: the last stable offset
                # (Fetch, ListOffsets READ_COMMITTED, the table coordinator) never passes the batch
                # while its transaction is undecided. A failed append keeps it open until the marker.
                host.transactions.partitions.appended(stream_id, header.producer_id, base)
            started.append(_Started(header, check, base, acknowledged))
        return _Admitted(started, failure, log_append_time)

    async def _acknowledge(
        self, topic_name: str, index: int, stream_id: int, admitted: _Admitted
    ) -> AppendResult:
        """Wait for the appends of a partition (in offset order) and record them."""
        host = self._host
        producers = host.producers
        failure = admitted.failure
        first_offset = -1
        for position, item in enumerate(admitted.started):
            header, check = item.header, item.check
            if item.acknowledged is None:
                # A retry of a batch already appended: answer with its original offset (Kafka semantics).
                assert check.duplicate is not None
                offset = check.duplicate.base_offset
                try:
                    base = offset if isinstance(offset, int) else await offset
                except (StreamError, TimeoutError, OSError, RuntimeError) as exc:
                    failure = failure or exc  # the original failed: the producer retries it
                    continue
                first_offset = base if first_offset < 0 else first_offset
                continue
            try:
                await item.acknowledged
            except asyncio.CancelledError as exc:
                # Only at shutdown (see the module docstring): free the sequences, then stop.
                for unsent in admitted.started[position:]:
                    if unsent.check.reservation is not None:
                        producers.failed(stream_id, unsent.header.producer_id, unsent.check.reservation, exc)
                raise
            except (StreamError, TimeoutError, OSError) as exc:
                if check.reservation is not None:
                    producers.failed(stream_id, header.producer_id, check.reservation, exc)
                failure = failure or exc
                continue
            base = item.base
            next_offset = base + header.record_count
            if check.reservation is not None:
                producers.committed(stream_id, header.producer_id, check.reservation, base, next_offset)
            else:
                producers.note_append(stream_id, next_offset)
            if host.metrics is not None:
                host.metrics.records_bytes_in.inc(header.size)
            host.count_append(topic_name, index, header.size, header.record_count)
            first_offset = base if first_offset < 0 else first_offset
        if failure is not None:
            return self._append_failed(topic_name, index, failure)
        try:
            log_start = host.store.stream_info(stream_id).start_offset
        except StreamError:
            log_start = -1
        return AppendResult(
            base_offset=first_offset, log_append_time=admitted.log_append_time, log_start_offset=log_start
        )

    def _append_failed(self, topic_name: str, index: int, exc: BaseException) -> AppendResult:
        host = self._host
        moved = isinstance(exc, StreamNotFound) and host.clustered and host.topics.get(topic_name) is not None
        if isinstance(exc, StreamFenced) or moved or not host.leadership.leads(topic_name, index):
            # Deposed while appending (in a cluster, a stream of an existing topic is only ever
            # closed because its leadership moved): nothing of this batch was acknowledged; the
            # client retries on the new leader, whose producer state has every acknowledged batch.
            log.info("append to %s-%d refused, no longer the leader: %s", topic_name, index, exc)
            return self.not_leader(topic_name, index)
        code = (
            ErrorCode.unknown_topic_or_partition
            if isinstance(exc, StreamNotFound)
            else ErrorCode.kafka_storage_error
            if isinstance(exc, StorageUnavailable | OSError)
            else ErrorCode.request_timed_out
        )
        APPEND_FAILED_LOG.warning(type(exc).__name__, "append to %s-%d failed: %s", topic_name, index, exc)
        return AppendResult.failed(code, str(exc))


def _rejected(rejection: Rejection) -> AppendResult:
    if rejection.retriable:
        return AppendResult.failed(ErrorCode.request_timed_out, rejection.message)
    return AppendResult.failed(ErrorCode.invalid_record, rejection.message, rejection.record_errors)


def _keyless(records: Records, headers: list[BatchHeader], partition: str) -> AppendResult | None:
    """Why a compacted topic refuses these batches, as Kafka's LogValidator says it: the first
    batch holding records without a key is refused with each of them in ``record_errors`` (its
    index within the batch and a message), so a client fails those records by name; or None.

    Kafka refuses the whole request's records for the partition along with them (one append), and
    so do we: the other records get the partition's INVALID_RECORD without a record error, which
    a client reports as "the batch was refused because of another record" and may retry alone.
    """
    view = memoryview(records)
    for header in headers:
        try:
            indexes = keyless_records(view[header.position : header.position + header.size], header)
        except RecordBatchError as exc:
            return AppendResult.failed(ErrorCode.invalid_record, str(exc))
        if indexes:
            message = f"Compacted topic cannot accept message without key in topic partition {partition}."
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for i in indexes[:3])
            return AppendResult.failed(
                ErrorCode.invalid_record,
                f"One or more records have been rejected due to {len(indexes)} record "
                f"errors in total, and only showing the first three errors at most: [{shown}]",
                tuple(RecordError(i, message) for i in indexes),
            )
    return None
