"""Broker-side schema validation (``confluent.*.schema.validation``) through the Produce handler:
every format, subject name strategies, record_errors in the response, nothing appended when
refused, the topic keys checked, and garbage batches never taking the broker down."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.records.compression import Compression
from tabletopic.records.encoder import Record, build_batch
from tabletopic.validation import schema_validation
from tabletopic.validation.schema_validation import SchemaValidator
from tests.support.broker_calls import call
from tests.support.kafka_requests import make_batch, produce_request
from tests.support.schemas import MemoryLookup, avro_bytes, avro_record, wire

USER = avro_record("User", {"name": "string", "age": "int"}, namespace="acme")
JSON_USER = {
    "title": "acme.JsonUser",
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name"],
}
PROTO = """
syntax = "proto3";
package acme;
message Order { int64 id = 1; string item = 2; }
message Other { string x = 1; }
"""
VALIDATE = {schema_validation.VALUE_VALIDATION: "true"}


@pytest.fixture
def lookup() -> MemoryLookup:
    return MemoryLookup()


@pytest.fixture
def validated(broker_service, lookup):  # type: ignore[no-untyped-def]
    broker_service.record_validator = SchemaValidator(lambda: lookup, lookup.subjects_of, refresh_s=0.0)
    broker_service.topics.set_config_extensions([_extension()])
    return broker_service


def _extension():  # type: ignore[no-untyped-def]
    from tabletopic.broker.topic_config_keys import TopicConfigExtension

    return TopicConfigExtension(schema_validation.PREFIX, schema_validation.validate_topic_configs)


def _partition(response: Any) -> Any:
    return response.responses[0].partition_responses[0]


async def _produce(broker: Any, topic: str, batch: bytes, version: int = 9) -> Any:
    return _partition(await call(broker, produce_request(topic, 0, batch, version)))


def _proto_class(lookup: MemoryLookup, schema_id: int, index: int) -> Any:
    from google.protobuf import message_factory

    from tabletopic.table.convert.protobuf import message_descriptor

    return message_factory.GetMessageClass(message_descriptor(lookup.by_id(schema_id), (index,)))


async def test_good_avro_is_appended_and_bad_records_are_refused_with_record_errors(
    validated, lookup
) -> None:
    await validated.topics.create("users", 1, VALIDATE)
    sid = lookup.register("users-value", "AVRO", USER)
    good = wire(sid, avro_bytes(USER, {"name": "ada", "age": 36}))
    ok = await _produce(validated, "users", make_batch([good, good]))
    assert (ok.error_code, ok.base_offset) == (ErrorCode.none, 0)

    bad = await _produce(
        validated, "users", make_batch([good, wire(999, b"x"), good + b"\x01\x02garbage", None])
    )
    assert bad.error_code is ErrorCode.invalid_record
    assert [e.batch_index for e in bad.record_errors] == [1, 2]
    assert "schema id 999 is not registered" in bad.record_errors[0].batch_index_error_message
    assert "Avro" in bad.record_errors[1].batch_index_error_message
    assert "2 record(s) refused" in bad.error_message
    assert validated.high_watermark("users", 0) == 2  # nothing of the refused batch was appended


async def test_null_values_pass_and_non_wire_format_is_refused(validated, lookup) -> None:
    await validated.topics.create("t", 1, VALIDATE)
    lookup.register("t-value", "AVRO", USER)
    assert (await _produce(validated, "t", make_batch([None]))).error_code is ErrorCode.none  # type: ignore[list-item]
    refused = await _produce(validated, "t", make_batch([b"plain text", b"\x00\x00"]))
    assert refused.error_code is ErrorCode.invalid_record
    assert "wire format" in refused.record_errors[0].batch_index_error_message
    assert len(refused.record_errors) == 2


async def test_schema_id_of_another_subject_is_refused_under_topic_name_strategy(validated, lookup) -> None:
    await validated.topics.create("orders", 1, VALIDATE)
    foreign = lookup.register("payments-value", "AVRO", USER)
    refused = await _produce(
        validated, "orders", make_batch([wire(foreign, avro_bytes(USER, {"name": "a", "age": 1}))])
    )
    assert refused.error_code is ErrorCode.invalid_record
    assert "not registered under subject orders-value" in refused.error_message


async def test_record_name_strategies_name_the_subject_from_the_schema(validated, lookup) -> None:
    configs = {
        **VALIDATE,
        schema_validation.VALUE_STRATEGY: "io.confluent.kafka.serializers.subject.RecordNameStrategy",
    }
    await validated.topics.create("mixed", 1, configs)
    sid = lookup.register("acme.User", "AVRO", USER)
    value = wire(sid, avro_bytes(USER, {"name": "a", "age": 1}))
    assert (await _produce(validated, "mixed", make_batch([value]))).error_code is ErrorCode.none
    await validated.topics.create(
        "mixed2", 1, {**VALIDATE, schema_validation.VALUE_STRATEGY: "TopicRecordNameStrategy"}
    )
    refused = await _produce(validated, "mixed2", make_batch([value]))
    assert "subject mixed2-acme.User" in refused.error_message
    sid2 = lookup.register("mixed2-acme.User", "AVRO", USER)  # a new id in this memory lookup
    again = wire(sid2, avro_bytes(USER, {"name": "a", "age": 1}))
    assert (await _produce(validated, "mixed2", make_batch([again]))).error_code is ErrorCode.none


async def test_json_schema_payloads_are_validated_against_the_schema(validated, lookup) -> None:
    await validated.topics.create("j", 1, VALIDATE)
    sid = lookup.register("j-value", "JSON", JSON_USER)
    good = wire(sid, json.dumps({"name": "ada", "age": 3}).encode())
    wrong_type = wire(sid, json.dumps({"name": "ada", "age": "three"}).encode())
    missing = wire(sid, json.dumps({"age": 3}).encode())
    garbage = wire(sid, b'{"name": "ada"} trailing')
    assert (await _produce(validated, "j", make_batch([good]))).error_code is ErrorCode.none
    refused = await _produce(validated, "j", make_batch([good, wrong_type, missing, garbage]))
    assert [e.batch_index for e in refused.record_errors] == [1, 2, 3]
    assert "/age" in refused.record_errors[0].batch_index_error_message
    assert "invalid JSON" in refused.record_errors[2].batch_index_error_message


async def test_protobuf_payloads_with_message_indexes_are_validated(validated, lookup) -> None:
    await validated.topics.create("p", 1, VALIDATE)
    sid = lookup.register("p-value", "PROTOBUF", PROTO)
    order = _proto_class(lookup, sid, 0)(id=7, item="pen").SerializeToString()
    other = _proto_class(lookup, sid, 1)(x="hi").SerializeToString()
    good = [wire(sid, order, b"\x00"), wire(sid, other, b"\x02\x02")]
    assert (await _produce(validated, "p", make_batch(good))).error_code is ErrorCode.none
    bad = [
        wire(sid, order + b"\xff\xff\xff", b"\x00"),
        wire(sid, order + b"\x98\x01\x05", b"\x00"),
        wire(sid, order, b"\x02\x0a"),
    ]
    refused = await _produce(validated, "p", make_batch([good[0], *bad]))
    assert [e.batch_index for e in refused.record_errors] == [1, 2, 3]
    assert "does not have" in refused.record_errors[1].batch_index_error_message  # unknown field 19


async def test_key_validation_and_compressed_batches(validated, lookup) -> None:
    await validated.topics.create("k", 1, {schema_validation.KEY_VALIDATION: "true"})
    sid = lookup.register("k-key", "AVRO", {"type": "string"})
    key = wire(sid, avro_bytes({"type": "string"}, "id-1"))  # type: ignore[arg-type]
    batch = build_batch([Record(key, b"anything"), Record(None, b"x")], compression=Compression.LZ4)
    assert (await _produce(validated, "k", batch)).error_code is ErrorCode.none
    refused = await _produce(
        validated, "k", build_batch([Record(b"raw-key", b"v")], compression=Compression.LZ4)
    )
    assert refused.error_code is ErrorCode.invalid_record
    assert refused.record_errors[0].batch_index_error_message.startswith("key:")


async def test_unvalidated_topics_are_never_decoded(validated, lookup) -> None:
    await validated.topics.create("free", 1, {})
    assert (await _produce(validated, "free", make_batch([b"anything at all"]))).error_code is ErrorCode.none
    assert lookup.by_id_calls == 0


async def test_a_registry_that_fails_gives_a_retriable_error_and_appends_nothing(broker_service) -> None:
    def broken() -> Any:
        raise ConnectionError("metadata database unreachable")

    broker_service.record_validator = SchemaValidator(broken, lambda _id: [])
    broker_service.topics.set_config_extensions([_extension()])
    await broker_service.topics.create("t", 1, VALIDATE)
    result = await _produce(broker_service, "t", make_batch([wire(1, b"x")]))
    assert result.error_code is ErrorCode.request_timed_out
    assert broker_service.high_watermark("t", 0) == 0


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (schema_validation.VALUE_VALIDATION, "yes", "true or false"),
        (schema_validation.VALUE_STRATEGY, "FancyStrategy", "TopicNameStrategy"),
        ("confluent.value.schema.validation.typo", "true", "unknown topic config"),
    ],
)
async def test_bad_validation_configs_are_refused_naming_the_key(validated, key, value, reason) -> None:
    from tabletopic.broker.topics import TopicError

    with pytest.raises(TopicError, match=reason) as raised:
        await validated.topics.create("bad", 1, {key: value})
    assert raised.value.error_code is ErrorCode.invalid_config
    assert key.rsplit(".typo", 1)[0] in str(raised.value)


@pytest.mark.parametrize("seed", range(5))
async def test_garbage_values_are_refused_never_crash(validated, lookup, seed) -> None:
    import random

    rng = random.Random(seed)
    await validated.topics.create(f"g{seed}", 1, VALIDATE)
    ids = [
        lookup.register(f"g{seed}-value", kind, text)
        for kind, text in (("AVRO", USER), ("JSON", JSON_USER), ("PROTOBUF", PROTO))
    ]
    values = [
        wire(rng.choice(ids), rng.randbytes(rng.randrange(0, 40)), rng.choice([b"", b"\x00", b"\x7f"]))
        for _ in range(50)
    ]
    result = await _produce(validated, f"g{seed}", make_batch(values))
    assert result.error_code in (ErrorCode.none, ErrorCode.invalid_record)
