from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.transforms import BucketTransform, IdentityTransform, MonthTransform
from pyiceberg.types import DecimalType, DoubleType, IntegerType, ListType, LongType, StringType, StructType

from tabletopic.table.convert.rows import HEADER_TYPE, METADATA_TYPE
from tabletopic.table.schema_evolution import (
    IncompatibleSchemaChange,
    arrow_to_iceberg_schema,
    build_partition_spec,
    create_table_for_topic,
    evolve_partition_spec,
    evolve_table_schema,
    plan_schema_update,
)
from tabletopic.table.table_config import parse_partition_by

KAFKA = [
    pa.field("_kafka_key", pa.string()),
    pa.field("_kafka_header", HEADER_TYPE),
    pa.field("_kafka_metadata", METADATA_TYPE),
]
V1 = pa.schema(
    [
        pa.field("id", pa.int32(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("ts", pa.timestamp("us", "UTC")),
        pa.field("price", pa.decimal128(9, 2)),
        pa.field("score", pa.float32()),
        pa.field("addr", pa.struct([pa.field("city", pa.string())])),
        *KAFKA,
    ]
)
V2 = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("ts", pa.timestamp("us", "UTC")),
        pa.field("price", pa.decimal128(12, 2)),
        pa.field("score", pa.float64()),
        pa.field("addr", pa.struct([pa.field("city", pa.string()), pa.field("zip", pa.string())])),
        pa.field("email", pa.string()),
        *KAFKA,
    ]
)
V3 = pa.schema(
    [
        pa.field("id", pa.int32()),  # narrower data than the column: fine
        pa.field("name", pa.string()),
        pa.field("tags", pa.list_(pa.struct([pa.field("k", pa.string())]))),
        *KAFKA,
    ]
)


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    cat = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/cat.db", warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("default")
    return cat


def test_table_creation_uses_partition_by_and_id_columns(catalog: SqlCatalog) -> None:
    spec = parse_partition_by("[bucket(name, 16), month(ts), _kafka_metadata.partition]")
    table = create_table_for_topic(catalog, ("default", "users"), V1, spec, id_columns=["id"])
    schema = table.schema()
    assert schema.find_field("id").required and not schema.find_field("name").required
    assert schema.identifier_field_names() == {"id"}
    transforms = [(f.name, f.transform) for f in table.spec().fields]
    assert transforms == [
        ("name_bucket", BucketTransform(16)),
        ("ts_month", MonthTransform()),
        ("_kafka_metadata.partition", IdentityTransform()),
    ]


def test_partition_by_on_missing_or_unfit_column_names_the_config_key() -> None:
    schema = arrow_to_iceberg_schema(V1)
    with pytest.raises(ValueError, match=r"partition\.by: column 'nope' does not exist"):
        build_partition_spec(schema, parse_partition_by("[nope]"))
    with pytest.raises(ValueError, match=r"partition\.by: month\(name\) cannot apply"):
        build_partition_spec(schema, parse_partition_by("[month(name)]"))
    with pytest.raises(ValueError, match=r"id\.columns: column 'ghost'"):
        arrow_to_iceberg_schema(V1, ["ghost"])
    with pytest.raises(ValueError, match="cannot identify rows"):
        arrow_to_iceberg_schema(V1, ["score"])


def test_schema_evolves_across_three_versions(catalog: SqlCatalog) -> None:
    table = create_table_for_topic(catalog, ("default", "users"), V1)
    changes = {str(c) for c in evolve_table_schema(table, V2)}
    assert changes == {
        "widen id to long",
        "widen price to decimal(12, 2)",
        "widen score to double",
        "add addr.zip string",
        "add email string",
    }
    schema = catalog.load_table(("default", "users")).schema()
    assert schema.find_field("id").field_type == LongType()
    assert schema.find_field("price").field_type == DecimalType(12, 2)
    assert schema.find_field("score").field_type == DoubleType()
    assert schema.find_field("addr.zip").field_type == StringType()
    assert [c.path for c in evolve_table_schema(table, V3)] == [("tags",)]
    final = catalog.load_table(("default", "users")).schema()
    tags = final.find_field("tags").field_type
    assert isinstance(tags, ListType) and isinstance(tags.element_type, StructType)
    assert plan_schema_update(final, V1) == []  # older data still fits
    assert plan_schema_update(final, V3) == []


def test_nested_struct_fields_inside_lists_are_added(catalog: SqlCatalog) -> None:
    table = create_table_for_topic(catalog, ("default", "t"), V3)
    v4 = pa.schema([*V3, pa.field("extra", pa.int32())]).set(
        2, pa.field("tags", pa.list_(pa.struct([pa.field("k", pa.string()), pa.field("v", pa.int32())])))
    )
    assert {str(c) for c in evolve_table_schema(table, v4)} == {"add tags.element.v int", "add extra int"}
    assert table.schema().find_field("tags.element.v").field_type == IntegerType()


def test_required_column_becomes_optional_when_data_may_be_null(catalog: SqlCatalog) -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    table = catalog.create_table(("default", "r"), Schema(NestedField(1, "id", LongType(), required=True)))
    changes = evolve_table_schema(table, pa.schema([pa.field("id", pa.int64(), nullable=True)]))
    assert [str(c) for c in changes] == ["make id optional"]
    assert not table.schema().find_field("id").required


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (pa.int64(), pa.string()),
        (pa.float64(), pa.int64()),
        (pa.decimal128(10, 2), pa.decimal128(12, 3)),
        (pa.string(), pa.struct([pa.field("a", pa.int32())])),
        (pa.list_(pa.int32()), pa.list_(pa.string())),
    ],
)
def test_incompatible_type_changes_raise_with_the_column_name(old: pa.DataType, new: pa.DataType) -> None:
    current = arrow_to_iceberg_schema(pa.schema([pa.field("col", old)]))
    with pytest.raises(IncompatibleSchemaChange, match="column col"):
        plan_schema_update(current, pa.schema([pa.field("col", new)]))


def test_partition_spec_evolves_when_partition_by_changes(catalog: SqlCatalog) -> None:
    table = create_table_for_topic(catalog, ("default", "p"), V1, parse_partition_by("[month(ts)]"))
    assert not evolve_partition_spec(table, parse_partition_by("[month(ts)]"))
    assert evolve_partition_spec(table, parse_partition_by("[day(ts), bucket(name, 8), later_column]"))
    spec = catalog.load_table(("default", "p")).spec()
    assert {(f.name, str(f.transform)) for f in spec.fields} == {
        ("ts_day", "day"),
        ("name_bucket", "bucket[8]"),
    }
    assert not evolve_partition_spec(table, parse_partition_by("[day(ts), bucket(name, 8), later_column]"))


def test_converted_rows_can_be_appended_after_evolution(catalog: SqlCatalog) -> None:
    table = create_table_for_topic(catalog, ("default", "w"), V1)
    evolve_table_schema(table, V2)
    rows = pa.Table.from_pylist(
        [
            {
                "id": 1,
                "name": "a",
                "email": "x",
                "_kafka_metadata": {"partition": 0, "offset": 5, "timestamp": 1},
            }
        ],
        schema=V2,
    )
    table.append(rows)
    assert table.scan().to_arrow().column("email").to_pylist() == ["x"]


def test_identifier_columns_stay_required_when_new_data_is_nullable(catalog: SqlCatalog) -> None:
    table = create_table_for_topic(catalog, ("default", "ids"), V1, id_columns=["id"])
    nullable_id = V1.set(0, pa.field("id", pa.int32(), nullable=True))
    assert plan_schema_update(table.schema(), nullable_id) == []


def test_table_created_before_its_columns_exist_gets_partitions_later(catalog: SqlCatalog) -> None:
    base = pa.schema(KAFKA)
    spec = parse_partition_by("[month(ts), _kafka_metadata.partition]")
    table = create_table_for_topic(catalog, ("default", "early"), base, spec, id_columns=["id"])
    assert [f.name for f in table.spec().fields] == ["_kafka_metadata.partition"]
    assert table.schema().identifier_field_ids == []
    evolve_table_schema(table, V1)
    assert evolve_partition_spec(table, spec)
    assert {f.name for f in table.spec().fields} == {"ts_month", "_kafka_metadata.partition"}


def test_debezium_key_id_columns_resolve_to_the_key_fields(catalog: SqlCatalog) -> None:
    schema = pa.schema(
        [pa.field("id", pa.int64()), pa.field("_kafka_key", pa.struct([pa.field("id", pa.int64())]))]
    )
    table = create_table_for_topic(catalog, ("default", "dbz"), schema, id_columns=["_from_debezium_key_"])
    assert table.schema().identifier_field_names() == {"id"}


def test_merge_keys_from_a_debezium_key_need_a_struct_key_column(catalog: SqlCatalog) -> None:
    from tabletopic.table.schema_evolution import IncompatibleTableSchema
    from tabletopic.table.table_config import TableTopicConfig
    from tabletopic.table.tables import merge_keys

    config = TableTopicConfig.from_topic_configs(
        {
            "automq.table.topic.enable": "true",
            "automq.table.topic.convert.key.type": "by_schema_id",
            "automq.table.topic.convert.value.type": "by_schema_id",
            "automq.table.topic.transform.value.type": "flatten_debezium",
            "automq.table.topic.id.columns": "[_from_debezium_key_]",
            "automq.table.topic.upsert.enable": "true",
        },
        "t",
    )
    table = catalog.create_table("default.plain_key", schema=arrow_to_iceberg_schema(pa.schema(KAFKA)))
    with pytest.raises(IncompatibleTableSchema, match="needs a record key"):
        merge_keys(config, table)
