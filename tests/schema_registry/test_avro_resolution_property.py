"""The checker against a real Avro implementation: whenever it says a reader can read a writer,
fastavro must decode data written with the writer using the reader schema (random schema pairs)."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabletopic.schema_registry.formats.avro import FORMAT

PRIMITIVES = ["int", "long", "float", "double", "string", "bytes", "boolean"]
SAMPLE = {
    "int": 7,
    "long": 2**40,
    "float": 1.5,
    "double": 2.25,
    "string": "s",
    "bytes": b"b",
    "boolean": True,
}
DEFAULTS = {"int": 0, "long": 0, "float": 0.0, "double": 0.0, "string": "", "bytes": "", "boolean": False}

field_types = st.one_of(
    st.sampled_from(PRIMITIVES),
    st.tuples(st.just("optional"), st.sampled_from(PRIMITIVES)),
    st.tuples(st.just("array"), st.sampled_from(PRIMITIVES)),
    st.tuples(st.just("enum"), st.lists(st.sampled_from("ABCD"), min_size=1, max_size=4, unique=True)),
)


def avro_type(spec: Any) -> Any:
    if isinstance(spec, str):
        return spec
    kind, arg = spec
    if kind == "optional":
        return ["null", arg]
    if kind == "array":
        return {"type": "array", "items": arg}
    return {"type": "enum", "name": "E", "symbols": sorted(arg)}


def value_for(spec: Any) -> Any:
    if isinstance(spec, str):
        return SAMPLE[spec]
    kind, arg = spec
    if kind == "optional":
        return SAMPLE[arg]
    if kind == "array":
        return [SAMPLE[arg]]
    return sorted(arg)[0]


def default_for(spec: Any) -> Any:
    if isinstance(spec, str):
        return DEFAULTS[spec]
    kind, arg = spec
    if kind == "optional":
        return None
    if kind == "array":
        return []
    return sorted(arg)[0]


# A record: field name -> (type spec, has default).
records = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d", "e"]), st.tuples(field_types, st.booleans()), min_size=1, max_size=4
)


def schema_of(fields: dict[str, tuple[Any, bool]]) -> dict[str, Any]:
    body = []
    enum_used = False
    for name, (spec, has_default) in sorted(fields.items()):
        if not isinstance(spec, str) and spec[0] == "enum":
            if enum_used:  # one named enum per record keeps the name table simple
                spec = "string"
            enum_used = True
        field: dict[str, Any] = {"name": name, "type": avro_type(spec)}
        if has_default:
            field["default"] = default_for(spec)
        body.append(field)
    return {"type": "record", "name": "R", "fields": body}


def datum_for(schema: dict[str, Any]) -> dict[str, Any]:
    datum = {}
    for field in schema["fields"]:
        t = field["type"]
        if isinstance(t, str):
            datum[field["name"]] = SAMPLE[t]
        elif isinstance(t, list):
            datum[field["name"]] = SAMPLE[t[1]]
        elif t["type"] == "array":
            datum[field["name"]] = [SAMPLE[t["items"]]]
        else:
            datum[field["name"]] = t["symbols"][0]
    return datum


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writer_fields=records, reader_fields=records)
def test_compatible_verdicts_decode_with_fastavro(writer_fields: Any, reader_fields: Any) -> None:
    writer, reader = schema_of(writer_fields), schema_of(reader_fields)
    found = FORMAT.reader_can_read(FORMAT.parse(json.dumps(reader), {}), FORMAT.parse(json.dumps(writer), {}))
    if found:
        return
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(writer), datum_for(writer))
    buffer.seek(0)
    decoded = fastavro.schemaless_reader(buffer, fastavro.parse_schema(writer), fastavro.parse_schema(reader))
    assert isinstance(decoded, dict)
    assert set(decoded) == {f["name"] for f in reader["fields"]}


@settings(max_examples=50, deadline=None)
@given(fields=records)
def test_every_schema_reads_itself_and_survives_normalization(fields: Any) -> None:
    parsed = FORMAT.parse(json.dumps(schema_of(fields)), {})
    assert FORMAT.reader_can_read(parsed, parsed) == []
    normalized = FORMAT.parse(parsed.normalized(), {})
    assert normalized.normalized() == parsed.normalized()
    assert FORMAT.reader_can_read(normalized, parsed) == []
