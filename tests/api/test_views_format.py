"""How the console writes table values and partition specs: as the table's types (nulls as null,
structs and maps as JSON, never Python reprs) and as ``partition.by`` spells a spec."""

from __future__ import annotations

import datetime
import decimal

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform, TruncateTransform
from pyiceberg.types import NestedField, StringType, TimestampType

from tabletopic.api.console import TEMPLATES
from tabletopic.api.views import cell, spec_text


def test_row_sample_cells_read_as_the_tables_types_not_python_reprs() -> None:
    assert cell(None) == "null"
    assert cell(True) == "true" and cell(42) == "42" and cell("plain text") == "plain text"
    assert cell({"street": "Main", "no": None}) == '{"street": "Main", "no": null}'  # a struct
    assert cell([("src", b"web")]) == '{"src": "web"}'  # a map<string, binary> (the headers)
    assert cell([1, 2]) == "[1, 2]"
    assert cell(b"\xff\x00") == "ff00"  # binary that is not text
    assert cell(datetime.datetime(2026, 1, 31, 10, 0)) == "2026-01-31T10:00:00"
    assert cell(decimal.Decimal("1.50")) == "1.50"
    assert cell("x" * 200).endswith("…") and len(cell("x" * 200)) == 80


def test_the_partition_spec_reads_as_partition_by_writes_it() -> None:
    schema = Schema(
        NestedField(1, "ts", TimestampType()),
        NestedField(2, "customer", StringType()),
        NestedField(3, "region", StringType()),
    )
    spec = PartitionSpec(
        PartitionField(1, 1000, DayTransform(), "ts_day"),
        PartitionField(2, 1001, BucketTransform(16), "customer_bucket"),
        PartitionField(3, 1002, TruncateTransform(4), "region_trunc"),
        PartitionField(3, 1003, IdentityTransform(), "region"),
    )
    assert spec_text(spec, schema) == "day(ts), bucket(16, customer), truncate(4, region), region"
    assert spec_text(PartitionSpec(), schema) == "unpartitioned"


def test_a_tables_offsets_are_listed_in_partition_order_not_text_order() -> None:
    # The status carries partitions as JSON keys; the console listed 0, 1, 10, 11, 2, ... for 12.
    offsets = {str(p): 100 + p for p in (10, 0, 2, 11, 1)}
    listing = TEMPLATES.env.from_string(
        "{% for p, hw in offsets | by_partition %}{{ p }}:{{ hw }} {% endfor %}"
    )
    assert listing.render(offsets=offsets).split() == ["0:100", "1:101", "2:102", "10:110", "11:111"]
    table_page = TEMPLATES.env.loader.get_source(TEMPLATES.env, "table.html")[0]  # type: ignore[union-attr]
    assert "s.high_watermarks | by_partition" in table_page
