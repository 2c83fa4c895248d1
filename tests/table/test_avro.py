from __future__ import annotations

import datetime
import json
import random

import pyarrow as pa
import pytest

from tabletopic.table.convert.avro import AvroDecoder, avro_to_arrow_type, parse_avro_schema
from tabletopic.table.convert.avro_columnar import compile_decoder
from tests.support.avro_samples import EVERY_TYPE, INNER, every_type_value
from tests.support.schemas import avro_bytes

UTC = datetime.UTC


def test_columnar_decoder_applies_to_records_of_primitives_logical_types_and_nullable_records() -> None:
    assert compile_decoder(parse_avro_schema(json.dumps(EVERY_TYPE))) is not None


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
    payloads = [avro_bytes(EVERY_TYPE, every_type_value(rnd)) for _ in range(300)]
    payloads[5] = None
    text = json.dumps(EVERY_TYPE)
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
    good = avro_bytes(EVERY_TYPE, every_type_value(random.Random(1)))
    garbage = _garbage(good)
    decoder = AvroDecoder(json.dumps(EVERY_TYPE), columnar=columnar)
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
