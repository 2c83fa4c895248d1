"""The native Avro path (DataFusion over the datums as one container block) gives exactly the
per-record decoder's column, for random schemas and records; a bad datum never slips through."""

from __future__ import annotations

import decimal
import io
import json
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabletopic.table.convert import native_avro
from tabletopic.table.convert.avro import AvroDecoder
from tests.support.schemas import avro_record

PRIMITIVES = ["int", "long", "double", "string", "boolean", "bytes"]
# Union branches the per-record decoder tells apart by the Python value (one per kind of value).
UNION_KINDS = ["long", "double", "string", "boolean"]


@st.composite
def avro_types(draw: Any, depth: int = 0, names: list[int] | None = None) -> Any:
    names = names if names is not None else [0]
    choices = ["primitive", "decimal", "timestamp", "date", "enum", "fixed", "nullable"]
    if depth < 2:
        choices += ["record", "map", "array", "union"]
    kind = draw(st.sampled_from(choices))
    names[0] += 1
    name = f"N{names[0]}"
    if kind == "primitive":
        return draw(st.sampled_from(PRIMITIVES))
    if kind == "decimal":
        precision = draw(st.integers(1, 20))
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": precision,
            "scale": draw(st.integers(0, precision)),
        }
    if kind == "timestamp":
        return {
            "type": "long",
            "logicalType": draw(st.sampled_from(["timestamp-millis", "timestamp-micros"])),
        }
    if kind == "date":
        return {"type": "int", "logicalType": "date"}
    if kind == "enum":
        return {"type": "enum", "name": name, "symbols": ["A", "B", "C"]}
    if kind == "fixed":
        return {"type": "fixed", "name": name, "size": draw(st.integers(1, 6))}
    if kind == "nullable":
        inner = draw(avro_types(depth + 1, names))
        if isinstance(inner, list):  # Avro forbids a union directly inside a union
            return inner if "null" in inner else ["null", *inner]
        return ["null", inner]
    if kind == "record":
        return record_type(draw, depth + 1, names, name)
    if kind == "map":
        return {"type": "map", "values": draw(avro_types(depth + 1, names))}
    if kind == "array":
        return {"type": "array", "items": draw(avro_types(depth + 1, names))}
    branches = draw(st.lists(st.sampled_from(UNION_KINDS), min_size=2, max_size=3, unique=True))
    return (["null"] if draw(st.booleans()) else []) + branches


def record_type(draw: Any, depth: int, names: list[int], name: str) -> dict[str, Any]:
    count = draw(st.integers(1, 5))
    return {
        "type": "record",
        "name": name,
        "fields": [{"name": f"f{i}", "type": draw(avro_types(depth, names))} for i in range(count)],
    }


def values_for(schema: Any) -> st.SearchStrategy[Any]:
    if isinstance(schema, list):
        return st.one_of(*(values_for(b) for b in schema))
    if isinstance(schema, str):
        return {
            "null": st.none(),
            "int": st.integers(-(2**31), 2**31 - 1),
            "long": st.integers(-(2**63), 2**63 - 1),
            "double": st.floats(allow_nan=False, width=64),
            "string": st.text(max_size=8),
            "boolean": st.booleans(),
            "bytes": st.binary(max_size=8),
        }[schema]
    kind = schema["type"]
    logical = schema.get("logicalType")
    if logical == "decimal":
        p, s = schema["precision"], schema["scale"]
        return st.integers(-(10**p) + 1, 10**p - 1).map(lambda n: decimal.Decimal(n).scaleb(-s))
    if logical in ("timestamp-millis", "timestamp-micros"):
        return st.integers(0, 4_000_000_000_000)
    if logical == "date":
        return st.integers(0, 40_000)
    if kind == "enum":
        return st.sampled_from(schema["symbols"])
    if kind == "fixed":
        return st.binary(min_size=schema["size"], max_size=schema["size"])
    if kind == "record":
        return st.fixed_dictionaries({f["name"]: values_for(f["type"]) for f in schema["fields"]})
    if kind == "map":
        return st.dictionaries(st.text(max_size=4), values_for(schema["values"]), max_size=3)
    if kind == "array":
        return st.lists(values_for(schema["items"]), max_size=3)
    return values_for(kind)


def encode(schema: dict[str, Any], values: list[Any]) -> list[bytes]:
    parsed = fastavro.parse_schema(schema)
    out = []
    for value in values:
        buffer = io.BytesIO()
        buffer.write(b"\x00\x00\x00\x00\x07")  # the Confluent prefix the decoders skip
        fastavro.schemaless_writer(buffer, parsed, value)
        out.append(buffer.getvalue())
    return out


@st.composite
def schemas_and_datums(draw: Any) -> tuple[dict[str, Any], list[bytes | None]]:
    schema = record_type(draw, 0, [0], "Root")
    values = draw(st.lists(values_for(schema), min_size=1, max_size=12))
    datums: list[bytes | None] = list(encode(schema, values))
    if draw(st.booleans()):
        datums.insert(draw(st.integers(0, len(datums))), None)  # a tombstone in the column
    return schema, datums


@pytest.fixture(autouse=True)
def native_for_every_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_avro, "MIN_NATIVE_DATUMS", 1)


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(schemas_and_datums())
def test_native_and_per_record_decoding_give_identical_columns(
    case: tuple[dict[str, Any], list[bytes | None]],
) -> None:
    schema, datums = case
    text = json.dumps(schema)
    per_record, failures = AvroDecoder(text, native=False).decode(datums, 5)
    assert failures == {}
    native = AvroDecoder(text, native=True)
    assert native._native is not None
    column = native._native.decode(datums, 5)
    assert column is not None, "the native path fell back on valid datums"
    assert column.type == per_record.type
    assert column.to_pylist() == per_record.to_pylist()
    assert column.equals(per_record)


SIMPLE = avro_record("S", {"id": "long", "name": "string", "t": "int"})


@pytest.mark.parametrize("damage", ["truncated", "extended"])
def test_a_datum_of_the_wrong_length_falls_back_per_record_and_fails_only_itself(damage: str) -> None:
    datums = encode(SIMPLE, [{"id": i, "name": f"n{i}", "t": i} for i in range(50)])
    datums[17] = datums[17][:-1] if damage == "truncated" else datums[17] + b"\x02"
    decoder = AvroDecoder(json.dumps(SIMPLE), native=True)
    assert decoder._native is not None and decoder._native.decode(datums, 5) is None
    column, failures = decoder.decode(datums, 5)
    assert list(failures) == [17]
    assert column.to_pylist()[16] == {"id": 16, "name": "n16", "t": 16} and column.to_pylist()[17] is None


def test_warm_runs_the_native_reader_once_so_a_worker_has_set_it_up() -> None:
    native_avro._context.cache_clear()
    native_avro.warm()
    assert native_avro._context.cache_info().currsize == 1  # the DataFusion context now exists


def test_the_warm_up_decodes_its_whole_column_natively_and_every_task_module_imports() -> None:
    from tabletopic.table import ingest_task

    # A warm-up that fell back to the per-record decoder would warm nothing (and take seconds).
    assert native_avro.warm(rows=4096) == 4096
    assert native_avro.warm() >= native_avro.MIN_NATIVE_DATUMS
    ingest_task.preload()
