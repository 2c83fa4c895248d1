"""Every Kafka topic and broker key is accepted with Kafka's defaults and validation; keys with no
meaning here are stored, reported, and documented as such; group config resources work as in Kafka.
Real clients: confluent-kafka's admin client against ``tabletopic serve``; the documentation field
is checked with the handler directly (no client library shows it)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from tests.support.broker_calls import call
from tests.support.kafka_clients import create_topic
from tests.support.kafka_requests import request

SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE


def _alter(
    admin: AdminClient, kind: ResourceType, name: str, *ops: tuple[str, str | None, AlterConfigOpType]
) -> None:
    entries = [ConfigEntry(n, v, incremental_operation=op) for n, v, op in ops]
    resource = ConfigResource(kind, name, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(30)


def _describe(admin: AdminClient, kind: ResourceType, name: str) -> dict[str, str | None]:
    resource = ConfigResource(kind, name)
    return {n: e.value for n, e in admin.describe_configs([resource])[resource].result(30).items()}


def _assert_broker_keys_set(admin: AdminClient, keys: dict[str, str]) -> None:
    """Sets `keys` on broker 1 through IncrementalAlterConfigs and checks it reports them back."""
    _alter(admin, ResourceType.BROKER, "1", *((k, v, SET) for k, v in keys.items()))
    described = _describe(admin, ResourceType.BROKER, "1")
    assert {k: described[k] for k in keys} == keys


def test_kafka_broker_keys_are_accepted_and_reported(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    keys = {
        "min.insync.replicas": "2",
        "log.segment.bytes": "1048576",
        "compression.type": "zstd",
        "log.message.timestamp.type": "LogAppendTime",
        "num.io.threads": "4",
    }
    try:
        _assert_broker_keys_set(admin, keys)
    finally:
        _alter(admin, ResourceType.BROKER, "1", *((k, None, DELETE) for k in keys))
    assert _describe(admin, ResourceType.BROKER, "1")["min.insync.replicas"] == "1"  # Kafka's default


def test_less_common_kafka_broker_keys_are_accepted_stored_and_reported(bootstrap: str) -> None:
    """Keys a Kafka broker accepts though they do nothing here (Kerberos, KRaft quorum, metrics),
    through IncrementalAlterConfigs and the legacy AlterConfigs; they were refused as "unknown
    broker config"."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    keys = {
        "sasl.kerberos.min.time.before.relogin": "120000",
        "controller.quorum.fetch.timeout.ms": "3000",
        "metrics.num.samples": "3",
        "group.consumer.heartbeat.interval.ms": "4000",
    }
    try:
        _assert_broker_keys_set(admin, keys)
        legacy = ConfigResource(ResourceType.BROKER, "1", set_config={"replica.fetch.wait.max.ms": "400"})
        admin.alter_configs([legacy])[legacy].result(30)
        assert _describe(admin, ResourceType.BROKER, "1")["replica.fetch.wait.max.ms"] == "400"
        with pytest.raises(KafkaException, match=r"sasl\.kerberos\.min\.time\.before\.relogin"):
            _alter(admin, ResourceType.BROKER, "1", ("sasl.kerberos.min.time.before.relogin", "soon", SET))
    finally:
        reset = ConfigResource(ResourceType.BROKER, "1", set_config={})
        admin.alter_configs([reset])[reset].result(30)
    described = _describe(admin, ResourceType.BROKER, "1")
    assert described["sasl.kerberos.min.time.before.relogin"] == "60000"  # Kafka's default


def test_invalid_kafka_broker_value_is_refused_naming_the_key(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    with pytest.raises(KafkaException, match=r"min\.insync\.replicas"):
        _alter(admin, ResourceType.BROKER, "1", ("min.insync.replicas", "0", SET))


def test_every_kafka_topic_key_is_accepted(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"keys-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    keys = {
        "segment.bytes": "1048576",
        "min.insync.replicas": "2",
        "message.timestamp.type": "CreateTime",
        "compression.type": "lz4",
        "compression.zstd.level": "9",
        "compression.gzip.level": "5",
        "remote.log.copy.disable": "true",
    }
    _alter(admin, ResourceType.TOPIC, topic, *((k, v, SET) for k, v in keys.items()))
    described = _describe(admin, ResourceType.TOPIC, topic)
    assert {k: described[k] for k in keys} == keys
    with pytest.raises(KafkaException, match=r"compression\.zstd\.level"):
        _alter(admin, ResourceType.TOPIC, topic, ("compression.zstd.level", "99", SET))


def test_group_config_resources_are_stored_validated_and_described(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    group = f"cfg-{uuid.uuid4().hex[:8]}"
    _alter(admin, ResourceType.GROUP, group, ("consumer.session.timeout.ms", "50000", SET))
    described = _describe(admin, ResourceType.GROUP, group)
    assert described["consumer.session.timeout.ms"] == "50000"
    assert described["consumer.heartbeat.interval.ms"] == "5000"  # Kafka's default
    with pytest.raises(KafkaException, match=r"consumer\.session\.timeout\.ms"):
        _alter(admin, ResourceType.GROUP, group, ("consumer.session.timeout.ms", "1000", SET))
    with pytest.raises(KafkaException, match="unknown group config"):
        _alter(admin, ResourceType.GROUP, group, ("no.such.key", "1", SET))


async def test_describe_configs_documents_keys_without_effect(broker_service) -> None:  # type: ignore[no-untyped-def]
    await broker_service.topics.create("doc", 1, {})
    resources = [
        {"resource_type": 2, "resource_name": "doc", "configuration_keys": ["segment.bytes", "retention.ms"]},
        {"resource_type": 4, "resource_name": "1", "configuration_keys": ["min.insync.replicas"]},
        {"resource_type": 32, "resource_name": "g", "configuration_keys": ["consumer.session.timeout.ms"]},
    ]
    response = await call(
        broker_service,
        request(32, 4, include_synonyms=False, include_documentation=True, resources=resources),
    )
    docs = {c.name: c.documentation for r in response.results for c in r.configs}
    assert "no effect here" in docs["segment.bytes"]
    assert "no effect here" in docs["min.insync.replicas"]
    assert "no effect here" in docs["consumer.session.timeout.ms"]
    assert "no effect" not in docs["retention.ms"]


def test_create_partitions_refuses_an_assignment_it_cannot_honour(bootstrap: str) -> None:
    """A partition's only replica is its leader (Metadata says so): an explicit assignment of more
    replicas, of an unknown broker or of the wrong number of partitions is INVALID_REPLICA_ASSIGNMENT
    (it succeeded and Metadata then showed one replica, so a client waiting for the assigned ones
    timed out); one broker per new partition is honoured, and Metadata shows the new count at once."""
    from confluent_kafka.admin import NewPartitions  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"assign-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    node = admin.list_topics(topic, timeout=30).topics[topic].partitions[0].leader

    def grow(count: int, assignment: list[list[int]] | None) -> str | None:
        future = admin.create_partitions([NewPartitions(topic, count, assignment)])[topic]
        try:
            future.result(30)
        except KafkaException as exc:
            return str(exc.args[0].name())
        return None

    assert grow(2, [[node, node + 1]]) == "INVALID_REPLICA_ASSIGNMENT"
    assert grow(2, [[node + 7]]) == "INVALID_REPLICA_ASSIGNMENT"
    assert grow(3, [[node]]) == "INVALID_REPLICA_ASSIGNMENT"
    assert grow(3, [[node], [node]]) is None
    partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions
    assert sorted(partitions) == [0, 1, 2]
    assert all(p.replicas == [node] and p.isrs == [node] for p in partitions.values())
