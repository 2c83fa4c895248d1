"""The Iceberg table behind a table topic: where it lives, creating it, keeping its schema and
partition spec in step with the data and the topic's configs."""

from __future__ import annotations

import logging

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError
from pyiceberg.table import Table

from tabletopic.table.convert.rows import HEADER_COLUMN, HEADER_TYPE, METADATA_COLUMN, METADATA_TYPE
from tabletopic.table.schema_evolution import (
    IncompatibleSchemaChange,
    create_table_for_topic,
    evolve_partition_spec,
    evolve_table_schema,
)
from tabletopic.table.topic_config import TableTopicConfig, sanitize_table_name

log = logging.getLogger(__name__)

IncompatibleTableSchema = IncompatibleSchemaChange


def identifier(config: TableTopicConfig, topic: str) -> tuple[str, str]:
    return (config.namespace, config.table_name or sanitize_table_name(topic))


def ensure_schema(
    catalog: Catalog,
    ident: tuple[str, str],
    table: Table | None,
    arrow_schema: pa.Schema,
    config: TableTopicConfig,
) -> Table:
    """Create the table for ``arrow_schema``, or evolve an existing one so it can hold it.

    Raises:
        IncompatibleTableSchema: the data changed a column in a way Iceberg cannot evolve.
    """
    if table is None:
        try:
            catalog.create_namespace(ident[0])
        except NamespaceAlreadyExistsError:
            pass
        try:
            table = create_table_for_topic(
                catalog,
                ident,
                arrow_schema,
                partition_by=config.partition_by,
                id_columns=config.id_columns,
                properties=dict(config.iceberg_auto_create_properties),
            )
            log.info("created Iceberg table %s.%s", *ident)
            return table
        except TableAlreadyExistsError:
            table = catalog.load_table(ident)  # created meanwhile (a previous run); evolve it below
    changes = evolve_table_schema(table, arrow_schema)
    if changes:
        log.info("evolved schema of %s.%s: %s", *ident, "; ".join(str(c) for c in changes))
    return table


# The columns every row has whatever its key and value decode to: enough to create the table (and so
# commit offsets) when no record of a first batch could be decoded.
BASE_SCHEMA = pa.schema([(HEADER_COLUMN, HEADER_TYPE), (METADATA_COLUMN, METADATA_TYPE)])


def sync_partition_spec(table: Table, config: TableTopicConfig) -> None:
    """Apply a changed ``partition.by`` to the table (new data uses the new spec)."""
    try:
        if evolve_partition_spec(table, config.partition_by):
            log.info("partition spec of %s is now %s", table.name(), table.spec())
    except NoSuchTableError:
        return
