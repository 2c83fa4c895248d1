"""The whole-column checks behind broker-side schema validation agree with the per-record readers:
the NumPy Avro walk refuses what fastavro cannot read to the end (bad UTF-8 included), the Arrow JSON check
never calls a group valid that jsonschema refuses, and record framing finds every key and value."""

from __future__ import annotations

import io
import json
import random

import fastavro
import jsonschema
import numpy as np
import pytest

from tabletopic.records import spans
from tabletopic.records.columns import DecodedRecords, append_records
from tabletopic.records.encoder import Record, build_batch
from tabletopic.records.errors import RecordBatchError
from tabletopic.records.header import HEADER_SIZE, validate_batches
from tabletopic.records.spans import record_spans
from tabletopic.schema_registry.lookup import RegisteredSchema
from tabletopic.table import payload_checks
from tabletopic.table.avro_columns import compile_validator
from tabletopic.table.convert.avro import parse_avro_schema
from tabletopic.table.json_columns import compile_all_valid
from tabletopic.table.payload_checks import Check, Payloads, build_check
from tests.support.schemas import avro_record

AVRO = avro_record(
    "R",
    {
        "a": "int",
        "s": "string",
        "u": ["null", "string", "long"],
        "arr": {"type": "array", "items": "double"},
        "m": {"type": "map", "values": "boolean"},
        "e": {"type": "enum", "name": "E", "symbols": ["X", "Y"]},
        "f": {"type": "fixed", "name": "F", "size": 3},
        "n": {"type": "record", "name": "N", "fields": [{"name": "b", "type": "bytes"}]},
        "nulls": {"type": "array", "items": "null"},
    },
)
JSON_USER = {
    "title": "User",
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": ["integer", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "home": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
    "required": ["name"],
}


def _column(datums: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    starts, ends, at = [], [], 0
    for datum in datums:
        starts.append(at)
        at += len(datum)
        ends.append(at)
    data = np.frombuffer(b"".join(datums) + bytes(16), dtype=np.uint8)
    return data, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)


def _mutate(rng: random.Random, datum: bytes) -> bytes:
    roll = rng.random()
    if roll < 0.2:
        return datum + bytes([rng.randrange(256)])
    if roll < 0.4 and datum:
        return datum[: -rng.randrange(1, min(4, len(datum)) + 1)]
    if roll < 0.55:
        return rng.randbytes(rng.randrange(0, 30))
    if roll < 0.7 and datum:
        i = rng.randrange(len(datum))
        return datum[:i] + bytes([rng.randrange(256)]) + datum[i + 1 :]
    return datum


def test_avro_column_walk_refuses_exactly_what_fastavro_cannot_read() -> None:
    rng = random.Random(7)
    parsed = fastavro.parse_schema(AVRO)

    def encode() -> bytes:
        out = io.BytesIO()
        record = {
            "a": rng.randrange(-(10**6), 10**6),
            "s": "x" * rng.randrange(0, 200),
            "u": rng.choice([None, "hi", 12345678901]),
            "arr": [rng.random() for _ in range(rng.randrange(0, 4))],
            "m": {str(i): True for i in range(rng.randrange(0, 3))},
            "e": rng.choice("XY"),
            "f": b"abc",
            "n": {"b": b"\x00" * rng.randrange(0, 4)},
            "nulls": [None] * rng.randrange(0, 3),
        }
        fastavro.schemaless_writer(out, parsed, record)
        return out.getvalue()

    def readable(datum: bytes) -> bool:
        stream = io.BytesIO(datum)
        try:
            fastavro.schemaless_reader(stream, parsed, None)
        except Exception:
            return False
        return stream.tell() == len(datum)

    datums = [_mutate(rng, encode()) for _ in range(1500)]
    validate = compile_validator(parse_avro_schema(json.dumps(AVRO)))
    assert validate is not None
    bad = validate(*_column(datums))
    expected = np.array([not readable(d) for d in datums])
    assert 300 < expected.sum() < 1400
    assert not (expected & ~bad).any()  # never accepts what fastavro cannot read
    # Stricter only where fastavro is lenient (a boolean byte other than 0/1); the validator then
    # lets the per-record decoder decide, so such a datum is still accepted.
    assert (bad & ~expected).sum() <= 3


def test_avro_recursive_schemas_are_left_to_the_per_record_decoder() -> None:
    tree = {
        "type": "record",
        "name": "Tree",
        "fields": [{"name": "kids", "type": {"type": "array", "items": "Tree"}}],
    }
    assert compile_validator(parse_avro_schema(json.dumps(tree))) is None


def _in_block(rng: random.Random, payloads: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``payloads`` laid out as in a records block: 11 to 40 bytes of framing before each (here
    random bytes, newlines, quotes and ``null`` included), 16 bytes of padding after the last."""
    noise = [b"\n", b"null", b'"', b"{", b"\x00", b"\xff", b"\x0a\x05"]
    out, starts, ends = bytearray(), [], []
    for payload in payloads:
        gap = b"".join(
            rng.choice(noise) if rng.random() < 0.3 else bytes([rng.randrange(256)]) for _ in range(40)
        )
        out += gap[: rng.randrange(11, 41)]
        starts.append(len(out))
        out += payload
        ends.append(len(out))
    data = np.frombuffer(bytes(out) + bytes(16), dtype=np.uint8)
    return data, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)


def test_json_group_check_never_accepts_what_jsonschema_refuses() -> None:
    rng = random.Random(3)
    compiled = compile_all_valid(JSON_USER)
    assert compiled is not None

    def all_valid(documents: list[bytes]) -> bool:
        return compiled(b"\n".join(documents), len(documents))

    validator = jsonschema.Draft7Validator(JSON_USER)
    good = [
        json.dumps({"name": f"n{i}", "age": i, "tags": ["a"] * (i % 3), "home": {"city": "x"}}).encode()
        for i in range(200)
    ]
    assert all_valid(good)
    variants = [
        b'{"name": "a"} trailing',
        b'{"name": 5}',
        b'{"age": 3}',
        b'{"name": "a", "home": {}}',
        b'{"name": null}',
        b'{"name": "a", "home": null}',
        b'{"name": "a", "tags": ["x", null]}',
        b'{"name": "a", "name": 5}',
        b'{"name": "a", "age": 1.5}',
        b'{"name": "a", "age": true}',
        b'{"name": "a", "home": {"city": "x", "city": null}}',
        b'{"name": "a", "t\xffgs": 1}',
        b'{"name": "a", "tags": [1]}',
        b"[1, 2]",
        b'{"name": "a"}{"name": "b"}',
        b'{"name":\n"a"}',
        b"",
    ]
    for variant in variants:
        assert not all_valid([good[0], variant]), variant
    for _ in range(500):
        group = [_mutate(rng, d) for d in rng.sample(good, 3)]

        def ok(document: bytes) -> bool:
            try:
                return bool(validator.is_valid(json.loads(document)))
            except ValueError:
                return False

        if all_valid(group):
            assert all(ok(d) for d in group), group


def test_json_group_check_keeps_a_closed_model_closed_and_an_open_one_open() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "inner": {
                "type": "object",
                "properties": {"b": {"type": "string"}},
                "additionalProperties": False,
            },
        },
    }
    all_valid = compile_all_valid(schema)
    assert all_valid is not None
    assert all_valid(b'{"a": 1, "other": [1, {"x": null}]}\n{"inner": {"b": "x"}}', 2)
    assert not all_valid(b'{"a": 1}\n{"inner": {"b": "x", "c": 1}}', 2)


@pytest.mark.parametrize(
    "schema", [{"type": "string"}, {"type": "object", "properties": {"a": {"enum": [1]}}}]
)
def test_json_schemas_arrow_does_not_enforce_are_not_compiled(schema: dict[str, object]) -> None:
    assert compile_all_valid(schema) is None


def test_record_spans_find_the_same_keys_and_values_as_the_record_decoder() -> None:
    rng = random.Random(1)
    records = [
        Record(
            rng.choice([None, b"", rng.randbytes(rng.randrange(1, 300))]),
            rng.choice([None, b"", rng.randbytes(rng.randrange(1, 20000))]),
            [("h", b"v")] * rng.randrange(0, 3),
        )
        for _ in range(300)
    ]
    batch = build_batch(records)
    (header,) = validate_batches(batch)
    spans = record_spans(batch[HEADER_SIZE:], header.record_count)
    decoded = DecodedRecords(0)
    append_records(decoded, batch[HEADER_SIZE:], header, 0, 0, header.record_count)
    for is_key, expected in ((True, decoded.keys), (False, decoded.values)):
        starts, lengths = spans.starts(is_key).tolist(), spans.lengths(is_key).tolist()
        found = [None if n < 0 else spans.raw[s : s + n] for s, n in zip(starts, lengths, strict=True)]
        assert found == expected
    with pytest.raises(RecordBatchError):
        record_spans(batch[HEADER_SIZE:-1], header.record_count)
    with pytest.raises(RecordBatchError):
        record_spans(batch[HEADER_SIZE:] + b"\x00", header.record_count)


def test_a_few_records_are_framed_one_by_one_with_the_same_answers() -> None:
    """Up to ``spans.FEW`` records are read without NumPy: same spans, and garbage refused alike."""
    rng = random.Random(2)
    for _ in range(300):
        count = rng.randrange(1, spans.FEW + 1)
        records = [
            Record(
                rng.choice([None, rng.randbytes(rng.randrange(0, 40))]), rng.randbytes(rng.randrange(0, 200))
            )
            for _ in range(count)
        ]
        block = build_batch(records)[HEADER_SIZE:]
        if rng.random() < 0.5:
            block = _mutate(rng, block)
        answers = []
        for read in (spans._few_spans, spans._many_spans):
            try:
                found = read(block, count)
            except RecordBatchError:
                answers.append(None)
                continue
            answers.append(
                [
                    c.tolist()
                    for c in (found.key_start, found.key_length, found.value_start, found.value_length)
                ]
            )
        assert answers[0] == answers[1], block


PROTO = """syntax = "proto3";
package t;
message Outer {
  message Inner { string city = 1; int32 zip = 2; }
  string name = 1;
  Inner inner = 2;
  repeated Inner items = 3;
  map<string, Inner> by_name = 4;
  int64 n = 5;
}
"""


def _protobuf_group() -> tuple[Check, type, list[bytes]]:
    from google.protobuf import message_factory

    from tabletopic.schema_registry.formats.protobuf import message_descriptor_for

    schema = RegisteredSchema(1, "PROTOBUF", PROTO)
    cls = message_factory.GetMessageClass(message_descriptor_for(schema, [0]))
    good = []
    for i in range(50):
        message = cls(name=f"n{i}" * (i % 4), n=i * 1_000_003 - 7)
        if i % 2:
            message.inner.city = "x" * i
        message.items.add(city="c", zip=i)
        message.by_name[f"k{i}"].zip = i
        good.append(message.SerializeToString())
    return build_check(schema, (0,)), cls, good


@pytest.fixture(params=["one by one", "wrapper"])
def protobuf_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways a Protobuf group is checked: small groups one message at a time, bigger ones as
    one wrapper message (forced here for any size)."""
    if request.param == "wrapper":
        monkeypatch.setattr(payload_checks, "_FEW", 0)


@pytest.mark.usefixtures("protobuf_path")
def test_protobuf_group_check_refuses_exactly_what_a_per_record_parse_refuses() -> None:
    from google.protobuf.unknown_fields import UnknownFieldSet

    rng = random.Random(5)
    check, cls, good = _protobuf_group()

    def refused(payload: bytes) -> bool:
        message = cls()
        try:
            message.ParseFromString(payload)
        except Exception:
            return True
        parts = [message, *message.items, *message.by_name.values()]
        parts += [message.inner] if message.HasField("inner") else []
        return any(len(UnknownFieldSet(part)) for part in parts)  # unknown fields at any depth
        return False

    data, starts, ends = _in_block(rng, good)
    assert check(Payloads(data.tobytes(), data, starts, ends)) == {}
    for _ in range(300):
        size = rng.choice([4, 20, 40])
        group = [_mutate(rng, d) if rng.random() < 0.05 else d for d in rng.choices(good, k=size)]
        data, starts, ends = _in_block(rng, group)
        failures = check(Payloads(data.tobytes(), data, starts, ends))
        assert set(failures) == {i for i, d in enumerate(group) if refused(d)}, group


@pytest.mark.usefixtures("protobuf_path")
def test_protobuf_unknown_fields_nested_in_a_message_are_refused() -> None:
    rng = random.Random(6)
    check, cls, good = _protobuf_group()
    inner = cls.Inner(city="x").SerializeToString() + b"\xb8\x06\x01"  # field 103 = 1: unknown
    nested = b"\x12" + bytes([len(inner)]) + inner  # Outer.inner
    in_list = b"\x1a" + bytes([len(inner)]) + inner  # Outer.items[0]
    data, starts, ends = _in_block(rng, [good[0], nested, good[1], in_list])
    failures = check(Payloads(data.tobytes(), data, starts, ends))
    assert set(failures) == {1, 3}
    assert "in inner" in failures[1] and "in items[0]" in failures[3]
