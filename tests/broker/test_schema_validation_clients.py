"""Broker-side schema validation with real clients against the shared ``tabletopic serve`` node:
confluent-kafka's own serializers (Avro, JSON Schema, Protobuf) registering in the node's registry,
delivery reports showing INVALID_RECORD, kafka-python seeing the error, and AlterConfigs refusing a
bad value."""

from __future__ import annotations

import json
import struct
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.broker_process import BrokerProcess
from tests.support.schemas import avro_record, proto_message_classes

pytestmark = pytest.mark.integration

USER = avro_record("User", {"name": "string", "age": "int"}, namespace="acme")
JSON_USER = {
    "title": "JsonUser",
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


def _topic(bootstrap: str, **configs: str) -> str:
    name = f"validated-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(30)
    return name


def _deliver(bootstrap: str, topic: str, values: list[bytes], idempotent: bool = False) -> list[Any]:
    """Produce each value in its own request; the delivery report's error (None when accepted)."""
    settings: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 0}
    # An idempotent producer must carry on after a refused batch (its sequences were not used).
    settings.update({"enable.idempotence": True} if idempotent else {"retries": 0})
    producer = Producer(settings)
    outcomes: list[Any] = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, _msg: outcomes.append(err))
        producer.flush(30)
    return outcomes


def _proto_order_class() -> Any:
    return proto_message_classes(
        [("shop/order.proto", "shop", {"Order": {"id": "int64", "item": "string"}})]
    )["shop.Order"]


def _serializers(client: SchemaRegistryClient) -> dict[str, Any]:
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    order = _proto_order_class()
    return {
        "avro": (AvroSerializer(client, json.dumps(USER)), {"name": "ada", "age": 36}),
        "json": (JSONSerializer(json.dumps(JSON_USER), client), {"name": "ada", "age": 36}),
        "protobuf": (
            ProtobufSerializer(order, client, {"use.deprecated.format": False}),
            order(id=7, item="pen"),
        ),
    }


@pytest.mark.parametrize("kind", ["avro", "json", "protobuf"])
def test_confluent_serializers_pass_and_unknown_ids_and_garbage_are_invalid_record(
    broker_process: BrokerProcess, kind: str
) -> None:
    bootstrap = broker_process.bootstrap
    topic = _topic(bootstrap, **{"confluent.value.schema.validation": "true"})
    client = SchemaRegistryClient({"url": broker_process.registry_url})
    serializer, value = _serializers(client)[kind]
    good = serializer(value, SerializationContext(topic, MessageField.VALUE))
    unknown_id = b"\x00" + struct.pack(">I", 987_654) + good[5:]
    garbage = good + b"\xff\xfe trailing garbage"
    outcomes = _deliver(bootstrap, topic, [good, unknown_id, garbage, good], idempotent=kind == "avro")
    assert outcomes[0] is None and outcomes[3] is None
    for refused in outcomes[1:3]:
        assert refused is not None and refused.code() == KafkaError.INVALID_RECORD, refused
    # A schema registered for another topic's subject is refused too (TopicNameStrategy).
    other = serializer(value, SerializationContext(f"{topic}-other", MessageField.VALUE))
    if other[1:5] != good[1:5]:
        assert _deliver(bootstrap, topic, [other])[0].code() == KafkaError.INVALID_RECORD


def test_kafka_python_sees_invalid_record(broker_process: BrokerProcess) -> None:
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    topic = _topic(broker_process.bootstrap, **{"confluent.value.schema.validation": "true"})
    producer = KafkaProducer(bootstrap_servers=broker_process.bootstrap, retries=0, enable_idempotence=False)
    try:
        with pytest.raises(InvalidRecordError):
            producer.send(topic, b"not in the wire format").get(timeout=30)
        # null values (tombstones) pass, as on Confluent Server
        assert producer.send(topic, key=b"k", value=None).get(timeout=30).offset == 0
    finally:
        producer.close(5)


def test_alter_configs_refuses_a_bad_validation_value(broker_process: BrokerProcess) -> None:
    topic = _topic(broker_process.bootstrap)
    admin = AdminClient({"bootstrap.servers": broker_process.bootstrap})
    resource = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry(
                "confluent.value.schema.validation", "maybe", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    with pytest.raises(Exception, match=r"confluent\.value\.schema\.validation"):
        admin.incremental_alter_configs([resource])[resource].result(30)
    resource = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry(
                "confluent.value.schema.validation", "true", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)
    assert _deliver(broker_process.bootstrap, topic, [b"raw"])[0].code() == KafkaError.INVALID_RECORD
