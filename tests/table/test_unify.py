from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabletopic.table.convert.unify import (
    SchemaConflict,
    conform_array,
    conform_batch,
    unify_schemas,
    unify_types,
)


def test_union_of_fields_keeps_first_seen_order_and_makes_everything_nullable() -> None:
    a = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("name", pa.string())])
    b = pa.schema([pa.field("email", pa.string()), pa.field("id", pa.int64())])
    merged = unify_schemas([a, b])
    assert merged.names == ["id", "name", "email"]
    assert merged.field("id").type == pa.int64() and merged.field("id").nullable


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (pa.int32(), pa.int64(), pa.int64()),
        (pa.int16(), pa.int32(), pa.int32()),
        (pa.float32(), pa.float64(), pa.float64()),
        (pa.decimal128(9, 2), pa.decimal128(12, 2), pa.decimal128(12, 2)),
        (pa.null(), pa.string(), pa.string()),
        (pa.list_(pa.int32()), pa.list_(pa.int64()), pa.list_(pa.int64())),
        (
            pa.map_(pa.string(), pa.float32()),
            pa.map_(pa.string(), pa.float64()),
            pa.map_(pa.string(), pa.float64()),
        ),
        (
            pa.struct([pa.field("a", pa.int32())]),
            pa.struct([pa.field("b", pa.string()), pa.field("a", pa.int64())]),
            pa.struct([pa.field("a", pa.int64()), pa.field("b", pa.string())]),
        ),
    ],
)
def test_types_widen_only_as_iceberg_allows(a: pa.DataType, b: pa.DataType, expected: pa.DataType) -> None:
    assert unify_types(a, b) == expected
    assert unify_types(b, a).equals(expected) or pa.types.is_struct(expected)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (pa.int64(), pa.string()),
        (pa.int64(), pa.float64()),
        (pa.decimal128(9, 2), pa.decimal128(9, 3)),
        (pa.string(), pa.binary()),
        (pa.struct([pa.field("x", pa.int32())]), pa.int32()),
    ],
)
def test_conflicting_types_raise_naming_the_column(a: pa.DataType, b: pa.DataType) -> None:
    with pytest.raises(SchemaConflict, match="column v"):
        unify_schemas([pa.schema([pa.field("v", a)]), pa.schema([pa.field("v", b)])])


def test_conform_fills_missing_nested_fields_and_keeps_nulls() -> None:
    target = pa.struct([pa.field("a", pa.int64()), pa.field("b", pa.string())])
    source = pa.array([{"a": 1}, None], pa.struct([pa.field("a", pa.int32())]))
    assert conform_array(source, target).to_pylist() == [{"a": 1, "b": None}, None]
    lists = pa.array([[{"a": 1}], None, []], pa.list_(pa.struct([pa.field("a", pa.int32())])))
    out = conform_array(lists, pa.list_(target))
    assert out.to_pylist() == [[{"a": 1, "b": None}], None, []]
    maps = pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int32()))
    assert conform_array(maps, pa.map_(pa.string(), pa.int64())).to_pylist() == [[("k", 1)], None]


def test_conform_batch_orders_columns_and_adds_missing_ones() -> None:
    batch = pa.RecordBatch.from_pydict({"b": ["x"], "a": pa.array([1], pa.int32())})
    schema = pa.schema([pa.field("a", pa.int64()), pa.field("b", pa.string()), pa.field("c", pa.float64())])
    out = conform_batch(batch, schema)
    assert out.schema == schema and out.to_pylist() == [{"a": 1, "b": "x", "c": None}]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (pa.string(), pa.large_string(), pa.large_string()),
        (pa.string_view(), pa.string(), pa.large_string()),
        (pa.binary(), pa.large_binary(), pa.large_binary()),
        (pa.binary_view(), pa.large_binary(), pa.large_binary()),
        (pa.list_(pa.string()), pa.large_list(pa.large_string()), pa.large_list(pa.large_string())),
        (
            pa.map_(pa.string(), pa.binary()),
            pa.map_(pa.large_string(), pa.large_binary()),
            pa.map_(pa.large_string(), pa.large_binary()),
        ),
        (
            pa.struct([pa.field("n", pa.string(), nullable=False)]),
            pa.struct([pa.field("n", pa.large_string())]),
            pa.struct([pa.field("n", pa.large_string())]),
        ),
    ],
)
def test_arrow_spellings_of_one_iceberg_type_unify_to_the_large_one(
    a: pa.DataType, b: pa.DataType, expected: pa.DataType
) -> None:
    # The decoders give string/binary, pyiceberg's view of a table large_string/large_binary: rows
    # of one upsert cycle (an update and a tombstone's delete) used to conflict over exactly this.
    assert unify_types(a, b) == expected
    assert unify_types(b, a) == expected


# Logical types (what Iceberg sees) and, for each, the Arrow spellings one batch may bring.
_SPELLINGS: dict[str, list[Any]] = {
    "string": [pa.string(), pa.large_string(), pa.string_view()],
    "binary": [pa.binary(), pa.large_binary(), pa.binary_view()],
    "long": [pa.int64()],
    "list<string>": [pa.list_(pa.string()), pa.large_list(pa.large_string()), pa.list_(pa.large_string())],
    "map<string,binary>": [pa.map_(pa.string(), pa.binary()), pa.map_(pa.large_string(), pa.large_binary())],
    "struct<s:string>": [
        pa.struct([pa.field("s", pa.string())]),
        pa.struct([pa.field("s", pa.large_string(), nullable=False)]),
    ],
}
_VALUES: dict[str, Any] = {
    "string": st.text(max_size=5),
    "binary": st.binary(max_size=5),
    "long": st.integers(-(2**63), 2**63 - 1),
    "list<string>": st.lists(st.text(max_size=3), max_size=3),
    "map<string,binary>": st.lists(st.tuples(st.text(max_size=3), st.binary(max_size=3)), max_size=3),
    "struct<s:string>": st.builds(lambda s: {"s": s}, st.text(max_size=3)),
}


@st.composite
def _parts(draw: st.DrawFn) -> list[tuple[pa.Schema, list[dict[str, Any]]]]:
    """Two to four parts of one batch: the same logical columns (some missing from some parts),
    each part spelling every column as it likes, with and without nulls and non-null flags."""
    columns = draw(st.lists(st.sampled_from(sorted(_SPELLINGS)), min_size=1, max_size=4, unique=True))
    parts = []
    for _ in range(draw(st.integers(2, 4))):
        present = [c for c in columns if draw(st.booleans())] or columns[:1]
        fields = [
            pa.field(c, draw(st.sampled_from(_SPELLINGS[c])), nullable=draw(st.booleans())) for c in present
        ]
        rows = []
        for _ in range(draw(st.integers(0, 3))):
            rows.append(
                {
                    f.name: draw(_VALUES[f.name] if not f.nullable else st.none() | _VALUES[f.name])
                    for f in fields
                }
            )
        parts.append((pa.schema(fields), rows))
    return parts


@settings(max_examples=100, deadline=None)
@given(_parts())
def test_parts_spelling_one_iceberg_type_differently_always_unify_and_keep_their_values(
    parts: list[tuple[pa.Schema, list[dict[str, Any]]]],
) -> None:
    batches = [pa.RecordBatch.from_pylist(rows, schema=schema) for schema, rows in parts]
    schema = unify_schemas([b.schema for b in batches])
    conformed = [conform_batch(b, schema) for b in batches]
    whole = pa.Table.from_batches(conformed, schema=schema)  # one table: every part fits one schema
    expected = [{name: row.get(name) for name in schema.names} for _, rows in parts for row in rows]
    assert whole.to_pylist() == expected
