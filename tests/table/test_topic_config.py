from __future__ import annotations

import pytest

from tabletopic.table.table_config import (
    ConvertType,
    ErrorsTolerance,
    PartitionField,
    PartitionTransform,
    TableTopicConfig,
    TransformType,
    parse_partition_by,
    sanitize_table_name,
    validate_table_topic_configs,
)

P = "automq.table.topic."


def parse(topic: str | None = "orders", **kw: str) -> TableTopicConfig:
    return TableTopicConfig.from_topic_configs({P + k: v for k, v in kw.items()}, topic)


def test_defaults_match_automq() -> None:
    c = parse()
    assert c.enabled is False
    assert c.commit_interval_ms == 60_000
    assert c.namespace == "default"
    assert c.table_name == "orders"
    assert c.value_converter.type is ConvertType.RAW
    assert c.key_converter.type is ConvertType.STRING
    assert c.value_transform is TransformType.NONE
    assert c.id_columns == () and c.partition_by == ()
    assert c.upsert_enable is False and c.cdc_field is None
    assert c.errors_tolerance is ErrorsTolerance.INVALID_DATA
    assert (c.expire_snapshot_enabled, c.expire_snapshot_older_than_hours, c.expire_snapshot_retain_last) == (
        True,
        1,
        1,
    )
    assert ("write.object-storage.enabled", "true") in c.iceberg_auto_create_properties


def test_non_table_topic_keys_are_ignored() -> None:
    validate_table_topic_configs({"cleanup.policy": "compact", "retention.ms": "x"})


GOOD = [
    ("enable", "TRUE", "enabled", True),
    ("enable", "false", "enabled", False),
    ("commit.interval.ms", "1", "commit_interval_ms", 1),
    ("commit.interval.ms", "900000", "commit_interval_ms", 900_000),
    ("commit.max.bytes", "1048576", "commit_max_bytes", 1 << 20),
    ("namespace", "lake.raw", "namespace", "lake.raw"),
    ("table.name", "orders_v2", "table_name", "orders_v2"),
    ("errors.tolerance", "all", "errors_tolerance", ErrorsTolerance.ALL),
    ("errors.tolerance", "NONE", "errors_tolerance", ErrorsTolerance.NONE),
    ("errors.dlq.topic", "orders.dlq", "dlq_topic", "orders.dlq"),
    ("upsert.enable", "false", "upsert_enable", False),
    ("expire.snapshot.enabled", "false", "expire_snapshot_enabled", False),
    ("expire.snapshot.older.than.hours", "48", "expire_snapshot_older_than_hours", 48),
    ("expire.snapshot.retain.last", "5", "expire_snapshot_retain_last", 5),
    ("id.columns", "[_kafka_key]", "id_columns", ("_kafka_key",)),
    (
        "iceberg.auto-create.properties",
        "a=1, b = 2",
        "iceberg_auto_create_properties",
        (("a", "1"), ("b", "2")),
    ),
    ("iceberg.auto-create.properties", "", "iceberg_auto_create_properties", ()),
]


@pytest.mark.parametrize(("key", "raw", "attr", "expected"), GOOD)
def test_good_values_parse(key: str, raw: str, attr: str, expected: object) -> None:
    assert getattr(parse(**{key: raw}), attr) == expected


BAD = [
    ("enable", "yes", "must be true or false"),
    ("commit.interval.ms", "0", "between 1 and 900000"),
    ("commit.interval.ms", "900001", "between 1 and 900000"),
    ("commit.interval.ms", "1m", "must be an integer"),
    ("commit.max.bytes", "10", "between"),
    ("namespace", "a..b", "dot-separated"),
    ("namespace", "bad name", "dot-separated"),
    ("table.name", "x.y", "letters, digits"),
    ("schema.type", "avro", "none, schemaless, schema"),
    ("convert.value.type", "json", "raw, string, by_schema_id, by_latest_schema"),
    ("convert.key.type", "bytes", "raw, string, by_schema_id, by_latest_schema"),
    ("transform.value.type", "unwrap", "none, flatten, flatten_debezium"),
    ("id.columns", "[a, a]", "duplicate"),
    ("id.columns", "[a, ]", "empty entry"),
    ("id.columns", "[1abc]", "not a column name"),
    ("id.columns", "[a", "unbalanced"),
    ("partition.by", "[month(ts]", "unbalanced"),
    ("partition.by", "[weekday(ts)]", "unknown transform"),
    ("partition.by", "[bucket(name)]", "needs a column and a width"),
    ("partition.by", "[bucket(name, 0)]", "positive integer"),
    ("partition.by", "[truncate(name, x)]", "positive integer"),
    ("partition.by", "[month(a, b)]", "exactly one column"),
    ("partition.by", "[a, a]", "appears twice"),
    ("cdc.field", "op-code", "not a column name"),
    ("errors.tolerance", "some", "none, invalid_data, all"),
    ("errors.dlq.topic", "bad topic!", "not a valid topic name"),
    ("errors.dlq.topic", "orders", "cannot be the table topic itself"),
    ("expire.snapshot.older.than.hours", "0", "between"),
    ("expire.snapshot.retain.last", "-1", "between"),
    ("upsert.enable", "1", "must be true or false"),
    ("iceberg.auto-create.properties", "a=1,a=2", "duplicate key"),
    ("iceberg.auto-create.properties", "novalue", "key=value"),
    ("format.version", "3", "deletion vectors"),
    ("format.version", "1", "not one of 2"),
    ("iceberg.auto-create.properties", "format-version=3", "version 3"),
    ("convert.value.by_latest_schema.message.full.name", "a..b", "fully-qualified"),
    ("catalog.uri", "http://x", "broker-level setting"),
    ("no.such.key", "1", "not a known table topic config"),
]


@pytest.mark.parametrize(("key", "raw", "message"), BAD)
def test_bad_values_raise_value_error_naming_the_key(key: str, raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        validate_table_topic_configs({P + key: raw}, "orders")
    assert (P + key) in str(info.value)


def test_deprecated_schema_type_maps_like_automq() -> None:
    schemaless = parse(**{"schema.type": "schemaless"})
    assert (schemaless.value_converter.type, schemaless.value_transform) == (
        ConvertType.RAW,
        TransformType.NONE,
    )
    schema = parse(**{"schema.type": "schema"})
    assert (schema.value_converter.type, schema.value_transform) == (
        ConvertType.BY_SCHEMA_ID,
        TransformType.FLATTEN,
    )
    explicit = parse(**{"schema.type": "schema", "convert.value.type": "by_latest_schema"})
    assert explicit.value_converter.type is ConvertType.BY_LATEST_SCHEMA
    assert explicit.value_transform is TransformType.FLATTEN


def test_by_latest_schema_subject_defaults_to_topic_value_and_key() -> None:
    c = parse(**{"convert.value.type": "by_latest_schema", "convert.key.type": "by_latest_schema"})
    assert c.value_converter.subject == "orders-value" and c.key_converter.subject == "orders-key"
    c = parse(
        **{
            "convert.value.type": "by_latest_schema",
            "convert.value.by_latest_schema.subject": "shared",
            "convert.value.by_latest_schema.message.full.name": ".shop.Order",
        }
    )
    assert c.value_converter.subject == "shared" and c.value_converter.message_full_name == "shop.Order"


def test_partition_by_parses_every_transform_in_both_argument_orders() -> None:
    fields = parse_partition_by(
        "[bucket(name, 16), truncate(4, code), year(ts), months(ts2), "
        "day(d), hour(h), identity(r), region, a.b]"
    )
    assert fields == (
        PartitionField(PartitionTransform.BUCKET, "name", 16),
        PartitionField(PartitionTransform.TRUNCATE, "code", 4),
        PartitionField(PartitionTransform.YEAR, "ts"),
        PartitionField(PartitionTransform.MONTH, "ts2"),
        PartitionField(PartitionTransform.DAY, "d"),
        PartitionField(PartitionTransform.HOUR, "h"),
        PartitionField(PartitionTransform.IDENTITY, "r"),
        PartitionField(PartitionTransform.IDENTITY, "region"),
        PartitionField(PartitionTransform.IDENTITY, "a.b"),
    )
    month = PartitionField(PartitionTransform.MONTH, "ts")
    assert parse_partition_by("bucket(name, 16), month(ts)") == (fields[0], month)
    assert parse_partition_by("[]") == ()
    assert str(fields[0]) == "bucket(name, 16)" and str(fields[7]) == "region"


FLAT = {"convert.value.type": "by_schema_id", "transform.value.type": "flatten"}
CROSS_BAD = [
    ({"upsert.enable": "true"}, "upsert.enable=true requires automq.table.topic.id.columns"),
    ({"cdc.field": "op", **FLAT}, "cdc.field requires automq.table.topic.id.columns"),
    ({"transform.value.type": "flatten"}, "requires automq.table.topic.convert.value.type by_schema_id"),
    ({"transform.value.type": "flatten_debezium", "convert.value.type": "string"}, "not string"),
    ({"partition.by": "[month(ts)]"}, "does not exist without"),
    ({"id.columns": "[id]", "convert.value.type": "by_schema_id"}, "does not exist without"),
    ({"id.columns": "[_kafka_key]", "cdc.field": "op"}, "does not exist without"),
    (
        {"id.columns": "[_from_debezium_key_]", **FLAT},
        "requires automq.table.topic.transform.value.type=flatten_debezium",
    ),
    ({"id.columns": "[_from_debezium_key_, x]", **FLAT}, "cannot be combined"),
]


@pytest.mark.parametrize(("configs", "message"), CROSS_BAD)
def test_cross_field_rules(configs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace(".", r"\.").replace("[", r"\[")):
        parse(**configs)


def test_valid_combinations_pass_cross_field_rules() -> None:
    c = parse(
        **FLAT,
        **{"id.columns": "[region, name]", "upsert.enable": "true", "partition.by": "[bucket(name, 16)]"},
    )
    assert c.writes_deletes and c.id_columns == ("region", "name")
    c = parse(
        **{
            "partition.by": "[_kafka_metadata.partition]",
            "id.columns": "[_kafka_key]",
            "upsert.enable": "true",
        }
    )
    assert c.partition_by[0].column == "_kafka_metadata.partition"
    c = parse(
        **{
            "convert.value.type": "by_schema_id",
            "convert.key.type": "by_schema_id",
            "transform.value.type": "flatten_debezium",
            "id.columns": "[_from_debezium_key_]",
            "cdc.field": "_cdc.op",
        }
    )
    assert c.id_columns_from_debezium_key


def test_table_name_is_sanitised_topic_name() -> None:
    assert sanitize_table_name("orders.v1-eu") == "orders_v1_eu"
    assert parse("my.topic").table_name == "my_topic"
    assert parse(None).table_name is None


def test_none_values_count_as_unset() -> None:
    c = TableTopicConfig.from_topic_configs({P + "commit.interval.ms": None}, "t")
    assert c.commit_interval_ms == 60_000


def test_config_is_frozen() -> None:
    c = parse()
    with pytest.raises(AttributeError):
        c.enabled = True  # type: ignore[misc]


def test_partition_by_without_flatten_names_only_existing_kafka_columns() -> None:
    base = {"automq.table.topic.enable": "true"}
    TableTopicConfig.from_topic_configs(
        {**base, "automq.table.topic.partition.by": "[day(_kafka_metadata.timestamp)]"}
    )
    for bad in ("[_kafka_metadata.nosuch]", "[_kafka_nosuch]", "[_kafka_value.field]"):
        with pytest.raises(ValueError, match=r"partition\.by: column .* does not exist"):
            TableTopicConfig.from_topic_configs({**base, "automq.table.topic.partition.by": bad})


def test_format_version_2_is_accepted_and_the_default() -> None:
    validate_table_topic_configs({P + "enable": "true", P + "format.version": "2"}, "orders")
    validate_table_topic_configs({P + "enable": "true"}, "orders")


def test_a_commit_interval_that_makes_a_wide_tables_metadata_heavy_is_named_with_the_key_to_raise() -> None:
    """Every snapshot lists every partition's offset and every commit rewrites them all."""
    fast = TableTopicConfig.from_topic_configs({"automq.table.topic.commit.interval.ms": "1000"})
    said = fast.history_warning(1000)
    assert said is not None
    assert "3,600 snapshots" in said and "61 MB" in said and "automq.table.topic.commit.interval.ms" in said
    assert fast.history_warning(100) is None  # a narrow topic: 6 MB
    assert TableTopicConfig.from_topic_configs({}).history_warning(10_000) is None  # the default: 10 MB
    unbounded = {
        "automq.table.topic.commit.interval.ms": "1000",
        "automq.table.topic.expire.snapshot.enabled": "false",
    }
    assert TableTopicConfig.from_topic_configs(unbounded).history_warning(1000) is None
