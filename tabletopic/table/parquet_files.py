"""Data files for an unpartitioned Iceberg table written straight with ``pyarrow.parquet``.

pyiceberg's writer (``_dataframe_to_data_files``) dictionary-encodes every column: on columns whose
values rarely repeat (ids, timestamps, measurements, free text) Arrow hashes each value, gives up
once the dictionary page is full and writes the column plain anyway, so the hashing is pure cost
and the file ends up larger (on the 20-field bench rows: 1.75 CPU-s per 1 M rows and 28 MB, against
0.5 CPU-s and 21 MB without the dictionary). Here a column is dictionary-encoded only when a sample
of its values repeats enough to gain from it. The Iceberg metadata of the file (sizes, value and
null counts, bounds by field id) is read from the Parquet footer with pyiceberg's own helpers, so
the ``DataFile`` matches what pyiceberg would have produced. Partitioned tables (identity and
transforms) are split by pyiceberg's own partitioning (the same partition values and paths its
writer gives) and each partition written the same way. Schemas whose column names Parquet cannot
carry as they are stay on pyiceberg's writer.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import (
    _determine_partitions,
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
    schema_to_pyarrow,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionKey
from pyiceberg.schema import sanitize_column_names
from pyiceberg.table import TableProperties as Props
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import Record

# Rows sampled per column to decide on dictionary encoding, and the share of distinct values in the
# sample below which a dictionary pays (Arrow falls back to plain encoding per column chunk anyway
# when the dictionary page fills up, so a wrong "yes" costs time, never correctness).
DICTIONARY_SAMPLE_ROWS = 8192
DICTIONARY_MAX_DISTINCT_SHARE = 0.5


def direct_write_supported(metadata: TableMetadata) -> bool:
    """Whether :func:`write_data_files` can write for this table (see the module docstring)."""
    schema = metadata.schema()
    return sanitize_column_names(schema) == schema


def arrow_schema(metadata: TableMetadata) -> pa.Schema:
    """The table's schema as Arrow, with the Parquet field ids Iceberg readers match columns by."""
    return schema_to_pyarrow(metadata.schema(), include_field_ids=True)


def _leaf_paths(name: str, kind: pa.DataType) -> Iterator[tuple[str, pa.DataType]]:
    """Parquet column paths (dotted) of an Arrow field, with each leaf's type."""
    if pa.types.is_struct(kind):
        for child in kind:
            yield from _leaf_paths(f"{name}.{child.name}", child.type)
    elif pa.types.is_map(kind):
        yield from _leaf_paths(f"{name}.key_value.key", kind.key_type)
        yield from _leaf_paths(f"{name}.key_value.value", kind.item_type)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        yield from _leaf_paths(f"{name}.list.element", kind.value_type)
    else:
        yield name, kind


def dictionary_columns(table: pa.Table) -> list[str]:
    """The leaf columns worth dictionary-encoding: top-level columns whose sampled values repeat
    (at most :data:`DICTIONARY_MAX_DISTINCT_SHARE` distinct), and every nested leaf (not sampled;
    Arrow's default). Booleans never (bit-packed already)."""
    sample = table.slice(0, DICTIONARY_SAMPLE_ROWS)
    chosen: list[str] = []
    for field in table.schema:
        if pa.types.is_nested(field.type):
            leaves = _leaf_paths(field.name, field.type)
            chosen += [path for path, kind in leaves if not pa.types.is_boolean(kind)]
            continue
        if pa.types.is_boolean(field.type) or pa.types.is_null(field.type):
            continue
        column = sample.column(field.name)
        present = len(column) - column.null_count
        if present == 0:
            continue
        try:
            distinct = pc.count_distinct(column).as_py()
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            distinct = 0  # a type Arrow cannot count: leave it to Arrow's default (a dictionary)
        if distinct <= present * DICTIONARY_MAX_DISTINCT_SHARE:
            chosen.append(field.name)
    return chosen


def _int(properties: dict[str, str], key: str, default: int) -> int:
    return int(properties.get(key, default))


def _writer_options(properties: dict[str, str]) -> dict[str, Any]:
    """pyarrow writer options from the table's ``write.parquet.*`` properties (pyiceberg's keys
    and defaults: zstd at Arrow's default level, 1 MiB pages, 20 000 rows per page)."""
    codec = properties.get(Props.PARQUET_COMPRESSION, Props.PARQUET_COMPRESSION_DEFAULT)
    level = properties.get(Props.PARQUET_COMPRESSION_LEVEL)
    return {
        "compression": "none" if codec == "uncompressed" else codec,
        "compression_level": int(level) if level is not None else None,
        "data_page_size": _int(
            properties, Props.PARQUET_PAGE_SIZE_BYTES, Props.PARQUET_PAGE_SIZE_BYTES_DEFAULT
        ),
        "dictionary_pagesize_limit": _int(
            properties, Props.PARQUET_DICT_SIZE_BYTES, Props.PARQUET_DICT_SIZE_BYTES_DEFAULT
        ),
        "write_batch_size": _int(
            properties, Props.PARQUET_PAGE_ROW_LIMIT, Props.PARQUET_PAGE_ROW_LIMIT_DEFAULT
        ),
    }


def write_data_files(metadata: TableMetadata, io: FileIO, table: pa.Table) -> list[DataFile]:
    """Write ``table`` (already in :func:`arrow_schema`'s shape) as one data file per
    ``write.parquet.row-group-limit`` rows' row groups up to ``write.target-file-size-bytes`` of
    Arrow data; returns the ``DataFile``s to commit.

    Raises:
        ValueError: the table's column names need sanitising (callers check
            :func:`direct_write_supported` first).
    """
    if not direct_write_supported(metadata):
        raise ValueError("direct Parquet writes need Parquet-safe column names")
    if table.num_rows == 0:
        return []
    properties = dict(metadata.properties)
    schema = metadata.schema()
    target = _int(properties, Props.WRITE_TARGET_FILE_SIZE_BYTES, Props.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT)
    row_group = _int(properties, Props.PARQUET_ROW_GROUP_LIMIT, Props.PARQUET_ROW_GROUP_LIMIT_DEFAULT)
    options = _writer_options(properties)
    stats_plan = compute_statistics_plan(schema, properties)
    id_mapping = parquet_path_to_id_mapping(schema)
    locations = load_location_provider(table_location=metadata.location, table_properties=properties)
    rows_per_file = max(1, int(target / max(table.nbytes / table.num_rows, 1)))
    write_id = uuid.uuid4()
    files: list[DataFile] = []
    pieces = (
        (part, key)
        for group, key in _partitions(metadata, table)
        for part in (group.slice(start, rows_per_file) for start in range(0, group.num_rows, rows_per_file))
    )
    for index, (part, key) in enumerate(pieces):
        path = locations.new_data_location(
            data_file_name=f"00000-{index}-{write_id}.parquet", partition_key=key
        )
        with io.new_output(path).create(overwrite=True) as stream:
            writer = pq.ParquetWriter(
                stream,
                schema=part.schema,
                use_dictionary=dictionary_columns(part),
                store_decimal_as_integer=True,
                **options,
            )
            with writer:
                writer.write_table(part, row_group_size=row_group)
            size = stream.tell()  # the file's length without asking the store for it again
        statistics = data_file_statistics_from_parquet_metadata(
            parquet_metadata=writer.writer.metadata,
            stats_columns=stats_plan,
            parquet_column_mapping=id_mapping,
        )
        files.append(
            DataFile.from_args(
                content=DataFileContent.DATA,
                file_path=path,
                file_format=FileFormat.PARQUET,
                partition=key.partition if key is not None else Record(),
                file_size_in_bytes=size,
                sort_order_id=None,
                spec_id=metadata.default_spec_id,
                equality_ids=None,
                key_metadata=None,
                **statistics.to_serialized_dict(),
            )
        )
    return files


def _partitions(metadata: TableMetadata, table: pa.Table) -> Iterator[tuple[pa.Table, PartitionKey | None]]:
    """``table`` split by the table's partition spec (pyiceberg's own split, so the partition
    values and paths are those of its writer); the whole table once when unpartitioned."""
    spec = metadata.spec()
    if spec.is_unpartitioned():
        yield table, None
        return
    for partition in _determine_partitions(spec=spec, schema=metadata.schema(), arrow_table=table):
        yield partition.arrow_table_partition, partition.partition_key
