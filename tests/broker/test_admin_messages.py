"""The message browser's admin API on a running node: records read from an offset, a timestamp or
the last N, decoded through the node's registry (Avro, JSON Schema, Protobuf); a test message
produced; a group's offsets reset; a topic deleted only when its name is confirmed; ACLs and SCRAM
users where security is on."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.support import kafka_clients as clients
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.integration


@pytest.fixture
def admin(broker_process: BrokerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=broker_process.admin_url, timeout=60) as client:
        yield client


def new_topic(admin: httpx.Client, partitions: int = 1) -> str:
    name = f"browse-{uuid.uuid4().hex[:8]}"
    assert admin.post("/v1/topics", json={"name": name, "partitions": partitions}).status_code == 201
    return name


def test_produced_test_messages_read_back_from_an_offset_a_time_and_the_tail(admin: httpx.Client) -> None:
    name = new_topic(admin)
    before = int(time.time() * 1000)
    for i in range(5):
        body = {"key": f"k{i}", "value": json.dumps({"n": i}), "headers": {"src": "web"}, "partition": 0}
        made = admin.post(f"/v1/topics/{name}/messages", json=body)
        assert made.status_code == 201, made.text
        assert made.json()["offset"] == i
    tail = admin.get(f"/v1/topics/{name}/messages", params={"partition": 0, "limit": 2}).json()
    assert [r["offset"] for r in tail["records"]] == [3, 4] and tail["high_watermark"] == 5
    first = admin.get(f"/v1/topics/{name}/messages", params={"offset": 1, "limit": 2}).json()["records"]
    assert [r["offset"] for r in first] == [1, 2]
    assert first[0]["key"] == {"format": "text", "value": "k1"}
    assert first[0]["value"] == {"format": "json", "value": {"n": 1}}
    assert first[0]["headers"] == [{"key": "src", "value": "web"}]
    assert first[0]["timestamp"] >= before
    by_time = admin.get(f"/v1/topics/{name}/messages", params={"timestamp": before, "limit": 10}).json()
    assert [r["offset"] for r in by_time["records"]] == [0, 1, 2, 3, 4]
    missing = admin.get("/v1/topics/never-made/messages")
    assert (missing.status_code, missing.json()["error_code"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION")


def test_values_in_confluent_wire_format_are_decoded_through_the_nodes_registry(
    admin: httpx.Client, broker_process: BrokerProcess, tmp_path: Path
) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    name = new_topic(admin)
    registry = SchemaRegistryClient({"url": broker_process.registry_url})
    avro = AvroSerializer(
        registry,
        json.dumps(
            {
                "type": "record",
                "name": "Order",
                "fields": [
                    {"name": "id", "type": "long"},
                    {
                        "name": "address",
                        "type": {
                            "type": "record",
                            "name": "A",
                            "fields": [{"name": "street", "type": "string"}],
                        },
                    },
                    {"name": "coupon", "type": ["null", "string"], "default": None},
                ],
            }
        ),
    )
    as_json = JSONSerializer(
        json.dumps({"type": "object", "properties": {"sku": {"type": "string"}}}), registry
    )
    context = SerializationContext(name, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": broker_process.bootstrap})
    producer.produce(
        name, value=avro({"id": 7, "address": {"street": "Main"}, "coupon": None}, context), partition=0
    )
    other_subject = SerializationContext(f"{name}-json", MessageField.VALUE)  # one topic, two formats
    producer.produce(name, value=as_json({"sku": "x-1"}, other_subject), partition=0)
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    from tests.support.table_producers import compile_proto

    module = compile_proto(
        'syntax = "proto3";\nmessage Click { string page = 1; int64 at = 2; }\n',
        f"click_{name[-8:]}",
        tmp_path,
    )
    as_proto = ProtobufSerializer(module.Click, registry, {"use.deprecated.format": False})
    proto_subject = SerializationContext(f"{name}-proto", MessageField.VALUE)
    producer.produce(name, value=as_proto(module.Click(page="/docs", at=5), proto_subject), partition=0)
    assert producer.flush(30) == 0
    records = admin.get(f"/v1/topics/{name}/messages", params={"offset": 0}).json()["records"]
    assert records[0]["value"]["format"] == "avro" and records[0]["value"]["schema_id"] > 0
    assert records[0]["value"]["value"] == {"id": 7, "address": {"street": "Main"}, "coupon": None}
    assert records[1]["value"]["format"] == "json" and records[1]["value"]["value"] == {"sku": "x-1"}
    assert records[2]["value"]["format"] == "protobuf" and records[2]["value"]["value"] == {
        "page": "/docs",
        "at": 5,
    }


def test_a_groups_offsets_reset_to_earliest_a_timestamp_and_an_offset(
    admin: httpx.Client, broker_process: BrokerProcess
) -> None:
    name = new_topic(admin, partitions=2)
    clients.confluent_produce(broker_process.bootstrap, name, clients.make_messages(10, 2, "r"), "none", True)
    group = f"g-{uuid.uuid4().hex[:6]}"
    latest = admin.post(f"/v1/groups/{group}/offsets", json={"topic": name, "to": "latest"})
    assert latest.status_code == 200, latest.text
    assert latest.json()["offsets"] == {"0": 5, "1": 5}
    earliest = admin.post(f"/v1/groups/{group}/offsets", json={"topic": name, "to": "earliest"}).json()
    assert earliest["offsets"] == {"0": 0, "1": 0}
    exact = admin.post(f"/v1/groups/{group}/offsets", json={"topic": name, "to": "offset", "value": 3}).json()
    assert exact["offsets"] == {"0": 3, "1": 3}
    future = int(time.time() * 1000) + 3_600_000
    after = admin.post(
        f"/v1/groups/{group}/offsets", json={"topic": name, "to": "timestamp", "value": future}
    )
    assert after.json()["offsets"] == {"0": 5, "1": 5}  # nothing that late: the end
    needs_value = admin.post(f"/v1/groups/{group}/offsets", json={"topic": name, "to": "offset"})
    assert needs_value.status_code == 400 and "needs a value" in needs_value.json()["message"]
    beyond = admin.post(
        f"/v1/groups/{group}/offsets", json={"topic": name, "to": "earliest", "partitions": [1, 7]}
    )
    assert beyond.status_code == 404, beyond.text
    assert beyond.json()["message"] == f"topic {name} has partitions 0 to 1: no partition 7"
    twice = admin.post(
        f"/v1/groups/{group}/offsets", json={"topic": name, "to": "latest", "partitions": [1, 1]}
    )
    assert twice.json()["offsets"] == {"1": 5}, twice.text
    # Kafka's group ids may hold a slash; the path takes the whole id (the CLI quotes it).
    slashed = quote(f"team/{group}", safe="")
    moved = admin.post(f"/v1/groups/{slashed}/offsets", json={"topic": name, "to": "latest"})
    assert moved.status_code == 200 and moved.json()["group"] == f"team/{group}", moved.text
    described = admin.get(f"/v1/groups/{slashed}")
    assert described.status_code == 200 and described.json()["group_id"] == f"team/{group}", described.text


def test_the_console_deletes_a_topic_only_when_its_name_is_typed_again(
    admin: httpx.Client, broker_process: BrokerProcess
) -> None:
    name = new_topic(admin)
    same_site = {"Origin": broker_process.admin_url}
    wrong = admin.post(f"/topics/{name}/delete", data={"confirm": "something else"}, headers=same_site)
    assert "type the topic&#x27;s name" in wrong.text
    assert admin.get(f"/v1/topics/{name}").status_code == 200
    cross_site = admin.post(
        f"/topics/{name}/delete", data={"confirm": name}, headers={"Origin": "http://evil.example"}
    )
    assert cross_site.status_code == 403
    done = admin.post(f"/topics/{name}/delete", data={"confirm": name}, headers=same_site)
    assert f"topic {name} deleted" in done.text
    assert admin.get(f"/v1/topics/{name}").status_code == 404


def test_scram_users_are_listed_set_and_deleted_and_acls_say_when_there_is_no_authorizer(
    admin: httpx.Client,
) -> None:
    user = f"u{uuid.uuid4().hex[:6]}"
    made = admin.post(
        "/v1/scram-users", json={"name": user, "password": "pw-123456", "mechanism": "SCRAM-SHA-512"}
    )
    assert made.status_code == 201, made.text
    listed = {u["name"]: u for u in admin.get("/v1/scram-users").json()}
    assert listed[user]["mechanisms"] == [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]
    assert admin.delete(f"/v1/scram-users/{user}").status_code == 200
    assert user not in {u["name"] for u in admin.get("/v1/scram-users").json()}
    acls = admin.get("/v1/acls")
    assert acls.status_code == 400 and acls.json()["error_code"] == "SECURITY_DISABLED"
    assert "SECURITY_DISABLED" in acls.json()["error_code"] and acls.json()["message"]
