"""Reading a topic's offsets with a real Kafka consumer, as any client sees them: what verify
compares the table with, and the dead-letter topic's record of skipped offsets.

Only offsets are kept, folded into ranges as they arrive, so memory stays small however long the
topic. The consumer reads committed data only (``isolation.level=read_committed``): control markers
and aborted transactions occupy offsets but are no records.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tabletopic.table.convert.rows import DLQ_HEADER_OFFSET, DLQ_HEADER_PARTITION, DLQ_HEADER_TOPIC
from tabletopic.table.ops.ranges import Range
from tabletopic.table.table_config import TableTopicConfig

Progress = Callable[[int], None]


@dataclass
class TopicOffsets:
    records: dict[int, list[Range]] = field(default_factory=dict)
    log_starts: dict[int, int] = field(default_factory=dict)
    incomplete: set[int] = field(default_factory=set)


class _RangeBuilder:
    """Appends increasing offsets, merging consecutive ones into ranges."""

    def __init__(self) -> None:
        self.ranges: list[Range] = []

    def add(self, offset: int) -> None:
        if self.ranges and self.ranges[-1][1] == offset:
            self.ranges[-1] = (self.ranges[-1][0], offset + 1)
        elif not self.ranges or offset >= self.ranges[-1][1]:
            self.ranges.append((offset, offset + 1))


def open_consumer(bootstrap: str, extra: Mapping[str, Any] | None = None) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "tabletopic-ops",  # never committed: partitions are assigned, not subscribed
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",  # a start below the log start (trimmed) reads from there
            "fetch.queue.backoff.ms": 1,
            "log_level": 3,
            **(extra or {}),
        }
    )


def topic_configs(bootstrap: str, topic: str, timeout: float = 15.0) -> dict[str, str]:
    """The topic's table-topic configs, as DescribeConfigs answers them."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    try:
        entries = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout)
    except Exception as exc:
        raise LookupError(f"cannot describe topic {topic} at {bootstrap}: {exc}") from exc
    return {name: str(entry.value) for name, entry in entries.items() if entry.value is not None}


def table_topic_config(bootstrap: str, topic: str) -> TableTopicConfig:
    """The topic's table-topic config as the broker reports it; LookupError when the topic is not a
    table topic (what the table commands, verify, redrive and rebuild, act on)."""
    config = TableTopicConfig.from_topic_configs(topic_configs(bootstrap, topic), topic=topic)
    if not config.enabled:
        raise LookupError(f"{topic} is not a table topic (automq.table.topic.enable is not true)")
    return config


def partitions_of(bootstrap: str, topic: str, timeout: float = 10.0) -> list[int]:
    """The topic's partition numbers (raises LookupError when the topic does not exist)."""
    consumer = open_consumer(bootstrap)
    try:
        metadata = consumer.list_topics(topic, timeout=timeout)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            raise LookupError(f"topic {topic} does not exist at {bootstrap}")
        return sorted(found.partitions)
    finally:
        consumer.close()


def read_offsets(
    bootstrap: str,
    topic: str,
    until: Mapping[int, int],
    progress: Progress | None = None,
    idle_timeout: float = 15.0,
) -> TopicOffsets:
    """The offsets of every record of ``topic`` from each partition's log start up to (excluding)
    ``until[partition]``.

    A partition stops at its first record at or past ``until`` or at its end; one that makes no
    progress for ``idle_timeout`` seconds is reported incomplete.
    """
    from confluent_kafka import KafkaError, TopicPartition

    result = TopicOffsets()
    consumer = open_consumer(bootstrap)
    try:
        pending: dict[int, _RangeBuilder] = {}
        assignment = []
        for partition, end in until.items():
            low, _high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            result.log_starts[partition] = low
            result.records[partition] = []
            if end > low:
                pending[partition] = _RangeBuilder()
                assignment.append(TopicPartition(topic, partition, low))
        last_progress = time.monotonic()
        if assignment:
            consumer.assign(assignment)
        while pending:
            messages = consumer.consume(5000, 0.5)
            advanced = 0
            for msg in messages:
                partition = msg.partition()
                builder = pending.get(partition)
                if builder is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        result.records[partition] = builder.ranges
                        del pending[partition]
                        consumer.incremental_unassign([TopicPartition(topic, partition)])
                    continue
                offset = msg.offset()
                if offset >= until[partition]:
                    result.records[partition] = builder.ranges
                    del pending[partition]
                    consumer.incremental_unassign([TopicPartition(topic, partition)])
                    continue
                builder.add(offset)
                advanced += 1
            if advanced:
                last_progress = time.monotonic()
                if progress is not None:
                    progress(advanced)
            elif time.monotonic() - last_progress > idle_timeout:
                for partition, builder in pending.items():
                    result.records[partition] = builder.ranges
                    result.incomplete.add(partition)
                break
    finally:
        consumer.close()
    return result


def dead_lettered(
    bootstrap: str,
    dlq_topic: str,
    source_topic: str,
    idle_timeout: float = 15.0,
    start: Mapping[int, int] | None = None,
) -> dict[int, list[int]]:
    """Source (partition -> offsets) of every record of ``source_topic`` in ``dlq_topic`` from
    ``start`` (the offsets already redriven into the table), from the headers the pipeline writes
    with each dead letter."""
    found: dict[int, list[int]] = {}
    for _, msg in read_all(bootstrap, dlq_topic, idle_timeout, start):
        position = dlq_position(msg.headers(), source_topic)
        if position is not None:
            found.setdefault(position[0], []).append(position[1])
    return found


def dlq_position(headers: Any, source_topic: str) -> tuple[int, int] | None:
    """(partition, offset) of the source record a dead letter's headers name, if of ``source_topic``."""
    values = {k: v for k, v in (headers or []) if v is not None}
    try:
        if values.get(DLQ_HEADER_TOPIC, b"").decode() != source_topic:
            return None
        return int(values[DLQ_HEADER_PARTITION]), int(values[DLQ_HEADER_OFFSET])
    except (KeyError, ValueError, UnicodeDecodeError):
        return None


def read_all(
    bootstrap: str, topic: str, idle_timeout: float = 15.0, start: Mapping[int, int] | None = None
) -> Iterator[tuple[int, Any]]:
    """Yield ``(partition, message)`` for every record of ``topic`` from ``start`` (default: each
    partition's log start) to its current end."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

    consumer = open_consumer(bootstrap)
    try:
        parts = partitions_of(bootstrap, topic)
        ends = {}
        assignment = []
        for p in parts:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            begin = (start or {}).get(p, OFFSET_BEGINNING)
            if high > max(low, begin if begin >= 0 else low):
                ends[p] = high
                assignment.append(TopicPartition(topic, p, begin))
        if not assignment:
            return
        consumer.assign(assignment)
        last = time.monotonic()
        while ends:
            messages = consumer.consume(1000, 0.5)
            if messages:
                last = time.monotonic()
            elif time.monotonic() - last > idle_timeout:
                raise TimeoutError(f"reading {topic}: no progress for {idle_timeout:.0f}s")
            for msg in messages:
                p = msg.partition()
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        ends.pop(p, None)
                    continue
                if p in ends:
                    yield p, msg
                    if msg.offset() + 1 >= ends[p]:
                        ends.pop(p, None)
    finally:
        consumer.close()
