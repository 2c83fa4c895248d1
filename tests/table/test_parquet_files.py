"""Data files written straight with pyarrow carry the same Iceberg metadata as pyiceberg's writer,
read back the same, and are dictionary-encoded only where values repeat."""

from __future__ import annotations

import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import _dataframe_to_data_files

from tabletopic.table import parquet_files

ROWS = pa.table(
    {
        "id": pa.array(range(20_000), pa.int64()),
        "country": pa.array([["de", "fr", None, "nl"][i % 4] for i in range(20_000)]),
        "note": pa.array([f"free text {i * 7919}" if i % 5 else None for i in range(20_000)]),
        "score": pa.array([i * 0.25 for i in range(20_000)]),
        "flag": pa.array([i % 3 == 0 for i in range(20_000)]),
        "when": pa.array(range(20_000), pa.int64()).cast(pa.timestamp("us", "UTC")),
        "price": pa.array([Decimal(i % 1000) / 100 for i in range(20_000)], pa.decimal128(10, 2)),
        "tags": pa.array([[f"t{i % 3}"] * (i % 3) for i in range(20_000)], pa.list_(pa.string())),
        "meta": pa.array([{"a": i, "b": f"x{i % 2}"} for i in range(20_000)]),
    }
)


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("ns")
    return catalog


def test_direct_files_have_pyiceberg_s_statistics_and_read_back_the_same(catalog: SqlCatalog) -> None:
    table = catalog.create_table(("ns", "direct"), schema=ROWS.schema)
    shaped = ROWS.cast(parquet_files.arrow_schema(table.metadata))
    ours = parquet_files.write_data_files(table.metadata, table.io, shaped)
    theirs = list(
        _dataframe_to_data_files(table_metadata=table.metadata, write_uuid=uuid.uuid4(), df=ROWS, io=table.io)
    )
    assert len(ours) == len(theirs) == 1
    mine, other = ours[0], theirs[0]
    assert mine.record_count == other.record_count == ROWS.num_rows
    assert mine.value_counts == other.value_counts
    assert mine.null_value_counts == other.null_value_counts
    assert mine.nan_value_counts == other.nan_value_counts
    assert mine.lower_bounds == other.lower_bounds
    assert mine.upper_bounds == other.upper_bounds
    assert mine.split_offsets == other.split_offsets
    assert set(mine.column_sizes) == set(other.column_sizes)
    assert mine.file_size_in_bytes == len(table.io.new_input(mine.file_path))

    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        append.append_data_file(mine)
    read = table.refresh().scan().to_arrow()
    assert read.sort_by("id").cast(ROWS.schema).equals(ROWS)


def test_only_columns_whose_values_repeat_are_dictionary_encoded(catalog: SqlCatalog) -> None:
    table = catalog.create_table(("ns", "dicts"), schema=ROWS.schema)
    shaped = ROWS.cast(parquet_files.arrow_schema(table.metadata))
    [file] = parquet_files.write_data_files(table.metadata, table.io, shaped)
    with table.io.new_input(file.file_path).open() as stream:
        metadata = pq.ParquetFile(stream).metadata
    encoded = {}
    for index in range(metadata.num_columns):
        column = metadata.row_group(0).column(index)
        encoded[column.path_in_schema] = column.has_dictionary_page
    assert encoded["country"] and encoded["price"] and encoded["meta.b"] and encoded["tags.list.element"]
    assert not encoded["id"] and not encoded["note"] and not encoded["score"] and not encoded["when"]
    assert not encoded["flag"]


def test_partitioned_tables_get_pyiceberg_s_partition_values_and_paths(catalog: SqlCatalog) -> None:
    """Identity and transform partitions: the same partitions, values and directories as
    pyiceberg's writer, and the rows read back the same."""
    from pyiceberg.transforms import BucketTransform, DayTransform

    table = catalog.create_table(("ns", "parted"), schema=ROWS.schema)
    with table.update_spec() as update:
        update.add_identity("country")
        update.add_field("when", DayTransform(), "when_day")
        update.add_field("id", BucketTransform(3), "id_bucket")
    assert parquet_files.direct_write_supported(table.metadata)
    shaped = ROWS.cast(parquet_files.arrow_schema(table.metadata))
    ours = parquet_files.write_data_files(table.metadata, table.io, shaped)
    theirs = list(
        _dataframe_to_data_files(table_metadata=table.metadata, write_uuid=uuid.uuid4(), df=ROWS, io=table.io)
    )

    def by_partition(files: list[Any]) -> dict[tuple[Any, ...], tuple[int, str]]:
        return {
            tuple(f.partition): (f.record_count, f.file_path.rsplit("/", 1)[0].split("/data/", 1)[1])
            for f in files
        }

    assert len(ours) == len(theirs) > 3
    assert by_partition(ours) == by_partition(theirs)
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        for file in ours:
            append.append_data_file(file)
    read = table.refresh().scan().to_arrow()
    assert read.sort_by("id").cast(ROWS.schema).equals(ROWS)
    assert table.scan(row_filter="country == 'fr'").to_arrow().num_rows == 5000
