"""The native JSON path (Arrow's JSON reader over the column as NDJSON) gives exactly the per-record
decoder's column, for random JSON Schemas and values — values that do not fit included: then the
chunk falls back and the per-record path isolates them."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabletopic.table.convert import native_json
from tabletopic.table.convert.jsonvalue import JsonDecoder

LEAVES = ["integer", "number", "boolean", "string"]


@st.composite
def json_types(draw: Any, depth: int = 0) -> dict[str, Any]:
    kind = draw(st.sampled_from(LEAVES + (["object", "array"] if depth < 2 else [])))
    if kind == "object":
        return object_type(draw, depth + 1)
    if kind == "array":
        return {"type": "array", "items": draw(json_types(depth + 1))}
    if draw(st.booleans()):
        return {"type": [kind, "null"]}
    return {"type": kind}


def object_type(draw: Any, depth: int) -> dict[str, Any]:
    names = [f"f{i}" for i in range(draw(st.integers(1, 4)))]
    return {
        "type": "object",
        "properties": {name: draw(json_types(depth)) for name in names},
        "required": draw(st.lists(st.sampled_from(names), unique=True)),
    }


def value_for(draw: Any, schema: dict[str, Any], wild: bool) -> Any:
    """A value fitting ``schema``, or now and then (``wild``) one that does not."""
    if wild and draw(st.integers(0, 30)) == 0:
        return draw(st.sampled_from([None, 1, 1.5, "x", True, [], {}, 2**70, "1", -0.0, 1e300]))
    kind = schema["type"]
    if isinstance(kind, list):
        if draw(st.booleans()):
            return None
        kind = kind[0]
    if kind == "object":
        out = {}
        for name, sub in schema["properties"].items():
            if name in schema["required"] or draw(st.booleans()):
                out[name] = value_for(draw, sub, wild)
        return out
    if kind == "array":
        return [value_for(draw, schema["items"], wild) for _ in range(draw(st.integers(0, 3)))]
    return draw(
        {
            "integer": st.integers(-(2**63), 2**63 - 1),
            "number": st.floats(allow_nan=False, allow_infinity=False),
            "boolean": st.booleans(),
            "string": st.text(max_size=8),
        }[kind]
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_native_and_per_record_decoding_give_identical_columns(data: st.DataObject) -> None:
    schema = object_type(data.draw, 1)
    wild = data.draw(st.booleans())
    distinct = [
        json.dumps(value_for(data.draw, schema, wild), indent=data.draw(st.sampled_from([None, 1]))).encode()
        for _ in range(data.draw(st.integers(1, 5)))
    ]
    payloads: list[bytes | None] = [b"\x00\x00\x00\x00\x01" + distinct[i % len(distinct)] for i in range(70)]
    payloads[5] = None
    decoder = JsonDecoder(json.dumps(schema))
    assert decoder._native is not None
    column = decoder._native.decode(payloads, 5)
    per_record, failures = decoder.decode_per_record(payloads, 5)
    if column is None:
        if not wild:
            binary = pa.array([p for p in payloads if p is not None], pa.binary())
            decoder._native.decode_binary(binary, 5)  # raises what made it fall back
        assert wild, "the native path fell back on values that fit the schema"
        return
    assert not failures, "the native path accepted values the per-record path refuses"
    assert column.type == per_record.type
    assert column.to_pylist() == per_record.to_pylist()


def test_a_chunk_with_a_bad_value_falls_back_and_fails_that_value_alone() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}
    decoder = JsonDecoder(json.dumps(schema))
    payloads: list[bytes | None] = [json.dumps({"n": i, "s": f"v{i}"}).encode() for i in range(100)]
    payloads[7] = b'{"n": 1,'
    payloads[8] = b'{"n": "not a number"}'
    array, failures = decoder.decode(payloads)
    assert sorted(failures) == [7, 8]
    assert array.to_pylist()[9] == {"n": 9, "s": "v9"}


def test_date_times_and_maps_keep_the_per_record_decoder() -> None:
    for sub in (
        {"type": "string", "format": "date-time"},
        {"type": "object", "additionalProperties": {"type": "integer"}},
    ):
        schema = {"type": "object", "properties": {"a": sub}}
        assert native_json.compile_native(*_types(schema)) is None


def _types(schema: dict[str, Any]) -> tuple[Any, bool]:
    decoder = JsonDecoder(json.dumps(schema), native=False)
    return decoder.arrow_type, decoder.is_record


def test_the_line_feed_check_sees_only_the_values_of_a_sliced_column() -> None:
    import pyarrow as pa

    from tabletopic.table.convert.native_json import _has_newline

    column = pa.array([b'{"a":\n1}', b'{"a":2}', b'{"a":3}', b'{"a":\n4}'], pa.binary())
    assert _has_newline(column)
    assert not _has_newline(column.slice(1, 2))  # the line feeds lie outside the slice
    assert _has_newline(column.slice(2, 2)) and _has_newline(column.slice(0, 1))
    assert not _has_newline(column.slice(0, 0))


def test_a_number_written_as_an_integer_beyond_int64_is_a_float_on_both_paths() -> None:
    schema = {"type": "object", "properties": {"f": {"type": "number"}}, "required": ["f"]}
    big = 1_180_591_620_717_411_303_424
    payloads: list[bytes | None] = [json.dumps({"f": big if i % 2 else i}).encode() for i in range(70)]
    decoder = JsonDecoder(json.dumps(schema))
    per_record, failures = decoder.decode_per_record(payloads)
    assert failures == {}
    assert per_record.field("f").to_pylist()[:2] == [0.0, float(big)]
    native = decoder.decode(payloads)[0]
    assert native.equals(per_record)
