from __future__ import annotations

import datetime
import decimal
import json
import random
import uuid

import pyarrow as pa
import pytest

from tabletopic.table.convert.avro import AvroDecoder, avro_to_arrow_type, parse_avro_schema
from tabletopic.table.convert.avro_columnar import compile_decoder
from tests.support.schemas import avro_bytes, avro_record

INNER = avro_record("Inner", {"x": "int", "s": "string"})
SCHEMA = {
    "type": "record",
    "name": "R",
    "namespace": "ns",
    "fields": [
        {"name": "l", "type": "long"},
        {"name": "i", "type": "int"},
        {"name": "b", "type": "boolean"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "raw", "type": "bytes"},
        {"name": "n", "type": "null"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
        {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 3}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
        {
            "name": "fdec",
            "type": {
                "type": "fixed",
                "name": "FD",
                "size": 8,
                "logicalType": "decimal",
                "precision": 18,
                "scale": 2,
            },
        },
        {"name": "date", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tsu", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "opt", "type": ["null", "string"]},
        {"name": "opt2", "type": ["int", "null"]},
        {"name": "inner", "type": INNER},
        {"name": "maybe", "type": ["null", "Inner"]},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "nums", "type": ["null", {"type": "array", "items": "long"}]},
        {"name": "days", "type": {"type": "array", "items": {"type": "int", "logicalType": "date"}}},
        {"name": "attrs", "type": {"type": "map", "values": "double"}},
        {
            "name": "codes",
            "type": {"type": "map", "values": {"type": "enum", "name": "Code", "symbols": ["X", "Y"]}},
        },
    ],
}
UTC = datetime.UTC


def make(rnd: random.Random) -> dict:
    big = rnd.choice([0, 1, -1, 63, 64, -65, 8191, 8192, 2**31 - 1, -(2**31), 2**62, -(2**63)])
    return {
        "l": big,
        "i": rnd.randint(-(2**31), 2**31 - 1),
        "b": rnd.random() < 0.5,
        "f": 1.5,
        "d": rnd.random(),
        "s": rnd.choice(["", "é", "x" * 200, "日本"]),
        "raw": rnd.randbytes(rnd.randint(0, 300)),
        "n": None,
        "e": rnd.choice("ABC"),
        "fx": b"abc",
        "dec": decimal.Decimal(rnd.randint(-(10**11), 10**11)).scaleb(-3),
        "fdec": decimal.Decimal(rnd.randint(-(10**17), 10**17)).scaleb(-2),
        "date": datetime.date(2024, 2, 29),
        "tm": datetime.time(23, 59, 59, 999000),
        "tu": datetime.time(1, 2, 3, 456789),
        "ts": datetime.datetime(2024, 1, 1, 12, 30, 1, 123000, tzinfo=UTC),
        "tsu": rnd.choice([None, datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)]),
        "lts": datetime.datetime(2000, 1, 1, 0, 0, 0, 1000),
        "u": str(uuid.UUID(int=rnd.getrandbits(128))),
        "opt": rnd.choice([None, "v"]),
        "opt2": rnd.choice([None, 7]),
        "inner": {"x": 1, "s": "in"},
        "maybe": rnd.choice([None, {"x": -2, "s": ""}]),
        "tags": rnd.choice([[], ["a"], ["é", "x" * 100, ""]]),
        "nums": rnd.choice([None, [], [1, -(2**40), 2**62]]),
        "days": [datetime.date(2024, 1, 1), datetime.date(1970, 1, 1)][: rnd.randint(0, 2)],
        "attrs": rnd.choice([{}, {"k": 1.5, "é": -0.0}]),
        "codes": {"c": rnd.choice("XY")},
    }


def test_columnar_decoder_applies_to_records_of_primitives_logical_types_and_nullable_records() -> None:
    assert compile_decoder(parse_avro_schema(json.dumps(SCHEMA))) is not None


def _one_field(avro_type: object) -> dict:
    return {"type": "record", "name": "One", "fields": [{"name": "v", "type": avro_type}]}


@pytest.mark.parametrize(
    "schema",
    [
        _one_field({"type": "array", "items": INNER}),
        _one_field({"type": "map", "values": {"type": "array", "items": "int"}}),
        _one_field({"type": "array", "items": ["null", "int"]}),
        _one_field(["int", "string"]),
        "string",
    ],
)
def test_schemas_with_nested_collections_or_general_unions_fall_back_to_fastavro(schema: object) -> None:
    assert compile_decoder(parse_avro_schema(json.dumps(schema))) is None


def test_columnar_and_fastavro_paths_give_identical_arrays() -> None:
    rnd = random.Random(7)
    payloads = [avro_bytes(SCHEMA, make(rnd)) for _ in range(300)]
    payloads[5] = None
    text = json.dumps(SCHEMA)
    fast, fast_failures = AvroDecoder(text).decode(payloads)
    slow, slow_failures = AvroDecoder(text, columnar=False).decode(payloads)
    assert fast_failures == slow_failures == {}
    assert fast.type == slow.type == avro_to_arrow_type(parse_avro_schema(text))
    assert fast.equals(slow)
    row = fast.to_pylist()[0]
    assert row["ts"] == datetime.datetime(2024, 1, 1, 12, 30, 1, 123000, tzinfo=UTC)
    assert row["tm"] == datetime.time(23, 59, 59, 999000)
    assert fast.type.field("tm").type == pa.time64("us")
    assert fast.type.field("fdec").type == pa.decimal128(18, 2)
    assert fast.type.field("fx").type == pa.binary(3)


def _garbage(good: bytes) -> dict[str, bytes]:
    return {
        "empty": b"",
        "truncated": good[: len(good) // 2],
        "trailing": good + b"\x00",
        "huge length": b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\xfe\xff\xff\xff\x0f",
        "endless varint": b"\xff" * 20,
    }


@pytest.mark.parametrize("columnar", [True, False])
def test_garbage_payloads_fail_individually_on_both_paths(columnar: bool) -> None:
    good = avro_bytes(SCHEMA, make(random.Random(1)))
    garbage = _garbage(good)
    decoder = AvroDecoder(json.dumps(SCHEMA), columnar=columnar)
    array, failures = decoder.decode([good, *garbage.values(), good])
    assert sorted(failures) == list(range(1, len(garbage) + 1))
    assert all(r.startswith("invalid Avro") for r in failures.values())
    assert array.is_valid().to_pylist() == [True] + [False] * len(garbage) + [True]


def test_bad_union_index_bad_enum_index_and_invalid_utf8_are_row_failures() -> None:
    schema = {
        "type": "record",
        "name": "S",
        "fields": [
            {"name": "o", "type": ["null", "int"]},
            {"name": "e", "type": {"type": "enum", "name": "E2", "symbols": ["A"]}},
            {"name": "s", "type": "string"},
        ],
    }
    decoder = AvroDecoder(json.dumps(schema))
    good = b"\x02\x02\x00\x02a"  # o=1, e=A, s="a"
    bad_union = b"\x04\x02\x00\x02a"
    bad_enum = b"\x00\x02\x02a"
    bad_utf8 = b"\x00\x00\x02\xff"
    negative_enum = b"\x00\x01\x02a"
    array, failures = decoder.decode([good, bad_union, bad_enum, bad_utf8, negative_enum])
    assert sorted(failures) == [1, 2, 3, 4]
    assert "UTF-8" in failures[3]
    assert array.to_pylist()[0] == {"o": 1, "e": "A", "s": "a"}
    assert array.to_pylist()[3] is None


def test_skip_reads_past_the_wire_format_prefix() -> None:
    good = avro_bytes(INNER, {"x": 3, "s": "q"})
    array, failures = AvroDecoder(json.dumps(INNER)).decode([b"\x00\x00\x00\x00\x01" + good], 5)
    assert failures == {} and array.to_pylist() == [{"x": 3, "s": "q"}]


def test_general_unions_become_structs_of_members() -> None:
    schema = {
        "type": "record",
        "name": "U",
        "fields": [{"name": "u", "type": ["null", "int", "string", INNER]}],
    }
    decoder = AvroDecoder(json.dumps(schema))
    values = [{"u": 5}, {"u": "s"}, {"u": None}, {"u": {"x": 1, "s": "i"}}]
    array, failures = decoder.decode([avro_bytes(schema, v) for v in values])
    assert failures == {}
    assert [r["u"] for r in array.to_pylist()] == [
        {"member0": 5, "member1": None, "member2": None},
        {"member0": None, "member1": "s", "member2": None},
        None,
        {"member0": None, "member1": None, "member2": {"x": 1, "s": "i"}},
    ]


def test_named_type_references_resolve_across_registry_references() -> None:
    ref = json.dumps(
        {"type": "record", "name": "Addr", "namespace": "x", "fields": [{"name": "c", "type": "string"}]}
    )
    main = json.dumps(
        {"type": "record", "name": "P", "namespace": "x", "fields": [{"name": "a", "type": "x.Addr"}]}
    )
    decoder = AvroDecoder(main, (("x.Addr", ref),))
    assert decoder.arrow_type == pa.struct([pa.field("a", pa.struct([pa.field("c", pa.string())]))])
