"""Data contracts end to end: confluent-kafka's serializers fetch the rule set this registry stores
and evaluate it themselves (CEL conditions, JSONata migrations), for Avro, JSON Schema and
Protobuf, against a registry process over real HTTP."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from confluent_kafka.schema_registry import (
    ConfigCompatibilityLevel,
    Metadata,
    MetadataProperties,
    Rule,
    RuleKind,
    RuleMode,
    RuleSet,
    Schema,
    SchemaRegistryClient,
    ServerConfig,
)
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError

from tests.support.registry_process import RegistryProcess
from tests.support.schemas import proto_message_classes

pytestmark = pytest.mark.integration

celpy = pytest.importorskip("celpy", reason="confluent-kafka evaluates CEL rules with cel-python")
pytest.importorskip("jsonata", reason="confluent-kafka runs JSONata migrations with jsonata-python")

from confluent_kafka.schema_registry.rules.cel.cel_executor import CelExecutor  # noqa: E402
from confluent_kafka.schema_registry.rules.jsonata.jsonata_executor import JsonataExecutor  # noqa: E402

CelExecutor.register()
JsonataExecutor.register()

NO_AUTO = {"auto.register.schemas": False, "use.latest.version": True}


def topic() -> str:
    return f"r-{uuid.uuid4().hex[:10]}"


def ctx(name: str) -> SerializationContext:
    return SerializationContext(name, MessageField.VALUE)


def _rule(name: str, kind: RuleKind, mode: RuleMode, language: str, expr: str) -> Rule:
    """An enabled rule with no doc, tags, params or success/failure actions: the client's Rule
    takes every field by name."""
    return Rule(
        name=name,
        doc=None,
        kind=kind,
        mode=mode,
        type=language,
        tags=None,
        params=None,
        expr=expr,
        on_success=None,
        on_failure=None,
        disabled=False,
    )


def positive(field: str) -> RuleSet:
    condition = _rule("positive", RuleKind.CONDITION, RuleMode.WRITEREAD, "CEL", f"message.{field} > 0")
    return RuleSet(migration_rules=None, domain_rules=[condition])


@pytest.fixture
def client(registry_server: RegistryProcess) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry_server.url})


def fresh(client: SchemaRegistryClient) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": client._rest_client.base_urls[0]})


def register_with_rule(client: SchemaRegistryClient, subject: str, text: str, kind: str, field: str) -> int:
    schema_id = client.register_schema(subject, Schema(text, kind, rule_set=positive(field)))
    # The rule set comes back from the server, not from the client's cache.
    stored = fresh(client).get_latest_version(subject).schema
    assert stored.rule_set is not None and stored.rule_set.domain_rules[0].expr == f"message.{field} > 0"
    return schema_id


def check_rule_round_trip(serializer: Any, deserializer: Any, name: str, good: Any, bad: Any) -> Any:
    payload = serializer(good, ctx(name))
    with pytest.raises(SerializationError) as refused:
        serializer(bad, ctx(name))
    # The client wraps its RuleConditionError; the rule that refused is named in it.
    assert "message." in str(refused.value.__cause__) and type(refused.value.__cause__).__name__ == (
        "RuleConditionError"
    )
    return deserializer(payload, ctx(name))


def test_avro_cel_condition_is_enforced_on_write_and_read(client: SchemaRegistryClient) -> None:
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    name = topic()
    schema = json.dumps({"type": "record", "name": "Pay", "fields": [{"name": "amount", "type": "int"}]})
    register_with_rule(client, f"{name}-value", schema, "AVRO", "amount")
    decoded = check_rule_round_trip(
        AvroSerializer(client, None, conf=NO_AUTO),
        AvroDeserializer(fresh(client)),
        name,
        {"amount": 5},
        {"amount": -5},
    )
    assert decoded == {"amount": 5}


def test_json_schema_cel_condition_is_enforced(client: SchemaRegistryClient) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    name = topic()
    schema = json.dumps(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Pay",
            "type": "object",
            "properties": {"amount": {"type": "integer"}},
        }
    )
    register_with_rule(client, f"{name}-value", schema, "JSON", "amount")
    decoded = check_rule_round_trip(
        JSONSerializer(None, client, conf=NO_AUTO),
        JSONDeserializer(None, schema_registry_client=fresh(client)),
        name,
        {"amount": 5},
        {"amount": -5},
    )
    assert decoded == {"amount": 5}


def test_protobuf_cel_condition_is_enforced(client: SchemaRegistryClient) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    if "PROTOBUF" not in client.get_schema_types():
        pytest.skip("the Protobuf format is not available on this registry")
    pay = proto_message_classes([("pay.proto", "rules", {"Pay": {"amount": "int32"}})])["rules.Pay"]
    name = topic()
    text = 'syntax = "proto3";\npackage rules;\n\nmessage Pay {\n  int32 amount = 1;\n}\n'
    register_with_rule(client, f"{name}-value", text, "PROTOBUF", "amount")
    decoded = check_rule_round_trip(
        ProtobufSerializer(pay, client, {**NO_AUTO, "use.deprecated.format": False}),
        ProtobufDeserializer(pay, {"use.deprecated.format": False}, fresh(client)),
        name,
        pay(amount=5),
        pay(amount=-5),
    )
    assert decoded == pay(amount=5)


def test_jsonata_migration_upgrades_old_data_to_the_major_version_asked_for(
    client: SchemaRegistryClient,
) -> None:
    """The reader asks for the latest schema with ``major_version=2`` (``GET /subjects/{s}/metadata``)
    and the client migrates data written with version 1 through the stored UPGRADE rule."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    name = topic()
    subject = f"{name}-value"
    # The rename is a breaking change.
    client.set_config(subject, ServerConfig(compatibility=ConfigCompatibilityLevel.NONE))
    v1 = json.dumps({"type": "record", "name": "U", "fields": [{"name": "age", "type": "int"}]})
    v2 = json.dumps({"type": "record", "name": "U", "fields": [{"name": "years", "type": "int"}]})
    client.register_schema(
        subject, Schema(v1, "AVRO", metadata=Metadata(None, MetadataProperties({"major_version": "1"}), None))
    )
    upgrade = _rule(
        "rename",
        RuleKind.TRANSFORM,
        RuleMode.UPGRADE,
        "JSONATA",
        "$merge([$sift($, function($v, $k) {$k != 'age'}), {'years': $.'age'}])",
    )
    client.register_schema(
        subject,
        Schema(
            v2,
            "AVRO",
            metadata=Metadata(None, MetadataProperties({"major_version": "2"}), None),
            rule_set=RuleSet(migration_rules=[upgrade], domain_rules=None),
        ),
    )
    writer = AvroSerializer(
        client,
        None,
        conf={"auto.register.schemas": False, "use.latest.with.metadata": {"major_version": "1"}},
    )
    payload = writer({"age": 42}, ctx(name))
    reader = AvroDeserializer(fresh(client), conf={"use.latest.with.metadata": {"major_version": "2"}})
    assert reader(payload, ctx(name)) == {"years": 42}
