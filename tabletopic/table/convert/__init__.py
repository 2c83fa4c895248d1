"""Kafka records -> Arrow rows for table topics (pure code, no I/O except registry lookups).

Per Spark task::

    converter = RecordConverter(TableTopicConfig.from_topic_configs(topic_configs, topic), lookup)
    result = convert_slice(stored_batches, start, end, partition, converter)
    skipped = result.enforce(config.errors_tolerance)   # raises RecordConversionError
    yield result.batch                                  # pyarrow.RecordBatch or None

Across tasks, :func:`unify_schemas` merges the batches' schemas and :func:`conform_batch` reshapes
each batch to the merged (or table) schema.
"""

from tabletopic.table.convert.rows import (
    ConversionResult,
    FailedRecord,
    RecordConversionError,
    RecordConverter,
    convert_records,
    convert_slice,
)
from tabletopic.table.convert.unify import SchemaConflict, conform_batch, unify_schemas

__all__ = [
    "ConversionResult",
    "FailedRecord",
    "RecordConversionError",
    "RecordConverter",
    "SchemaConflict",
    "conform_batch",
    "convert_records",
    "convert_slice",
    "unify_schemas",
]
