"""Fresh reads merge a table's committed rows with the log tail as the next commit would: appends
add every tail row; upsert tables keep the tail's latest change of each key, replacing or deleting
the committed row of that key."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tabletopic.table.convert.rows import DELETE_MARKER_COLUMN
from tabletopic.table.ops.fresh import _upsert

pytestmark = pytest.mark.timeout(60)

META = pa.struct([("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.int64())])
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.large_string()), ("_kafka_metadata", META)])


def rows(items: list[tuple[int, str | None, int]], deletes: list[bool] | None = None) -> pa.RecordBatch:
    """``(id, name, offset)`` rows of partition 0, timestamps equal to offsets."""
    batch = pa.RecordBatch.from_pylist(
        [
            {"id": i, "name": n, "_kafka_metadata": {"partition": 0, "offset": o, "timestamp": o}}
            for i, n, o in items
        ],
        schema=pa.schema([("id", pa.int64()), ("name", pa.string()), ("_kafka_metadata", META)]),
    )
    if deletes is not None:
        batch = batch.append_column(DELETE_MARKER_COLUMN, pa.array(deletes))
    return batch


def test_upsert_tail_replaces_deletes_and_adds_keys_with_each_keys_latest_change() -> None:
    base = pa.Table.from_batches([rows([(1, "a", 0), (2, "b", 1), (3, "c", 2), (4, "d", 3)]).cast(SCHEMA)])
    tail = [
        rows([(2, "b2", 10), (2, "b3", 11), (3, None, 12)], deletes=[False, False, True]),
        rows([(4, None, 13), (4, "d2", 14), (9, "z", 15)], deletes=[True, False, False]),
    ]
    merged = _upsert(base, tail, SCHEMA, ("id",), None)
    assert merged.schema == SCHEMA
    assert {r["id"]: r["name"] for r in merged.to_pylist()} == {1: "a", 2: "b3", 4: "d2", 9: "z"}


def test_upsert_with_a_cdc_field_deletes_on_d() -> None:
    schema = SCHEMA.append(pa.field("op", pa.large_string()))
    base = pa.Table.from_pylist(
        [{"id": 1, "name": "a", "_kafka_metadata": {"partition": 0, "offset": 0, "timestamp": 0}, "op": "I"}],
        schema=schema,
    )
    tail = rows([(1, "a", 5)]).append_column("op", pa.array(["D"]))
    assert _upsert(base, [tail], schema, ("id",), "op").num_rows == 0
    assert _upsert(base, [], schema, ("id",), "op").num_rows == 1
