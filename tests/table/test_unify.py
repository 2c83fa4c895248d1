from __future__ import annotations

import pyarrow as pa
import pytest

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
