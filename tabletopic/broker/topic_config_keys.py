"""Topic configuration keys: which ones are accepted, their defaults and their validation.

Kafka's usual topic keys are accepted (most only matter to a replicated log and are stored for
tools that read them back). Keys under a prefix another part of the node owns (the table
pipeline's ``automq.table.topic.*``) are accepted only through a :class:`TopicConfigExtension`
registered at assembly, which validates them: the broker itself knows no such key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


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


def _float(value: str) -> None:
    try:
        float(value)
    except ValueError:
        raise InvalidTopicConfig(f"{value!r} is not a number") from None


def _choice(*choices: str, multi: bool = False) -> Callable[[str], None]:
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
    TopicConfigKey("cleanup.policy", "delete", _choice("delete", "compact", multi=True)),
    TopicConfigKey("retention.ms", "604800000", _int(-1), "log.retention.ms"),
    TopicConfigKey("retention.bytes", "-1", _int(-1), "log.retention.bytes"),
    TopicConfigKey("max.message.bytes", "1048588", _int(0), "message.max.bytes"),
    TopicConfigKey("message.timestamp.type", "CreateTime", _choice("CreateTime", "LogAppendTime")),
    TopicConfigKey(
        "compression.type", "producer", _choice("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
    ),
    TopicConfigKey("segment.bytes", "1073741824", _int(14)),
    TopicConfigKey("segment.ms", "604800000", _int(1)),
    TopicConfigKey("segment.index.bytes", "10485760", _int(4)),
    TopicConfigKey("segment.jitter.ms", "0", _int(0)),
    TopicConfigKey("min.insync.replicas", "1", _int(1)),
    TopicConfigKey("flush.messages", "9223372036854775807", _int(1)),
    TopicConfigKey("flush.ms", "9223372036854775807", _int(0)),
    TopicConfigKey("index.interval.bytes", "4096", _int(0)),
    TopicConfigKey("delete.retention.ms", "86400000", _int(0)),
    TopicConfigKey("min.compaction.lag.ms", "0", _int(0)),
    TopicConfigKey("max.compaction.lag.ms", "9223372036854775807", _int(1)),
    TopicConfigKey("file.delete.delay.ms", "60000", _int(0)),
    TopicConfigKey("min.cleanable.dirty.ratio", "0.5", _float),
    TopicConfigKey("unclean.leader.election.enable", "false", _bool),
    TopicConfigKey("preallocate", "false", _bool),
    TopicConfigKey("message.downconversion.enable", "true", _bool),
    TopicConfigKey("message.timestamp.difference.max.ms", "9223372036854775807", _int(0)),
    TopicConfigKey("message.timestamp.before.max.ms", "9223372036854775807", _int(0)),
    TopicConfigKey("message.timestamp.after.max.ms", "9223372036854775807", _int(0)),
    TopicConfigKey("local.retention.ms", "-2", _int(-2)),
    TopicConfigKey("local.retention.bytes", "-2", _int(-2)),
    TopicConfigKey("remote.storage.enable", "false", _bool),
    TopicConfigKey("leader.replication.throttled.replicas", "", _any),
    TopicConfigKey("follower.replication.throttled.replicas", "", _any),
]
TOPIC_CONFIG_KEYS: dict[str, TopicConfigKey] = {key.name: key for key in _KEYS}


def validate_topic_configs(
    configs: Mapping[str, str], extensions: Sequence[TopicConfigExtension] = ()
) -> dict[str, str]:
    """Check a topic's complete set of explicit configs; return it as a plain dict.

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
            raise InvalidTopicConfig(f"unknown topic config {name}")
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
