"""The Iceberg table behind a table topic: where it lives, creating it, keeping its schema and
partition spec in step with the data and the topic's configs."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError
from pyiceberg.table import Table
from pyiceberg.types import StructType

from tabletopic.table.convert.rows import (
    CDC_COLUMN,
    HEADER_COLUMN,
    HEADER_TYPE,
    KEY_COLUMN,
    METADATA_COLUMN,
    METADATA_TYPE,
)
from tabletopic.table.convert.unify import unify_schemas
from tabletopic.table.ports import TopicView
from tabletopic.table.schema_evolution import (
    IncompatibleTableSchema,
    create_table_for_topic,
    evolve_partition_spec,
    evolve_table_schema,
)
from tabletopic.table.table_config import (
    FROM_DEBEZIUM_KEY,
    PARTITION_BY,
    TABLE_NAME,
    TableTopicConfig,
    TransformType,
    sanitize_table_name,
)

log = logging.getLogger(__name__)

# Upsert/CDC tables take row-level changes every commit interval as position-delete files (our own
# commits, table/row_delta.py); these properties make Spark writers (a user's UPDATE/DELETE/MERGE)
# do the same instead of rewriting data files. Periodic compaction folds the deletes back in.
MERGE_ON_READ = {
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
}


def creation_properties(config: TableTopicConfig) -> dict[str, str]:
    properties = {"format-version": "2", **dict(config.iceberg_auto_create_properties)}
    if config.writes_deletes:
        properties.update(MERGE_ON_READ)
    return properties


def identifier(config: TableTopicConfig, topic: str) -> tuple[str, str]:
    return (config.namespace, config.table_name or sanitize_table_name(topic))


def table_owner_conflict(topic: str, config: TableTopicConfig, others: Iterable[TopicView]) -> str | None:
    """Why ``topic`` may not feed its table: another table topic maps to the same table, or None.

    Default table names replace every character outside ``[A-Za-z0-9_]`` with ``_``, so
    ``orders-eu``, ``orders.eu`` and ``orders_eu`` would share one table; two topics must never
    mix their rows (nor their committed offsets) by accident.
    """
    if not config.enabled:
        return None
    ident = identifier(config, topic)
    for other in sorted(others, key=lambda view: view.name):
        if other.name == topic:
            continue
        try:
            theirs = TableTopicConfig.from_topic_configs(dict(other.configs), other.name)
        except ValueError:
            continue
        if theirs.enabled and identifier(theirs, other.name) == ident:
            return (
                f"topic {other.name} already writes table {ident[0]}.{ident[1]} (a table name is the "
                f"topic name with every character outside [A-Za-z0-9_] replaced by _); set {TABLE_NAME} "
                f"to give topic {topic} a table of its own"
            )
    return None


def _arrow_has(schema: pa.Schema, path: str) -> bool:
    head, *rest = path.split(".")
    index = schema.get_field_index(head)
    if index < 0:
        return False
    kind = schema.field(index).type
    for name in rest:
        if not pa.types.is_struct(kind) or kind.get_field_index(name) < 0:
            return False
        kind = kind.field(name).type
    return True


def missing_partition_columns(schema: pa.Schema, config: TableTopicConfig) -> list[str]:
    """The ``partition.by`` columns ``schema`` (the rows' or the table's) lacks.

    Empty while the rows carry no value column at all (no record of the first batch could be
    decoded, so the table was created from the ``_kafka_*`` columns): the value's columns are not
    known yet, and the spec is completed once they are.
    """
    values = [f.name for f in schema if not f.name.startswith("_kafka_") and f.name != CDC_COLUMN]
    if not values:
        return []
    return [str(p) for p in config.partition_by if not _arrow_has(schema, p.column)]


def partition_error(topic: str, schema: pa.Schema, missing: Sequence[str]) -> str:
    columns = ", ".join(f.name for f in schema)
    return (
        f"{PARTITION_BY}: {', '.join(missing)} of topic {topic} names a column the rows do not have "
        f"(columns: {columns}); change {PARTITION_BY}"
    )


def check_topic_configs(
    topic: str, configs: Mapping[str, str], others: Iterable[TopicView], catalog: Catalog | None
) -> None:
    """Checks of a table topic's configs that need the node's state, for CreateTopics and
    AlterConfigs (the broker answers INVALID_CONFIG with the message): the table name is not
    another table topic's, and ``partition.by`` names columns the table has when the table exists.

    Raises:
        ValueError: naming the key to change.
    """
    config = TableTopicConfig.from_topic_configs(configs, topic)
    conflict = table_owner_conflict(topic, config, others)
    if conflict is not None:
        raise ValueError(conflict)
    if catalog is None or not config.enabled or not config.partition_by:
        return
    try:
        table = catalog.load_table(identifier(config, topic))
    except NoSuchTableError:
        return  # the schema is known at the first commit, which checks it then
    except Exception as exc:  # the catalog unreachable: the first commit checks it instead
        log.warning("topic %s: cannot check %s against the table now: %s", topic, PARTITION_BY, exc)
        return
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    schema = schema_to_pyarrow(table.schema(), include_field_ids=False)
    missing = missing_partition_columns(schema, config)
    if missing:
        raise ValueError(partition_error(topic, schema, missing))


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
                properties=creation_properties(config),
            )
            log.info("created Iceberg table %s.%s", *ident)
            return table
        except TableAlreadyExistsError:
            table = catalog.load_table(ident)  # created meanwhile (a previous run); evolve it below
    changes = evolve_table_schema(table, arrow_schema)
    if changes:
        log.info("evolved schema of %s.%s: %s", *ident, "; ".join(str(c) for c in changes))
    return table


def table_for_batches(
    catalog: Catalog,
    ident: tuple[str, str],
    table: Table | None,
    batches: Sequence[pa.RecordBatch],
    config: TableTopicConfig,
) -> Table:
    """The table created or evolved to hold every one of ``batches`` (their schemas unified), loaded
    again for the evolved schema: what the operations that write their own rows outside the
    pipeline (rebuild, redrive) do before writing them.

    Raises:
        SchemaConflict: the batches' schemas cannot be unified.
        IncompatibleTableSchema: the data changed a column in a way Iceberg cannot evolve.
    """
    ensure_schema(catalog, ident, table, unify_schemas([b.schema for b in batches]), config)
    return catalog.load_table(ident)


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


def merge_keys(config: TableTopicConfig, table: Table) -> tuple[str, ...]:
    """The columns an upsert/CDC MERGE matches rows on (dotted paths for nested fields)."""
    if config.id_columns_from_debezium_key:
        key = table.schema().find_field(KEY_COLUMN)
        if not isinstance(key.field_type, StructType):
            raise IncompatibleTableSchema(
                f"{table.name()}: id.columns=[{FROM_DEBEZIUM_KEY}] needs a record key, found {key.field_type}"
            )
        return tuple(f"{KEY_COLUMN}.{f.name}" for f in key.field_type.fields)
    return config.id_columns


def delete_column(config: TableTopicConfig) -> str | None:
    """The column whose ``D`` marks a delete: ``cdc.field``, or ``_cdc.op`` for Debezium envelopes."""
    if config.cdc_field:
        return config.cdc_field
    if config.value_transform is TransformType.FLATTEN_DEBEZIUM:
        return "_cdc.op"
    return None


def remove_files(table: Table, paths: Sequence[str]) -> None:
    """Best-effort removal of staged files (an orphan left behind costs only storage)."""
    for path in paths:
        try:
            table.io.delete(path)
        except Exception as exc:  # cleanup must never fail a commit
            log.warning("could not remove staged file %s: %s", path, exc)
