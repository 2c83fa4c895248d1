"""Apache Kafka broker keys that have no effect in tabletopic, declared with Kafka's defaults and
validation so a ``server.properties`` moved over from Kafka, ``--override``, AlterConfigs and
IncrementalAlterConfigs all accept them, and DescribeConfigs reports them with a documentation
field that says so. Keys tabletopic does honour are declared by the code that reads them.

Why accept keys that change nothing: client test suites, operators' scripts and tools such as
Cruise Control set them routinely (``min.insync.replicas``, ``log.segment.bytes``), and refusing
them breaks those tools without protecting anything.
"""

from __future__ import annotations

from typing import Any

from tabletopic.config import define, in_range, one_of

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
_GROUP = "kafka compatibility"

_REPLICATION = "a partition is one stream in shared storage, there are no replicas"
_SEGMENTS = "a stream is stored as objects in object storage, there are no log segments or indexes"
_THREADS = "the broker is one asyncio event loop"
_CLEANER = "compaction of compacted topics is scheduled by the broker itself"


def _kafka(name: str, type_: type, default: Any, why: str, validator: Any = None) -> None:
    define(
        name,
        type_,
        default,
        f"Kafka broker key, accepted and reported for compatibility; no effect here: {why}.",
        _GROUP,
        validator,
    )


_CODECS = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")

_kafka("min.insync.replicas", int, 1, _REPLICATION, in_range(1))
_kafka("default.replication.factor", int, 1, _REPLICATION, in_range(1))
_kafka("offsets.topic.replication.factor", int, 3, _REPLICATION, in_range(1))
_kafka("transaction.state.log.replication.factor", int, 3, _REPLICATION, in_range(1))
_kafka("transaction.state.log.min.isr", int, 2, _REPLICATION, in_range(1))
_kafka("unclean.leader.election.enable", bool, False, _REPLICATION)
_kafka("replica.lag.time.max.ms", int, 30_000, _REPLICATION, in_range(0))
_kafka("num.replica.fetchers", int, 1, _REPLICATION, in_range(1))
_kafka("auto.leader.rebalance.enable", bool, True, _REPLICATION)
_kafka("leader.imbalance.check.interval.seconds", int, 300, _REPLICATION, in_range(1))
_kafka(
    "compression.type",
    str,
    "producer",
    "batches are stored as the producer compressed them",
    one_of(*_CODECS),
)
_kafka("compression.gzip.level", int, -1, "batches are never recompressed", in_range(-1, 9))
_kafka("compression.lz4.level", int, 9, "batches are never recompressed", in_range(1, 17))
_kafka("compression.zstd.level", int, 3, "batches are never recompressed", in_range(-131072, 22))
_kafka("log.segment.bytes", int, 1_073_741_824, _SEGMENTS, in_range(14))
_kafka("log.roll.hours", int, 168, _SEGMENTS, in_range(1))
_kafka("log.roll.ms", int, None, _SEGMENTS, in_range(1))
_kafka("log.roll.jitter.hours", int, 0, _SEGMENTS, in_range(0))
_kafka("log.index.size.max.bytes", int, 10_485_760, _SEGMENTS, in_range(4))
_kafka("log.index.interval.bytes", int, 4096, _SEGMENTS, in_range(0))
_kafka("log.preallocate", bool, False, _SEGMENTS)
_kafka("log.segment.delete.delay.ms", int, 60_000, _SEGMENTS, in_range(0))
_kafka(
    "log.flush.interval.messages", int, LONG_MAX, "every acknowledged batch is already durable", in_range(1)
)
_kafka("log.flush.interval.ms", int, None, "every acknowledged batch is already durable", in_range(0))
_kafka(
    "log.message.timestamp.type",
    str,
    "CreateTime",
    "set message.timestamp.type on the topic",
    one_of("CreateTime", "LogAppendTime"),
)
_kafka("log.message.timestamp.before.max.ms", int, LONG_MAX, "timestamps are not range-checked", in_range(0))
_kafka("log.message.timestamp.after.max.ms", int, LONG_MAX, "timestamps are not range-checked", in_range(0))
_kafka("log.cleanup.policy", list, ["delete"], "set cleanup.policy on the topic")
_kafka("log.cleaner.enable", bool, True, _CLEANER)
_kafka("log.cleaner.threads", int, 1, _CLEANER, in_range(0))
_kafka(
    "log.cleaner.delete.retention.ms", int, 86_400_000, "set delete.retention.ms on the topic", in_range(0)
)
_kafka(
    "log.cleaner.min.cleanable.ratio",
    float,
    0.5,
    "set min.cleanable.dirty.ratio on the topic",
    in_range(0, 1),
)
_kafka("log.cleaner.min.compaction.lag.ms", int, 0, "set min.compaction.lag.ms on the topic", in_range(0))
_kafka(
    "log.cleaner.max.compaction.lag.ms", int, LONG_MAX, "set max.compaction.lag.ms on the topic", in_range(1)
)
define(
    "log.cleaner.backoff.ms",
    int,
    15_000,
    "How often the log cleaner looks for compacted partitions due for cleaning (their "
    "min.cleanable.dirty.ratio reached, or max.compaction.lag.ms past).",
    "broker",
    in_range(1),
)
_kafka("log.cleaner.io.max.bytes.per.second", float, 1.7976931348623157e308, _CLEANER, in_range(0))
_kafka("log.local.retention.ms", int, -2, "there is no local tier to retain", in_range(-2))
_kafka("log.local.retention.bytes", int, -2, "there is no local tier to retain", in_range(-2))
_kafka("remote.log.storage.system.enable", bool, False, "all data already lives in object storage")
_kafka("delete.topic.enable", bool, True, "topics can always be deleted")
_kafka("num.network.threads", int, 3, _THREADS, in_range(1))
_kafka("num.io.threads", int, 8, _THREADS, in_range(1))
_kafka("background.threads", int, 10, _THREADS, in_range(1))
_kafka("num.recovery.threads.per.data.dir", int, 2, _THREADS, in_range(1))
_kafka("socket.send.buffer.bytes", int, 102_400, "the operating system sizes socket buffers", in_range(-1))
_kafka("socket.receive.buffer.bytes", int, 102_400, "the operating system sizes socket buffers", in_range(-1))
_kafka("max.connections", int, INT_MAX, "connections are not counted", in_range(0))
_kafka("max.connections.per.ip", int, INT_MAX, "connections are not counted", in_range(0))
_kafka("replica.fetch.max.bytes", int, 1_048_576, _REPLICATION, in_range(0))
_kafka("fetch.max.bytes", int, 57_671_680, "a Fetch request's own max_bytes bounds its response", in_range(0))
