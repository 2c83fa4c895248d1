"""Upsert commits by position deletes (:mod:`tabletopic.table.row_delta`): the latest row per key
wins within a batch and across batches, deletes remove rows and a later insert brings them back,
keys of several columns match null to null, partitioned tables get their deletes per partition, and
the commit is conditional on the planned snapshot. Read back with pyiceberg (what DuckDB and the
tools read through); the Spark read is in test_upsert_spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform

from tabletopic.table.commit import CommittedState, StalePlan, committed_state, encode_offsets
from tabletopic.table.convert.rows import DELETE_MARKER_COLUMN, METADATA_COLUMN, METADATA_TYPE
from tabletopic.table.key_index import BatchKeys, FileKeys, KeyCache
from tabletopic.table.row_delta import commit_upsert, latest_per_key

SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string()), ("v", pa.string()), ("op", pa.string())])


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("ns")
    return catalog


def make_table(catalog: SqlCatalog, partitioned: bool = False) -> Table:
    schema = SCHEMA.append(pa.field(METADATA_COLUMN, METADATA_TYPE))
    table = catalog.create_table(("ns", "t"), schema, properties={"format-version": "2"})
    if partitioned:
        with table.update_spec() as update:
            update.add_field("id", BucketTransform(4), "id_bucket")
    return table.refresh()


_offset = iter(range(10**6))


def batch(rows: list[tuple[Any, ...]], tombstones: set[int] | None = None) -> pa.Table:
    """Rows ``(id, region, v, op)`` in log order (each a later offset); ``tombstones`` are indexes of
    rows that are Kafka tombstones."""
    tombstones = tombstones or set()
    offsets = [next(_offset) for _ in rows]
    table = pa.Table.from_pylist([dict(zip(SCHEMA.names, row, strict=True)) for row in rows], schema=SCHEMA)
    meta = pa.array([{"partition": 0, "offset": o, "timestamp": 5} for o in offsets], METADATA_TYPE)
    table = table.append_column(pa.field(METADATA_COLUMN, METADATA_TYPE), meta)
    marker = pa.array([i in tombstones for i in range(len(rows))])
    return table.append_column(DELETE_MARKER_COLUMN, marker)


def apply_with(
    table: Table,
    rows: pa.Table,
    keys: tuple[str, ...] = ("id",),
    delete_column: str | None = None,
    cache: KeyCache | None = None,
) -> Table:
    table = table.refresh()
    planned = committed_state(table)
    offsets = {0: int(rows.column(METADATA_COLUMN).combine_chunks().field("offset")[-1].as_py()) + 1}
    props = {"tabletopic.offsets": encode_offsets(offsets)}
    commit_upsert(table, rows, keys, delete_column, planned, props, cache)
    return table.refresh()


def contents(table: Table, keys: tuple[str, ...] = ("id",)) -> dict[Any, str]:
    rows = table.scan().to_arrow().to_pylist()
    found: dict[Any, str] = {}
    for row in rows:
        key = tuple(row[k] for k in keys) if len(keys) > 1 else row[keys[0]]
        assert key not in found, f"two rows for key {key}"
        found[key] = row["v"]
    return found


@pytest.mark.parametrize(
    ("partitioned", "cached"),
    [(False, False), (True, False), (False, True)],
    ids=["plain", "bucket4", "cached"],
)
def test_latest_row_per_key_within_and_across_batches_with_deletes_and_reinserts(
    catalog: SqlCatalog, partitioned: bool, cached: bool
) -> None:
    table = make_table(catalog, partitioned)
    cache = KeyCache(1 << 20) if cached else None

    def apply(table: Table, rows: pa.Table) -> Table:
        return apply_with(table, rows, cache=cache)

    # Repeated keys in one batch: the later offset wins.
    table = apply(
        table, batch([(1, "eu", "a", "I"), (2, "eu", "b", "I"), (1, "eu", "c", "U"), (3, "us", "x", "I")])
    )
    assert contents(table) == {1: "c", 2: "b", 3: "x"}
    # Across batches; a tombstone deletes; insert-then-delete in one batch leaves nothing;
    # delete-then-insert in one batch leaves the insert.
    table = apply(
        table,
        batch(
            [
                (3, "us", "y", "U"),
                (2, None, None, None),
                (4, "eu", "n", "I"),
                (4, None, None, None),
                (1, None, None, None),
                (1, "eu", "back", "I"),
                (5, "us", "five", "I"),
            ],
            tombstones={1, 3, 4},
        ),
    )
    assert contents(table) == {1: "back", 3: "y", 5: "five"}
    # A key deleted in an earlier commit comes back; an update of an updated key replaces it again.
    table = apply(table, batch([(2, "eu", "again", "I"), (3, "us", "z", "U"), (3, "us", "zz", "U")]))
    assert contents(table) == {1: "back", 2: "again", 3: "zz", 5: "five"}
    # Deleting an absent key changes nothing and still commits (the offsets advance).
    table = apply(table, batch([(99, None, None, None)], tombstones={0}))
    assert contents(table) == {1: "back", 2: "again", 3: "zz", 5: "five"}
    assert len(table.snapshots()) == 4
    if cache is not None:
        assert cache.hits > 0 and cache.size > 0  # later commits looked the earlier files up in memory
    assert all("tabletopic.offsets" in s.summary.additional_properties for s in table.snapshots())
    summary = table.current_snapshot().summary.additional_properties  # type: ignore[union-attr]
    assert int(summary["total-records"]) - int(summary["total-position-deletes"]) == 4


def test_cdc_operations_and_keys_of_several_columns_match_null_to_null(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    keys = ("id", "region")
    table = apply_with(
        table,
        batch([(1, "eu", "a", "I"), (1, "us", "b", "I"), (1, None, "c", "I"), (2, None, "d", "I")]),
        keys,
        "op",
        KeyCache(1 << 20),
    )
    assert contents(table, keys) == {(1, "eu"): "a", (1, "us"): "b", (1, None): "c", (2, None): "d"}
    table = apply_with(
        table,
        batch([(1, None, "c2", "U"), (1, "us", "gone", "D"), (2, None, "gone", "d"), (3, "eu", "e", "I")]),
        keys,
        "op",
        KeyCache(1 << 20),
    )
    assert contents(table, keys) == {(1, "eu"): "a", (1, None): "c2", (3, "eu"): "e"}


def test_a_commit_planned_against_an_older_snapshot_is_refused(catalog: SqlCatalog) -> None:
    table = make_table(catalog)
    table = apply_with(table, batch([(1, "eu", "a", "I")]))
    stale = CommittedState(snapshot_id=None)  # planned before the first commit
    with pytest.raises(StalePlan):
        commit_upsert(table, batch([(1, "eu", "b", "I")]), ("id",), None, stale, {})
    assert contents(table.refresh()) == {1: "a"}
    assert len(table.refresh().snapshots()) == 1


def test_latest_per_key_orders_by_timestamp_then_partition_then_offset() -> None:
    meta = pa.array(
        [
            {"partition": 1, "offset": 9, "timestamp": 10},
            {"partition": 0, "offset": 1, "timestamp": 20},  # newest timestamp wins
            {"partition": 0, "offset": 5, "timestamp": 7},
            {"partition": 1, "offset": 0, "timestamp": 7},  # same timestamp: higher partition wins
        ],
        METADATA_TYPE,
    )
    rows = pa.table({"id": [1, 1, 2, 2], "v": ["a", "b", "c", "d"], METADATA_COLUMN: meta})
    assert sorted(latest_per_key(rows, ["id"]).column("v").to_pylist()) == ["b", "d"]


@pytest.mark.parametrize("ordered", [False, True], ids=["shuffled", "in-key-order"])
@pytest.mark.parametrize("kind", [pa.int64(), pa.int32(), pa.string()])
def test_file_keys_find_every_position_of_every_batch_key_including_repeats_and_nulls(
    kind: pa.DataType, ordered: bool
) -> None:
    rng = np.random.default_rng(7)
    numbers = rng.integers(-20, 300, 5000)
    if ordered:
        numbers.sort()
    values = [None if v < 0 else int(v) for v in numbers]
    wanted = [None, *(int(v) for v in rng.integers(0, 400, 200))]
    if pa.types.is_string(kind):
        values = [None if v is None else f"k{v}" for v in values]
        wanted = [None if v is None else f"k{v}" for v in wanted]
    found = FileKeys.of(pa.array(values, kind)).find(BatchKeys.of(pa.array(wanted, kind)))
    expected = [i for i, v in enumerate(values) if v in set(wanted)]
    assert sorted(set(found.tolist())) == expected  # repeated batch keys may repeat a position
