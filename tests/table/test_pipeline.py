"""The pure pipeline end to end: encoded batches -> decode -> rows -> Iceberg (pyiceberg on SQLite)."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

from tabletopic.records.compression import Compression
from tabletopic.records.encoder import Record, build_batch
from tabletopic.table.convert import RecordConverter, conform_batch, convert_slice, unify_schemas
from tabletopic.table.schema_evolution import create_table_for_topic, evolve_table_schema
from tabletopic.table.table_config import ErrorsTolerance, TableTopicConfig
from tests.records.samples import stored
from tests.support.schemas import USER_V1, USER_V2, MemoryLookup, avro_bytes, wire

T0 = datetime.datetime(2024, 5, 1, tzinfo=datetime.UTC)


def test_two_schema_versions_land_in_one_table_with_offsets_and_poison_skipped(tmp_path: Path) -> None:
    lookup = MemoryLookup()
    v1 = lookup.register("users-value", "AVRO", USER_V1)
    v2 = lookup.register("users-value", "AVRO", USER_V2)
    first = [
        (b"k%d" % i, wire(v1, avro_bytes(USER_V1, {"id": i, "name": f"n{i}", "created": T0})), [])
        for i in range(5)
    ]
    second = [
        (
            b"k%d" % i,
            wire(
                v2,
                avro_bytes(
                    USER_V2,
                    {"id": i, "name": "m", "created": T0, "email": "e", "balance": decimal.Decimal("1")},
                ),
            ),
            [("src", b"app")],
        )
        for i in range(5, 9)
    ]
    second.append((b"bad", b"\x00garbage", []))
    batches = stored(
        [
            build_batch([Record(*r) for r in first], compression=Compression.ZSTD),
            build_batch([Record(*r) for r in second], compression=Compression.LZ4),
        ],
        first_offset=1000,
    )
    config = TableTopicConfig.from_topic_configs(
        {
            "automq.table.topic.enable": "true",
            "automq.table.topic.schema.type": "schema",
            "automq.table.topic.partition.by": "[day(created)]",
        },
        "users",
    )
    converter = RecordConverter(config, lookup)
    # Two "tasks", each with part of the range (the slices overlap the boundary on purpose).
    results = [
        convert_slice(batches, 1000, 1004, 0, converter),
        convert_slice(batches, 1004, 1010, 0, converter),
    ]
    skipped = [f for r in results for f in r.enforce(ErrorsTolerance.INVALID_DATA)]
    assert [f.offset for f in skipped] == [1009]
    parts = [r.batch for r in results if r.batch is not None]
    schema = unify_schemas([b.schema for b in parts])

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("default")
    table = create_table_for_topic(catalog, ("default", "users"), parts[0].schema, config.partition_by)
    evolve_table_schema(table, schema)
    target = table.schema().as_arrow()
    table.append(pa.Table.from_batches([conform_batch(b, target) for b in parts], schema=target))

    rows = table.scan().to_arrow().sort_by("id").to_pylist()
    assert [r["id"] for r in rows] == list(range(9))
    assert [r["_kafka_metadata"]["offset"] for r in rows] == list(range(1000, 1009))
    assert rows[0]["email"] is None and rows[5]["email"] == "e"
    assert rows[5]["_kafka_header"] == [("src", b"app")]
    assert rows[0]["_kafka_key"] == "k0"
