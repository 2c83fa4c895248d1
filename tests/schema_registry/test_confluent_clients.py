"""confluent-kafka's own registry client and serializers against a registry process over real HTTP."""

from __future__ import annotations

import base64
import json
import uuid

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.schema_registry.schemas import ADDRESS, ORDER
from tests.support.registry_process import RegistryProcess
from tests.support.schemas import avro_record, proto_message_classes

pytestmark = pytest.mark.integration

USER_V1 = avro_record("User", {"name": "string", "age": "int"}, namespace="acme")
USER_V2 = {
    **USER_V1,
    "fields": [*USER_V1["fields"], {"name": "email", "type": ["null", "string"], "default": None}],
}


def topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def client(registry_server: RegistryProcess) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry_server.url})


def ctx(name: str) -> SerializationContext:
    return SerializationContext(name, MessageField.VALUE)


def test_avro_serializer_auto_registers_and_round_trips(client: SchemaRegistryClient) -> None:
    name = topic()
    serializer = AvroSerializer(client, json.dumps(USER_V1))
    payload = serializer({"name": "ada", "age": 36}, ctx(name))
    assert payload[0] == 0
    schema_id = int.from_bytes(payload[1:5], "big")
    assert client.get_latest_version(f"{name}-value").schema_id == schema_id
    # A fresh client, so the schema really comes from the server by id.
    fresh = SchemaRegistryClient({"url": client._rest_client.base_urls[0]})
    assert AvroDeserializer(fresh)(payload, ctx(name)) == {"name": "ada", "age": 36}


def test_use_latest_version_serializes_with_the_registered_schema(client: SchemaRegistryClient) -> None:
    name = topic()
    v1_id = client.register_schema(f"{name}-value", Schema(json.dumps(USER_V1), "AVRO"))
    v2_id = client.register_schema(f"{name}-value", Schema(json.dumps(USER_V2), "AVRO"))
    assert v2_id != v1_id
    serializer = AvroSerializer(
        client, None, conf={"auto.register.schemas": False, "use.latest.version": True}
    )
    payload = serializer({"name": "bo", "age": 3, "email": "b@x"}, ctx(name))
    assert int.from_bytes(payload[1:5], "big") == v2_id
    reader = AvroDeserializer(client, json.dumps(USER_V1))  # old reader schema resolves new data
    assert reader(payload, ctx(name)) == {"name": "bo", "age": 3}


def test_incompatible_evolution_is_rejected_with_409(client: SchemaRegistryClient) -> None:
    subject = f"{topic()}-value"
    client.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    breaking = {**USER_V1, "fields": [{"name": "name", "type": "int"}]}
    with pytest.raises(SchemaRegistryError) as raised:
        client.register_schema(subject, Schema(json.dumps(breaking), "AVRO"))
    assert raised.value.http_status_code == 409
    assert raised.value.error_code == 40901
    assert client.test_compatibility(subject, Schema(json.dumps(USER_V2), "AVRO")) is True
    assert client.test_compatibility(subject, Schema(json.dumps(breaking), "AVRO"), verbose=True) is False


def test_schema_references_round_trip(client: SchemaRegistryClient) -> None:
    name = topic()
    address, order = ADDRESS, ORDER
    address_subject = f"{name}-address"
    client.register_schema(address_subject, Schema(json.dumps(address), "AVRO"))
    ref = SchemaReference("acme.Address", address_subject, 1)
    order_schema = Schema(json.dumps(order), "AVRO", [ref])
    order_id = client.register_schema(f"{name}-value", order_schema)
    serializer = AvroSerializer(
        client, order_schema, conf={"auto.register.schemas": False, "use.latest.version": True}
    )
    payload = serializer({"id": 7, "ship_to": {"city": "Oslo"}}, ctx(name))
    assert int.from_bytes(payload[1:5], "big") == order_id
    fresh = SchemaRegistryClient({"url": client._rest_client.base_urls[0]})
    assert AvroDeserializer(fresh)(payload, ctx(name)) == {"id": 7, "ship_to": {"city": "Oslo"}}
    assert [r.subject for r in fresh.get_schema(order_id).references or []] == [address_subject]


def test_client_admin_calls_work_with_slashed_subjects(client: SchemaRegistryClient) -> None:
    subject = f"team/{topic()}/value"
    schema_id = client.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    assert subject in client.get_subjects()
    found = client.lookup_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    assert (found.schema_id, found.version) == (schema_id, 1)
    assert client.get_versions(subject) == [1]
    assert client.get_version(subject, 1).schema_id == schema_id
    client.set_compatibility(subject, "FULL")
    assert client.get_compatibility(subject) == "FULL"
    assert client.get_compatibility() in ("BACKWARD", "FULL", "NONE")
    assert client.delete_subject(subject) == [1]
    assert client.delete_subject(subject, permanent=True) == [1]
    assert subject not in client.get_subjects()
    assert "AVRO" in client.get_schema_types()


def test_json_schema_serializer_round_trips(client: SchemaRegistryClient) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    name = topic()
    schema = json.dumps(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Point",
            "type": "object",
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
            "required": ["x"],
        }
    )
    payload = JSONSerializer(schema, client)({"x": 1, "y": 2}, ctx(name))
    schema_id = int.from_bytes(payload[1:5], "big")
    assert client.get_schema(schema_id).schema_type == "JSON"
    fresh = SchemaRegistryClient({"url": client._rest_client.base_urls[0]})
    assert JSONDeserializer(None, schema_registry_client=fresh)(payload, ctx(name)) == {"x": 1, "y": 2}
    # Dropping a required property's type is an incompatible change for JSON too.
    narrowed = json.dumps({"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]})
    with pytest.raises(SchemaRegistryError) as raised:
        client.register_schema(f"{name}-value", Schema(narrowed, "JSON"))
    assert raised.value.http_status_code == 409


def _protobuf_messages() -> tuple[type, type]:
    """``demo.Order`` importing ``demo/money.proto``, so the serializer registers a reference too."""
    classes = proto_message_classes(
        [
            ("demo/money.proto", "demo", {"Money": {"units": "int64", "currency": "string"}}),
            ("demo/order.proto", "demo", {"Order": {"id": "string", "total": ".demo.Money"}}),
        ]
    )
    return classes["demo.Order"], classes["demo.Money"]


def test_protobuf_serializer_round_trips_with_references(client: SchemaRegistryClient) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    if "PROTOBUF" not in client.get_schema_types():
        pytest.skip("the Protobuf format is not available on this registry yet")
    order_class, money_class = _protobuf_messages()
    name = topic()
    serializer = ProtobufSerializer(order_class, client, {"use.deprecated.format": False})
    order = order_class(id="o-1", total=money_class(units=42, currency="EUR"))
    payload = serializer(order, ctx(name))
    schema_id = int.from_bytes(payload[1:5], "big")
    registered = client.get_schema(schema_id)
    assert registered.schema_type == "PROTOBUF"
    assert [r.name for r in registered.references or []] == ["demo/money.proto"]
    fresh = SchemaRegistryClient({"url": client._rest_client.base_urls[0]})
    decoded = ProtobufDeserializer(order_class, {"use.deprecated.format": False}, fresh)(payload, ctx(name))
    assert decoded == order
    # The same message again answers the same id (the stored form is stable across base64 input).
    assert int.from_bytes(serializer(order, ctx(name))[1:5], "big") == schema_id
    breaking = 'syntax = "proto3";\npackage demo;\nmessage Order {\n  int64 id = 1;\n}\n'
    with pytest.raises(SchemaRegistryError) as raised:
        client.register_schema(f"{name}-value", Schema(breaking, "PROTOBUF"))
    assert raised.value.http_status_code == 409
    serialized = httpx.get(
        f"{client._rest_client.base_urls[0]}/schemas/ids/{schema_id}", params={"format": "serialized"}
    ).json()["schema"]
    assert base64.b64decode(serialized)  # a FileDescriptorProto, not .proto text


def test_a_client_on_a_base_context_path_round_trips_in_its_context(registry_server: RegistryProcess) -> None:
    """confluent-kafka pointed at ``…/contexts/.{ctx}``: it registers and reads inside the context,
    whose ids are its own."""
    context = f".c{uuid.uuid4().hex[:8]}"
    scoped = SchemaRegistryClient({"url": f"{registry_server.url}/contexts/{context}"})
    name = topic()
    # A schema of its own, so the default context's id 1 (any other schema) cannot stand in for it.
    user = {**USER_V1, "namespace": f"acme.{context[1:]}"}
    payload = AvroSerializer(scoped, json.dumps(user))({"name": "cy", "age": 7}, ctx(name))
    assert int.from_bytes(payload[1:5], "big") == 1  # the context's first id
    fresh = SchemaRegistryClient({"url": f"{registry_server.url}/contexts/{context}"})
    assert AvroDeserializer(fresh)(payload, ctx(name)) == {"name": "cy", "age": 7}
    with httpx.Client(base_url=registry_server.url, timeout=10) as http:
        assert f":{context}:{name}-value" in http.get("/subjects").json()
        assert context in http.get("/contexts").json()
