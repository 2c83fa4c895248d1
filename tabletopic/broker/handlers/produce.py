"""Produce (0): validate record batch headers, check idempotent sequences, append each batch to
its partition's stream exactly as received.

Ordering matters for idempotent producers: partitions are appended from tasks created in request
order, and a handler awaits nothing before creating them, so appends to one stream happen in the
order the requests arrived on the connection.

A produce outlives its connection: when the client's connection drops, the appends already started
finish (shielded from the connection's cancellation) and record their offsets, so the producer's
retry on a new connection is answered as a duplicate with the original offset, as Kafka answers it.
A cancelled append would leave its sequence reserved with no one to resolve it, and the retry
would wait forever.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.producers import SequenceCheck
from tabletopic.broker.record_validation import Rejection
from tabletopic.records.crc import whole_batch_crc
from tabletopic.records.errors import BatchFault, RecordBatchError
from tabletopic.records.header import BatchHeader, validate_batches, with_log_append_time
from tabletopic.records.keys import keyless_records
from tabletopic.s3stream.streams import StorageUnavailable, StreamError, StreamFenced, StreamNotFound

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService
    from tabletopic.broker.topics import Topic

log = logging.getLogger(__name__)

# What a Produce response says about a batch the codec refused.
FAULT_ERROR_CODES = {
    BatchFault.CORRUPT: ErrorCode.corrupt_message,
    BatchFault.UNSUPPORTED_FORMAT: ErrorCode.unsupported_for_message_format,
    BatchFault.INVALID_RECORD: ErrorCode.invalid_record,
}


def partition_error(index: int, code: ErrorCode, message: str | None = None, **extra: Any) -> dict[str, Any]:
    """A partition's Produce answer that appended nothing (also the zone hand-off's failures)."""
    return {
        "index": index,
        "error_code": code,
        "error_message": message,
        "base_offset": -1,
        "log_append_time": -1,
        "log_start_offset": -1,
        **extra,
    }


async def produce_partition(
    broker: BrokerService,
    topic_name: str,
    index: int,
    records: bytes | memoryview | None,
    transactional_id: str | None = None,
) -> dict[str, Any]:
    """Append one partition's batches; returns the partition's response entry."""
    topic = broker.topics.get(topic_name)
    if topic is None or not 0 <= index < topic.partition_count:
        return partition_error(
            index, ErrorCode.unknown_topic_or_partition, f"{topic_name}-{index} does not exist"
        )
    if not broker.leadership.leads(topic_name, index):
        return _not_leader(broker, topic_name, index)
    if not records:
        return partition_error(index, ErrorCode.invalid_record, "empty record set")
    try:
        headers = validate_batches(records)
    except RecordBatchError as exc:
        log.warning("rejected produce to %s-%d: %s", topic_name, index, exc)
        return partition_error(index, FAULT_ERROR_CODES[exc.fault], str(exc))
    max_bytes = int(broker.topic_config(topic, "max.message.bytes"))
    for header in headers:
        if header.size > max_bytes:
            return partition_error(
                index,
                ErrorCode.message_too_large,
                f"batch of {header.size} bytes exceeds max.message.bytes {max_bytes}",
            )
    if "compact" in broker.topic_config(topic, "cleanup.policy"):
        refused = _keyless(records, headers, f"{topic_name}-{index}")
        if refused is not None:
            log.info("produce to compacted %s-%d refused: %s", topic_name, index, refused["error_message"])
            return partition_error(index, ErrorCode.invalid_record, **refused)
    stream_id = topic.streams[index]
    # From here until its batches have offsets, a request waits its turn on the partition: the
    # requests of a connection reach this line in order (nothing above awaits), and appends must
    # keep that order, or an idempotent producer's batches land out of sequence in the stream.
    async with broker.producers.ordering(stream_id):
        admitted = await _admit(
            broker, topic, topic_name, index, stream_id, records, headers, transactional_id
        )
    if isinstance(admitted, dict):
        return admitted
    return await _acknowledge(broker, topic_name, index, stream_id, admitted)


@dataclass(slots=True)
class _Started:
    """A batch admitted to the partition: appended with offsets from ``base``, or a retry of a
    batch appended before (``acknowledged`` None, the offset is the check's duplicate's)."""

    header: BatchHeader
    check: SequenceCheck
    base: int = -1
    acknowledged: Awaitable[None] | None = None


@dataclass(slots=True)
class _Admitted:
    started: list[_Started]
    failure: BaseException | None  # why the batches after ``started`` were not appended
    log_append_time: int


async def _admit(
    broker: BrokerService,
    topic: Topic,
    topic_name: str,
    index: int,
    stream_id: int,
    records: bytes | memoryview,
    headers: list[BatchHeader],
    transactional_id: str | None,
) -> _Admitted | dict[str, Any]:
    """Validate, check sequences and give the batches their offsets (the partition's turn)."""
    validator = broker.record_validator
    if validator is not None and validator.enabled(topic.configs):
        # Schema validation (off unless a topic asks): nothing of a refused partition is appended.
        rejection = await validator.check(topic_name, topic.configs, records, headers)
        if rejection is not None:
            return _rejected(index, rejection)
    for header in headers:
        if header.is_transactional:
            # Only the producer owning the open transaction this partition joined may write it.
            code = (
                await broker.transactions.verify_produce(
                    transactional_id, header.producer_id, header.producer_epoch, stream_id, topic_name, index
                )
                if transactional_id
                else ErrorCode.invalid_txn_state
            )
            if code is not ErrorCode.none:
                log.info("transactional produce to %s-%d refused: %s", topic_name, index, code.name)
                return partition_error(index, code, f"transactional batch refused: {code.name}")
    try:
        # The last wait before the offsets: between a sequence check and its offsets nothing may
        # run that appends to this stream.
        await broker.store.wait_for_room()
    except StreamError as exc:
        log.warning("append to %s-%d failed: %s", topic_name, index, exc)
        return partition_error(index, ErrorCode.kafka_storage_error, str(exc))
    if not broker.leadership.leads(topic_name, index):
        # Deposed (or not yet done rebuilding the producer state after gaining it again) while
        # this request waited: its state is not the one to check against.
        return _not_leader(broker, topic_name, index)
    producers = broker.producers
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
            return partition_error(index, check.error_code, check.message)
        checks.append(check)
    log_append_time = -1
    if broker.topic_config(topic, "message.timestamp.type") == "LogAppendTime":
        log_append_time = int(time.time() * 1000)
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
            base, acknowledged = broker.store.start_append(stream_id, payload, header.record_count, crc)
        except StreamError as exc:
            # Neither this batch nor the following ones are appended: free their sequences.
            for later, unsent in zip(headers[position:], checks[position:], strict=True):
                if unsent.reservation is not None:
                    producers.failed(stream_id, later.producer_id, unsent.reservation, exc)
            failure = exc
            break
        if header.is_transactional:  # verified above
            # Open from here on, before the append can be acknowledged: the last stable offset
            # (Fetch, ListOffsets READ_COMMITTED, the table coordinator) never passes the batch
            # while its transaction is undecided. A failed append keeps it open until the marker.
            broker.transactions.partitions.appended(stream_id, header.producer_id, base)
        started.append(_Started(header, check, base, acknowledged))
    return _Admitted(started, failure, log_append_time)


async def _acknowledge(
    broker: BrokerService, topic_name: str, index: int, stream_id: int, admitted: _Admitted
) -> dict[str, Any]:
    """Wait for the appends of a partition (in offset order) and record them."""
    producers = broker.producers
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
        if broker.metrics is not None:
            broker.metrics.records_bytes_in.inc(header.size)
        broker.record_bytes(topic_name, index, bytes_in=header.size)
        first_offset = base if first_offset < 0 else first_offset
    if failure is not None:
        return _append_failed(broker, topic_name, index, failure)
    try:
        log_start = broker.store.stream_info(stream_id).start_offset
    except StreamError:
        log_start = -1
    return partition_error(
        index,
        ErrorCode.none,
        None,
        base_offset=first_offset,
        log_append_time=admitted.log_append_time,
        log_start_offset=log_start,
    )


def _append_failed(broker: BrokerService, topic_name: str, index: int, exc: BaseException) -> dict[str, Any]:
    moved = isinstance(exc, StreamNotFound) and broker.clustered and broker.topics.get(topic_name) is not None
    if isinstance(exc, StreamFenced) or moved or not broker.leadership.leads(topic_name, index):
        # Deposed while appending (in a cluster, a stream of an existing topic is only ever closed
        # because its leadership moved): nothing of this batch was acknowledged; the client
        # retries on the new leader, whose producer state has every acknowledged batch.
        log.info("append to %s-%d refused, no longer the leader: %s", topic_name, index, exc)
        return _not_leader(broker, topic_name, index)
    code = (
        ErrorCode.unknown_topic_or_partition
        if isinstance(exc, StreamNotFound)
        else ErrorCode.kafka_storage_error
        if isinstance(exc, StorageUnavailable | OSError)
        else ErrorCode.request_timed_out
    )
    log.warning("append to %s-%d failed: %s", topic_name, index, exc)
    return partition_error(index, code, str(exc))


async def handle(broker: BrokerService, ctx: RequestContext, request: Any) -> dict[str, Any] | None:
    acks = request.acks
    if acks not in (0, 1, -1):
        return _all_failed(request, ErrorCode.invalid_required_acks, f"acks={acks} is not 0, 1 or -1")
    transactional_id = getattr(request, "transactional_id", None)
    router = broker.zone_router
    zone = None if router is None else router.zone_of(ctx)
    jobs: list[Awaitable[dict[str, Any]]] = []
    shape = []
    for topic_data in request.topic_data:
        for partition in topic_data.partition_data:
            name, index, records = topic_data.name, partition.index, partition.records
            if router is not None:
                router.count(zone, len(records or b""), "in")
            if (
                router is not None
                and records
                and not transactional_id
                and router.serves_here(zone)
                and broker.topics.get(name) is not None
                and not broker.leadership.leads(name, index)
            ):
                # A client of this broker's zone, routed here: the data reaches the leader through
                # object storage, never over a cross-zone socket.
                jobs.append(router.handoff(name, index, bytes(records)))
            else:
                jobs.append(produce_partition(broker, name, index, records, transactional_id))
            shape.append(name)
    # gather wraps every coroutine in a task right now, in order; shielded so a dropped connection
    # does not cancel appends under way: see the module docstring.
    appends = asyncio.gather(*jobs)
    appends.add_done_callback(_retrieve)
    results = await asyncio.shield(appends)
    if acks == 0:
        return None
    responses: dict[str, list[dict[str, Any]]] = {}
    for name, result in zip(shape, results, strict=True):
        responses.setdefault(name, []).append(result)
    return {
        "responses": [{"name": name, "partition_responses": parts} for name, parts in responses.items()],
        "throttle_time": 0,
    }


def _not_leader(broker: BrokerService, topic: str, index: int) -> dict[str, Any]:
    leader, epoch = broker.leadership.leader(topic, index)
    return partition_error(
        index,
        ErrorCode.not_leader_or_follower,
        f"broker {broker.node_id} does not lead {topic}-{index} (broker {leader} does, epoch {epoch})",
    )


def _rejected(index: int, rejection: Rejection) -> dict[str, Any]:
    if rejection.retriable:
        return partition_error(index, ErrorCode.request_timed_out, rejection.message)
    errors = [
        {"batch_index": error.batch_index, "batch_index_error_message": error.message}
        for error in rejection.record_errors
    ]
    return partition_error(index, ErrorCode.invalid_record, rejection.message, record_errors=errors)


def _keyless(records: bytes | memoryview, headers: list[Any], partition: str) -> dict[str, Any] | None:
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
            return {"error_message": str(exc)}
        if indexes:
            message = f"Compacted topic cannot accept message without key in topic partition {partition}."
            errors = [{"batch_index": i, "batch_index_error_message": message} for i in indexes]
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for i in indexes[:3])
            return {
                "error_message": f"One or more records have been rejected due to {len(indexes)} record "
                f"errors in total, and only showing the first three errors at most: [{shown}]",
                "record_errors": errors,
            }
    return None


def _retrieve(appends: asyncio.Future[Any]) -> None:
    """Mark the outcome of appends whose connection went away as seen (nobody awaits them)."""
    if not appends.cancelled():
        appends.exception()


def _all_failed(request: Any, code: ErrorCode, message: str) -> dict[str, Any]:
    return {
        "responses": [
            {
                "name": topic_data.name,
                "partition_responses": [
                    partition_error(p.index, code, message) for p in topic_data.partition_data
                ],
            }
            for topic_data in request.topic_data
        ],
        "throttle_time": 0,
    }
