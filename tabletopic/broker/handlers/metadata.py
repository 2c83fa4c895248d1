"""Metadata (3): brokers, and topics with their partitions; creates missing topics when the
client allows it and ``auto.create.topics.enable`` is on (clients rely on that as much as on
CreateTopics). The answer is encoded here (:mod:`~tabletopic.broker.protocol.metadata_encoder`):
kio took 250-300 ms for one listing 10,000 partitions."""

from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict, cast

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.handlers.common import ZERO_UUID
from tabletopic.broker.leadership import Leadership
from tabletopic.broker.protocol.messages.metadata import (
    TOPICS_BY_ID_SINCE,
    MetadataRequest,
    MetadataRequestTopic,
    allows_auto_creation,
    topic_id_of,
)
from tabletopic.broker.protocol.metadata_encoder import SharedPartitions
from tabletopic.broker.protocol.responses import (
    MetadataResponse,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from tabletopic.broker.topics import Topic, TopicError, check_topic_name
from tabletopic.log_limit import RateLimitedLog

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

log = logging.getLogger(__name__)
_warn = RateLimitedLog(log)


class FoundTopicFields(TypedDict):
    """A found topic's fields but its partitions, to be unpacked into a topic dict of Metadata or
    DescribeTopicPartitions (whose partition entries differ)."""

    error_code: ErrorCode
    name: str | None
    topic_id: uuid.UUID | None
    is_internal: bool
    topic_authorized_operations: int


def partition_entry(broker: BrokerService, topic: str, index: int) -> MetadataResponsePartition:
    """One partition as Metadata and DescribeTopicPartitions describe it: its leader (the predicted
    one while it moves, never none) with the leader epoch (KIP-320), the leader being its only
    replica (the data lives in shared object storage)."""
    node, epoch = broker.leadership.leader(topic, index)
    return {
        "error_code": ErrorCode.none,
        "partition_index": index,
        "leader_id": node,
        "leader_epoch": epoch,
        "replica_nodes": [node],
        "isr_nodes": [node],
        "offline_replicas": [],
    }


def topic_entry(broker: BrokerService, topic: Topic) -> MetadataResponseTopic:
    """One topic with every partition (:func:`partition_entry`, inlined: an answer for all topics
    describes 10,000 partitions at a time), kept while the leaders they name stand."""
    leadership = broker.leadership
    cache = _kept.get(leadership)
    if cache is None:
        cache = _kept[leadership] = PartitionEntries()
    return found_topic_entry(topic, cache.entries(leadership, topic))


class PartitionEntries:
    """A broker's Metadata partition entries per topic, built again only once a leader they name
    may have changed (:meth:`Leadership.leaders_version`). Clients ask for a topic's metadata after
    each NOT_LEADER_OR_FOLLOWER, so while a killed broker's partitions move, every client asks
    several times a second for a topic of maybe thousands of partitions, on the very brokers that
    are rebuilding those partitions' state: building the entries of 1,200 partitions took 5-10 ms
    an answer. Answers share each topic's entries as one :class:`SharedPartitions`, which also
    keeps their wire form. Memory: at most ``MAX_TOPICS`` topics, each its entries and their wire
    form for the few versions the clients speak."""

    MAX_TOPICS = 10_000  # bounds memory when topics come and go between changes of leaders

    def __init__(self) -> None:
        self._version: int | None = None
        self._topics: dict[tuple[str, int], SharedPartitions] = {}

    def entries(self, leadership: Leadership, topic: Topic) -> Sequence[MetadataResponsePartition]:
        version = leadership.leaders_version()
        if version is None:
            return _partition_entries(leadership, topic)
        if version != self._version or len(self._topics) >= self.MAX_TOPICS:
            self._topics.clear()
            self._version = version
        key = (topic.name, topic.partition_count)
        kept = self._topics.get(key)
        if kept is None:
            kept = self._topics[key] = SharedPartitions(_partition_entries(leadership, topic))
        return cast(Sequence[MetadataResponsePartition], kept)


# Per broker (several run in one process in tests), forgotten with it.
_kept: weakref.WeakKeyDictionary[Leadership, PartitionEntries] = weakref.WeakKeyDictionary()


def _partition_entries(leadership: Leadership, topic: Topic) -> list[MetadataResponsePartition]:
    leader = leadership.leader
    name = topic.name
    partitions: list[MetadataResponsePartition] = []
    none = ErrorCode.none
    for index in range(topic.partition_count):
        node, epoch = leader(name, index)
        replicas = [node]  # one list for both: nothing changes it in place (the zone router replaces)
        partitions.append(
            {
                "error_code": none,
                "partition_index": index,
                "leader_id": node,
                "leader_epoch": epoch,
                "replica_nodes": replicas,
                "isr_nodes": replicas,
                "offline_replicas": [],
            }
        )
    return partitions


def found_topic_fields(topic: Topic) -> FoundTopicFields:
    """The fields of :func:`found_topic_entry` but the partitions (:class:`FoundTopicFields`)."""
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": False,
        "topic_authorized_operations": -2147483648,
    }


def found_topic_entry(topic: Topic, partitions: Sequence[MetadataResponsePartition]) -> MetadataResponseTopic:
    """A topic that exists, with the partition entries given (Metadata and DescribeTopicPartitions
    answer a topic alike; authorized operations are not computed)."""
    return {**found_topic_fields(topic), "partitions": partitions}


def _error_entry(
    name: str | None, code: ErrorCode, topic_id: uuid.UUID | None = ZERO_UUID
) -> MetadataResponseTopic:
    return {"error_code": code, "name": name, "topic_id": topic_id, "partitions": []}


async def handle(broker: BrokerService, ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    """The answer's fields; the server encodes them with the hand-written Metadata encoder
    (``protocol/metadata_encoder.py``). Fields, not bytes, so that the ACL guard can still hide
    topics and add refused ones, and quotas set the throttle, as for every other API."""
    return await answer(broker, ctx, request)


async def answer(broker: BrokerService, ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    """The response's fields (newest shape)."""
    version = ctx.api_version
    requested = request.topics
    allow_auto = allows_auto_creation(request, version) and bool(
        broker.broker_config("auto.create.topics.enable")
    )
    topics: list[MetadataResponseTopic] = []
    if requested is None or (version == 0 and not requested):  # all topics: v1+ null, v0 empty
        topics = [topic_entry(broker, t) for t in sorted(broker.topics.all(), key=lambda t: t.name)]
    elif refusal := _ids_before_v12(requested, version):
        _warn.warning(
            "metadata ids", "refused a Metadata v%d request from %r: %s", version, ctx.client_id, refusal
        )
        topics = [_error_entry(t.name or "", ErrorCode.invalid_request) for t in requested]
    else:
        for wanted in requested:
            name = wanted.name
            topic_id = topic_id_of(wanted, version)
            if name is None and topic_id is not None and topic_id != ZERO_UUID:
                topic = broker.topics.by_id(topic_id)
                topics.append(
                    topic_entry(broker, topic)
                    if topic
                    else _error_entry(None, ErrorCode.unknown_topic_id, topic_id)
                )
                continue
            topics.append(await _lookup_or_create(broker, name or "", allow_auto))
    leadership = broker.leadership
    if broker.zone_router is not None:
        broker.zone_router.route_metadata(ctx, topics)
    return {
        "throttle_time": 0,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in leadership.brokers(ctx.listener)
        ],
        "cluster_id": broker.cluster_id,
        "controller_id": leadership.controller_id(),
        "topics": topics,
        "cluster_authorized_operations": -2147483648,
    }


def _ids_before_v12(requested: Sequence[MetadataRequestTopic], version: int) -> str | None:
    """Why a v10 or v11 request is invalid, as Kafka judges it: those versions carry a topic id
    field, but a topic is named, never asked for by id, before v12 (whose response may name a topic
    null). Kafka refuses the whole request: every topic answers INVALID_REQUEST."""
    if version >= TOPICS_BY_ID_SINCE:
        return None
    for wanted in requested:
        if wanted.name is None:
            return f"a topic name is null, which only v{TOPICS_BY_ID_SINCE} on allows"
        topic_id = topic_id_of(wanted, version)
        if topic_id is not None and topic_id != ZERO_UUID:
            return f"topic {wanted.name!r} is asked for by id, which only v{TOPICS_BY_ID_SINCE} on allows"
    return None


async def _lookup_or_create(broker: BrokerService, name: str, allow_auto: bool) -> MetadataResponseTopic:
    topic = broker.topics.get(name)
    if topic is not None:
        return topic_entry(broker, topic)
    try:
        check_topic_name(name)
    except TopicError as exc:
        return _error_entry(name, exc.error_code)
    if not allow_auto:
        return _error_entry(name, ErrorCode.unknown_topic_or_partition)
    try:
        topic = await broker.create_topic(name)
    except TopicError as exc:
        if exc.error_code is ErrorCode.topic_already_exists and (existing := broker.topics.get(name)):
            return topic_entry(broker, existing)
        log.warning("auto-creating topic %s failed: %s", name, exc)
        return _error_entry(name, exc.error_code)
    log.info("auto-created topic %s", name)
    return topic_entry(broker, topic)
