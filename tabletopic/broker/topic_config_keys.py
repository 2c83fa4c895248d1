"""Topic configuration keys: which ones are accepted, their defaults and their validation.

Kafka's usual topic keys are accepted (most only matter to a replicated log and are stored for
tools that read them back). Keys under a prefix another part of the node owns (the table
pipeline's ``automq.table.topic.*``) are accepted only through a :class:`TopicConfigExtension`
registered at assembly, which validates them: the broker itself knows no such key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tabletopic.config import nearest_name


@dataclass(frozen=True, slots=True)
class TopicConfigExtension:
    """Topic config keys under ``prefix`` owned and validated by another part of the node.

    ``validate`` gets the topic's whole resulting config map (it reads only its own keys) and raises
    ``ValueError`` with a reason that names the offending key; the client sees it as INVALID_CONFIG.
    """

    prefix: str
    validate: Callable[[dict[str, str]], None]
    # Checks that need the topic's name and the node's state (other topics, the table catalog);
    # run in a thread on CreateTopics and AlterConfigs, after ``validate``. Raises ValueError too.
    validate_topic: Callable[[str, dict[str, str]], None] | None = None


class InvalidTopicConfig(ValueError):
    """A topic config key is unknown or its value is invalid; the message is the client's reason."""


def _int(low: int | None = None) -> Callable[[str], None]:
    def check(value: str) -> None:
        try:
            number = int(value)
        except ValueError:
            raise InvalidTopicConfig(f"{value!r} is not an integer") from None
        if low is not None and number < low:
            raise InvalidTopicConfig(f"{number} is below the minimum {low}")

    return check


def int_range(low: int, high: int) -> Callable[[str], None]:
    """A check that a value is an integer within ``[low, high]`` (topic and group configs)."""
    at_least = _int(low)

    def check(value: str) -> None:
        at_least(value)
        if int(value) > high:
            raise InvalidTopicConfig(f"{value} is above the maximum {high}")

    return check


def _float(value: str) -> None:
    try:
        float(value)
    except ValueError:
        raise InvalidTopicConfig(f"{value!r} is not a number") from None


def choice(*choices: str, multi: bool = False) -> Callable[[str], None]:
    """A check that a value (each of its comma-separated parts with ``multi``) is one of ``choices``
    (topic and group configs)."""

    def check(value: str) -> None:
        parts = [p.strip() for p in value.split(",")] if multi else [value]
        for part in parts:
            if part not in choices:
                raise InvalidTopicConfig(f"{part!r} is not one of {', '.join(choices)}")

    return check


def _bool(value: str) -> None:
    if value.lower() not in ("true", "false"):
        raise InvalidTopicConfig(f"{value!r} is not true or false")


def _any(_value: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class TopicConfigKey:
    name: str
    default: str
    validate: Callable[[str], None]
    # The broker key whose value is this topic key's default (DescribeConfigs reports the source).
    broker_default: str | None = None


_KEYS = [
    TopicConfigKey("cleanup.policy", "delete", choice("delete", "compact", multi=True), "log.cleanup.policy"),
    TopicConfigKey("retention.ms", "604800000", _int(-1), "log.retention.ms"),
    TopicConfigKey("retention.bytes", "-1", _int(-1), "log.retention.bytes"),
    TopicConfigKey("max.message.bytes", "1048588", _int(0), "message.max.bytes"),
    TopicConfigKey(
        "message.timestamp.type",
        "CreateTime",
        choice("CreateTime", "LogAppendTime"),
        "log.message.timestamp.type",
    ),
    TopicConfigKey(
        "compression.type",
        "producer",
        choice("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
        "compression.type",
    ),
    TopicConfigKey("compression.gzip.level", "-1", int_range(-1, 9), "compression.gzip.level"),
    TopicConfigKey("compression.lz4.level", "9", int_range(1, 17), "compression.lz4.level"),
    TopicConfigKey("compression.zstd.level", "3", int_range(-131072, 22), "compression.zstd.level"),
    TopicConfigKey("segment.bytes", "1073741824", _int(14), "log.segment.bytes"),
    TopicConfigKey("segment.ms", "604800000", _int(1)),
    TopicConfigKey("segment.index.bytes", "10485760", _int(4), "log.index.size.max.bytes"),
    TopicConfigKey("segment.jitter.ms", "0", _int(0)),
    TopicConfigKey("min.insync.replicas", "1", _int(1), "min.insync.replicas"),
    TopicConfigKey("flush.messages", "9223372036854775807", _int(1), "log.flush.interval.messages"),
    TopicConfigKey("flush.ms", "9223372036854775807", _int(0)),
    TopicConfigKey("index.interval.bytes", "4096", _int(0), "log.index.interval.bytes"),
    TopicConfigKey("delete.retention.ms", "86400000", _int(0), "log.cleaner.delete.retention.ms"),
    TopicConfigKey("min.compaction.lag.ms", "0", _int(0), "log.cleaner.min.compaction.lag.ms"),
    TopicConfigKey(
        "max.compaction.lag.ms", "9223372036854775807", _int(1), "log.cleaner.max.compaction.lag.ms"
    ),
    TopicConfigKey("file.delete.delay.ms", "60000", _int(0), "log.segment.delete.delay.ms"),
    TopicConfigKey("min.cleanable.dirty.ratio", "0.5", _float, "log.cleaner.min.cleanable.ratio"),
    TopicConfigKey("unclean.leader.election.enable", "false", _bool, "unclean.leader.election.enable"),
    TopicConfigKey("preallocate", "false", _bool, "log.preallocate"),
    TopicConfigKey("message.downconversion.enable", "true", _bool),
    TopicConfigKey("message.timestamp.difference.max.ms", "9223372036854775807", _int(0)),
    TopicConfigKey(
        "message.timestamp.before.max.ms",
        "9223372036854775807",
        _int(0),
        "log.message.timestamp.before.max.ms",
    ),
    TopicConfigKey(
        "message.timestamp.after.max.ms", "9223372036854775807", _int(0), "log.message.timestamp.after.max.ms"
    ),
    TopicConfigKey("local.retention.ms", "-2", _int(-2), "log.local.retention.ms"),
    TopicConfigKey("local.retention.bytes", "-2", _int(-2), "log.local.retention.bytes"),
    TopicConfigKey("remote.storage.enable", "false", _bool),
    TopicConfigKey("remote.log.copy.disable", "false", _bool),
    TopicConfigKey("remote.log.delete.on.disable", "false", _bool),
    TopicConfigKey("leader.replication.throttled.replicas", "", _any),
    TopicConfigKey("follower.replication.throttled.replicas", "", _any),
]
TOPIC_CONFIG_KEYS: dict[str, TopicConfigKey] = {key.name: key for key in _KEYS}

# What the topic keys tabletopic honours do; every other key is stored and reported only.
_HONOURED = {
    "cleanup.policy": "delete: old data is removed by retention.ms and retention.bytes; compact: the "
    "log cleaner keeps the latest value of each key; both may be given.",
    "min.cleanable.dirty.ratio": "Share of a compacted partition appended since its last cleaning "
    "that makes it due for cleaning.",
    "min.compaction.lag.ms": "Records younger than this are never compacted.",
    "max.compaction.lag.ms": "A compacted partition with new records is cleaned at least this often.",
    "delete.retention.ms": "How long a tombstone (a null value) outlives its timestamp in a compacted "
    "partition.",
    "retention.ms": "How long data is kept before retention trims it (-1: forever).",
    "retention.bytes": "Most bytes a partition keeps before retention trims it (-1: no limit).",
    "max.message.bytes": "Largest record batch a Produce may append (MESSAGE_TOO_LARGE beyond).",
    "message.timestamp.type": "CreateTime keeps the producer's timestamps; LogAppendTime stamps the "
    "broker's clock on each batch as it is appended.",
}
_NO_EFFECT = {
    "compression.type": "batches are stored as the producer compressed them",
    "remote.storage.enable": "all data already lives in object storage",
    "remote.log.copy.disable": "all data already lives in object storage",
    "remote.log.delete.on.disable": "all data already lives in object storage",
    "local.retention.ms": "there is no local tier to retain",
    "local.retention.bytes": "there is no local tier to retain",
    "flush.messages": "every acknowledged batch is already durable",
    "flush.ms": "every acknowledged batch is already durable",
    "min.insync.replicas": "a partition is one stream in shared storage, there are no replicas",
    "unclean.leader.election.enable": "a partition is one stream in shared storage, there are no replicas",
    "leader.replication.throttled.replicas": "there are no replicas",
    "follower.replication.throttled.replicas": "there are no replicas",
    "message.downconversion.enable": "only record batch format v2 is served",
}


def topic_config_documentation(name: str) -> str | None:
    """DescribeConfigs' documentation of a topic key: what it does here, or that it does nothing."""
    if name in _HONOURED:
        return _HONOURED[name]
    if name not in TOPIC_CONFIG_KEYS:
        return None
    why = _NO_EFFECT.get(name)
    if why is None:
        if name.startswith(("segment.", "index.", "preallocate", "file.")):
            why = "a stream is stored as objects in object storage, there are no log segments or indexes"
        elif name.startswith("compression."):
            why = "batches are never recompressed"
        elif name.startswith("message.timestamp."):
            why = "timestamps are not range-checked"
        else:
            why = "it only tunes Kafka's own log layer"
    return f"Kafka topic key, accepted and reported for compatibility; no effect here: {why}."


def validate_topic_configs(
    configs: Mapping[str, str | None], extensions: Sequence[TopicConfigExtension] = ()
) -> dict[str, str]:
    """Check a topic's complete set of explicit configs (a null value, as a CreateTopics request
    can carry, is refused); return it as a plain dict.

    Raises:
        InvalidTopicConfig: naming the key and why (unknown key, bad value, or an extension's
            reason for the keys under its prefix).
    """
    result: dict[str, str] = {}
    for name, value in configs.items():
        if value is None:
            raise InvalidTopicConfig(f"config {name} has a null value")
        text = str(value)
        if any(name.startswith(extension.prefix) for extension in extensions):
            result[name] = text
            continue
        key = TOPIC_CONFIG_KEYS.get(name)
        if key is None:
            meant = nearest_name(name, TOPIC_CONFIG_KEYS)
            raise InvalidTopicConfig(
                f"unknown topic config {name}" + (f"; did you mean {meant}?" if meant else "")
            )
        try:
            key.validate(text)
        except InvalidTopicConfig as exc:
            raise InvalidTopicConfig(f"invalid value for {name}: {exc}") from None
        result[name] = text
    for extension in extensions:
        if any(k.startswith(extension.prefix) for k in result):
            try:
                extension.validate(dict(result))
            except ValueError as exc:
                raise InvalidTopicConfig(str(exc)) from exc
    return result


# DescribeConfigs ``config_type`` codes (Kafka's ConfigDef types).
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST, TYPE_PASSWORD = 1, 2, 3, 5, 6, 7, 9
_INT_KEYS = {
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "max.message.bytes",
    "segment.bytes",
    "segment.index.bytes",
    "index.interval.bytes",
    "min.insync.replicas",
}
_LIST_KEYS = {
    "cleanup.policy",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
}


def topic_config_type(name: str) -> int:
    """Kafka's type of a topic config key, as DescribeConfigs v3+ reports it."""
    key = TOPIC_CONFIG_KEYS.get(name)
    if key is None:
        return TYPE_STRING
    if name in _INT_KEYS:
        return TYPE_INT
    if name in _LIST_KEYS:
        return TYPE_LIST
    if key.validate is _bool:
        return TYPE_BOOLEAN
    if key.validate is _float:
        return TYPE_DOUBLE
    if name.endswith((".ms", ".bytes", ".messages")):
        return TYPE_LONG
    return TYPE_STRING
