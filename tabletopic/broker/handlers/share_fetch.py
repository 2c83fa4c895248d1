"""ShareFetch (78): a share group member's fetch (KIP-932), with its piggy-backed acknowledgements.

The request names the member's share session (epoch 0 opens it, -1 closes it, each request after
that carries the next epoch) and the partitions it adds or forgets; the acknowledgements it carries
are applied and written (:class:`~tabletopic.broker.groups.share_coordinator.ShareGroups`) before
records are acquired, so a record released by this very request may be handed out again at once.
Each partition of the session is read from its share-partition's first available record; the
batches read are returned whole, with the offsets this member acquired in ``acquired_records``
(the client drops the others). Nothing acquired: the request long-polls for new records, or for
records released by others, until ``max_wait``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypedDict, TypeVar

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.group_configs import state_prefix
from tabletopic.broker.groups.assignors import TopicPartition
from tabletopic.broker.groups.share_coordinator import CLOSE_SESSION_EPOCH, AckBatch, ShareGroups
from tabletopic.broker.groups.share_partitions import ShareFenced
from tabletopic.broker.handlers.common import ErrorFields, error_fields, node_endpoints
from tabletopic.broker.handlers.fetch import add_batch
from tabletopic.broker.protocol.answers import NO_LEADER, current_leader
from tabletopic.broker.protocol.messages.share_groups import (
    AcknowledgedTopic,
    ShareFetchRequest,
    ShareSessionRequest,
)
from tabletopic.broker.protocol.responses import (
    AcquiredRecords,
    NodeEndpoint,
    ShareFetchPartitionData,
    ShareFetchResponse,
)
from tabletopic.s3stream.streams import StreamError
from tabletopic.tasks import first_of

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

DEFAULT_MAX_RECORDS = 500

EntryT = TypeVar("EntryT")


@dataclass(slots=True)
class PartitionAnswer:
    """One partition of a ShareFetch/ShareAcknowledge answer."""

    error: ErrorCode = ErrorCode.none
    ack_error: ErrorCode | None = None
    records: list[bytes | memoryview] = field(default_factory=list)
    acquired: list[AcquiredRecords] = field(default_factory=list)
    leader: tuple[int, int] = NO_LEADER
    waits_at: tuple[int, int] | None = None  # (stream id, offset) to long-poll on


def topic_names(broker: BrokerService, topic_ids: Iterable[uuid.UUID | None]) -> dict[uuid.UUID | None, str]:
    names: dict[uuid.UUID | None, str] = {}
    for topic_id in topic_ids:
        if topic_id is not None and (topic := broker.topics.by_id(topic_id)) is not None:
            names[topic_id] = topic.name
    return names


def read_acks(
    broker: BrokerService, topics: Iterable[AcknowledgedTopic]
) -> tuple[dict[TopicPartition, list[AckBatch]], dict[tuple[uuid.UUID | None, int], ErrorCode]]:
    """The acknowledgement batches of a request by partition, and the partitions it names that do
    not exist (UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION)."""
    topics = list(topics)
    names = topic_names(broker, (t.topic_id for t in topics))
    acks: dict[TopicPartition, list[AckBatch]] = {}
    unknown: dict[tuple[uuid.UUID | None, int], ErrorCode] = {}
    for t in topics:
        name = names.get(t.topic_id)
        for p in t.partitions:
            index = int(p.partition_index)
            if name is None:
                unknown[(t.topic_id, index)] = ErrorCode.unknown_topic_id
                continue
            topic = broker.topics.get(name)
            if topic is None or not 0 <= index < topic.partition_count:
                unknown[(t.topic_id, index)] = ErrorCode.unknown_topic_or_partition
                continue
            batches = [
                AckBatch(int(b.first_offset), int(b.last_offset), tuple(int(x) for x in b.acknowledge_types))
                for b in p.acknowledgement_batches
            ]
            acks.setdefault((name, index), []).extend(batches)
    return acks, unknown


async def apply_acks(
    broker: BrokerService,
    shares: ShareGroups,
    group_id: str,
    member_id: str,
    acks: dict[TopicPartition, list[AckBatch]],
) -> dict[TopicPartition, ErrorCode]:
    """Apply and durably write acknowledgements; the error of each partition (NOT_LEADER_OR_FOLLOWER
    where this broker does not lead it)."""
    errors = {}
    for (name, index), batches in acks.items():
        key = (group_id, name, index)
        serving = broker.leadership.serving_epoch(name, index)
        try:
            if serving is None or await shares.partitions.open(key, serving) is None:
                raise ShareFenced(key)
        except ShareFenced:
            errors[(name, index)] = (
                ErrorCode.not_leader_or_follower if serving is None else ErrorCode.invalid_record_state
            )
            continue
        errors[(name, index)] = shares.acknowledge(key, member_id, batches)
    await shares.partitions.flush((group_id, *tp) for tp in acks)
    return errors


def name_leaders(
    broker: BrokerService, ctx: RequestContext, answers: dict[TopicPartition, PartitionAnswer]
) -> list[NodeEndpoint]:
    """KIP-951 for share groups, as for Fetch: name the current leader of every partition refused
    NOT_LEADER_OR_FOLLOWER (for its records or its acknowledgements), so that the member fetches
    there without asking Metadata first; returns the named leaders' endpoints. Not for a client of
    a zone (zone routing sends it to its zone's brokers)."""
    router = broker.zone_router
    if router is not None and router.zone_of(ctx) is not None:
        return []
    named: set[int] = set()
    for (name, index), answer in answers.items():
        if ErrorCode.not_leader_or_follower in (answer.error, answer.ack_error):
            answer.leader = broker.leadership.leader(name, index)
            named.add(answer.leader[0])
    return node_endpoints(broker, ctx, named) if named else []


class TopicAnswer(TypedDict, Generic[EntryT], total=False):
    """A topic of a ShareFetch or ShareAcknowledge answer, with its API's partition entries (the
    shape of both APIs' generated topic structs)."""

    topic_id: uuid.UUID | None
    partitions: Sequence[EntryT]


def group_by_topic(
    broker: BrokerService,
    answers: dict[TopicPartition, PartitionAnswer],
    unknown: dict[tuple[uuid.UUID | None, int], ErrorCode],
    known_entry: Callable[[int, PartitionAnswer], EntryT],
    unknown_entry: Callable[[int, ErrorCode], EntryT],
) -> list[TopicAnswer[EntryT]]:
    """The topics of a ShareFetch or ShareAcknowledge answer with their partition entries: those
    answered (``known_entry(index, answer)``), then those that do not exist
    (``unknown_entry(index, error)``)."""
    by_topic: dict[uuid.UUID | None, list[EntryT]] = {}
    for (name, index), answer in sorted(answers.items()):
        topic = broker.topics.get(name)
        if topic is None:
            continue
        by_topic.setdefault(topic.topic_id, []).append(known_entry(index, answer))
    for (topic_id, index), error in unknown.items():
        by_topic.setdefault(topic_id, []).append(unknown_entry(index, error))
    return [{"topic_id": topic_id, "partitions": partitions} for topic_id, partitions in by_topic.items()]


def _fetched_entry(index: int, answer: PartitionAnswer) -> ShareFetchPartitionData:
    return {
        "partition_index": index,
        "error_code": answer.error,
        "current_leader": current_leader(answer.leader),
        "acknowledge_error_code": answer.ack_error or ErrorCode.none,
        "records": b"".join(bytes(piece) for piece in answer.records),
        "acquired_records": answer.acquired,
    }


def _unknown_entry(index: int, error: ErrorCode) -> ShareFetchPartitionData:
    return {"partition_index": index, "error_code": error, "current_leader": current_leader(NO_LEADER)}


async def _fetch_partition(
    broker: BrokerService, shares: ShareGroups, group_id: str, member_id: str, tp: TopicPartition, budget: int
) -> PartitionAnswer:
    name, index = tp
    answer = PartitionAnswer()
    topic = broker.topics.get(name)
    if topic is None or not 0 <= index < topic.partition_count:
        answer.error = ErrorCode.unknown_topic_or_partition
        return answer
    serving = broker.leadership.serving_epoch(name, index)
    if serving is None:
        answer.error = ErrorCode.not_leader_or_follower
        return answer
    answer.leader = (broker.node_id, serving)
    store, stream = broker.store, topic.streams[index]
    try:
        info = store.stream_info(stream)
    except StreamError:
        answer.error = (
            ErrorCode.not_leader_or_follower if broker.clustered else ErrorCode.unknown_topic_or_partition
        )
        return answer
    key = (group_id, name, index)

    async def start_offset() -> int:
        configs = await broker.topics.state_items(state_prefix(group_id))
        earliest = configs.get("share.auto.offset.reset", "latest") == "earliest"
        return info.start_offset if earliest else info.end_offset

    try:
        partition = await shares.partitions.open(key, serving, start_offset)
    except ShareFenced:
        answer.error = ErrorCode.not_leader_or_follower
        return answer
    if partition is None:
        return answer
    partition.skip_to(info.start_offset)
    first = partition.next_fetch_offset()
    answer.waits_at = (stream, max(first, info.end_offset))
    if first >= info.end_offset or budget <= 0:
        return answer
    try:
        batches = await store.fetch(stream, first, 1 << 20, info.end_offset)
    except StreamError:
        answer.error = ErrorCode.kafka_storage_error
        return answer
    if not batches:
        return answer
    acquired = shares.acquire((group_id, name, index), member_id, first, batches[-1].next_offset, budget)
    if not acquired:
        return answer
    epochs = store.epochs(stream)
    for batch in batches:
        if any(r.first < batch.next_offset and r.last >= batch.base_offset for r in acquired):
            add_batch(answer.records, batch.base_offset, memoryview(batch.payload), epochs)
    answer.acquired = [
        {"first_offset": r.first, "last_offset": r.last, "delivery_count": r.delivery_count} for r in acquired
    ]
    return answer


async def _wait(
    broker: BrokerService, shares: ShareGroups, answers: Iterable[PartitionAnswer], seconds: float
) -> None:
    """Until new records arrive in a fetched partition or records are released, at most ``seconds``."""
    released = asyncio.ensure_future(shares.availability().wait())
    watch = broker.store.wait_for_data(a.waits_at for a in answers if a.waits_at is not None)
    try:
        await first_of([released, watch.ready], seconds)
    finally:
        watch.close()


def top_error(error_code: ErrorCode, error_message: str | None = None) -> ShareFetchResponse:
    """A ShareFetch answer refused as a whole (the response builder leaves the other fields zero or
    empty)."""
    return {"error_code": error_code, "error_message": error_message}


def requester(
    broker: BrokerService, request: ShareSessionRequest
) -> tuple[ShareGroups, str, str, int] | ErrorFields:
    """The share groups, group id, member id and session epoch of a ShareFetch or ShareAcknowledge,
    or the error fields of the answer refusing it."""
    shares = broker.share_groups
    if shares is None:
        return error_fields(ErrorCode.coordinator_not_available)
    group_id, member_id = request.group_id or "", request.member_id or ""
    if not group_id or not member_id:
        return error_fields(ErrorCode.invalid_request, "the request must name its group and member")
    return shares, group_id, member_id, int(request.share_session_epoch)


async def handle(
    broker: BrokerService, ctx: RequestContext, request: ShareFetchRequest
) -> ShareFetchResponse:
    identified = requester(broker, request)
    if not isinstance(identified, tuple):
        return top_error(**identified)
    shares, group_id, member_id, epoch = identified
    acks, unknown = read_acks(broker, request.topics)
    names = topic_names(broker, (t.topic_id for t in request.forgotten_topics_data))
    forgotten = [
        (names[t.topic_id], int(p))
        for t in request.forgotten_topics_data
        if t.topic_id in names
        for p in t.partitions
    ]
    fetch_names = topic_names(broker, (t.topic_id for t in request.topics))
    added = [
        (fetch_names[t.topic_id], int(p.partition_index))
        for t in request.topics
        if t.topic_id in fetch_names
        for p in t.partitions
    ]
    if epoch == CLOSE_SESSION_EPOCH:
        added = []
    error, session = shares.session(group_id, member_id, epoch, added, forgotten)
    if error is not ErrorCode.none or session is None:
        return top_error(error)
    ack_errors = await apply_acks(broker, shares, group_id, member_id, acks)
    answers = {tp: PartitionAnswer(ack_error=e) for tp, e in ack_errors.items()}
    if epoch == CLOSE_SESSION_EPOCH:
        shares.close_session(group_id, member_id)
    else:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.max_wait.total_seconds()
        max_records = int(request.max_records) if int(request.max_records) > 0 else DEFAULT_MAX_RECORDS
        while True:
            budget = max_records
            for tp in sorted(session.partitions):
                fetched = await _fetch_partition(broker, shares, group_id, member_id, tp, budget)
                budget -= sum(r["last_offset"] - r["first_offset"] + 1 for r in fetched.acquired)
                fetched.ack_error = answers[tp].ack_error if tp in answers else None
                answers[tp] = fetched
            remaining = deadline - loop.time()
            # A member that left stops waiting (known on a single node; in a cluster the coordinator has it).
            gone = shares.members_known_here and not shares.is_member(group_id, member_id)
            # A refused partition is answered at once, as Fetch does: its member has to go elsewhere.
            refused = any(a.error is not ErrorCode.none for a in answers.values())
            if budget < max_records or remaining <= 0 or gone or refused:
                break
            await _wait(broker, shares, answers.values(), remaining)
    shown = {
        tp: a
        for tp, a in answers.items()
        if a.acquired or a.ack_error is not None or a.error is not ErrorCode.none
    }
    endpoints = name_leaders(broker, ctx, shown)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "acquisition_lock_timeout": shares.settings.record_lock_duration_ms,
        "responses": group_by_topic(broker, shown, unknown, _fetched_entry, _unknown_entry),
        "node_endpoints": endpoints,
    }
