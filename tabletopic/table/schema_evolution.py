"""Iceberg schemas and partition specs for table topics, and their evolution as data changes.

The Spark job converts a task's records to Arrow (:mod:`tabletopic.table.convert`), unifies the
tasks' schemas, and before committing asks :func:`plan_schema_update` what the table needs. Only the
changes Iceberg allows in place are planned — adding optional columns (top level and inside structs,
also structs inside lists and maps), making a required column optional, and widening int -> long,
float -> double, decimal(P, S) -> decimal(P', S) with P' > P. Anything else raises
:class:`IncompatibleSchemaChange`, naming the column, so the commit fails loudly instead of writing
data the table cannot hold.

Data *narrower* than its column (an int arriving for a long column, a column absent from the new
data) needs no change: the writer widens it or writes nulls.

The plan is pure data (:class:`SchemaChange` items); :func:`apply_schema_update` applies it through
pyiceberg's ``table.update_schema()`` in one metadata commit, which the catalog makes atomic.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.partitioning import PartitionField as IcebergPartitionField
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema, assign_fresh_schema_ids
from pyiceberg.table import Table
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import (
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StructType,
)

from tabletopic.table.table_config import (
    FROM_DEBEZIUM_KEY,
    ID_COLUMNS,
    PARTITION_BY,
    PartitionField,
    PartitionTransform,
)

log = logging.getLogger(__name__)

PARTITION_FIELD_ID_START = 1000


class IncompatibleTableSchema(ValueError):
    """The table cannot take the topic's data; the message names the column and why."""


class IncompatibleSchemaChange(IncompatibleTableSchema):
    """New data needs a column change Iceberg cannot make in place (type change or narrowing)."""

    def __init__(self, path: str, current: IcebergType, new: IcebergType, why: str = "") -> None:
        detail = f": {why}" if why else ""
        super().__init__(f"column {path} is {current} in the table but {new} in the new data{detail}")
        self.path = path
        self.current = current
        self.new = new


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """One step of a schema update. ``path`` is a tuple of names (``element``/``value`` step into
    lists and maps, as pyiceberg names them)."""

    kind: Literal["add", "widen", "make_optional"]
    path: tuple[str, ...]
    type: IcebergType | None = None

    def __str__(self) -> str:
        name = ".".join(self.path)
        if self.kind == "add":
            return f"add {name} {self.type}"
        if self.kind == "widen":
            return f"widen {name} to {self.type}"
        return f"make {name} optional"


def arrow_to_iceberg_schema(arrow_schema: pa.Schema, id_columns: Sequence[str] = ()) -> Schema:
    """An Iceberg schema with fresh field ids for ``arrow_schema``.

    Every column is optional (records of later schema versions may lack any of them) except the
    ``id.columns``, which Iceberg requires to be required and become the identifier fields.

    Raises:
        ValueError: an id column does not exist (naming ``automq.table.topic.id.columns``).
    """
    converted = Catalog._convert_schema_if_needed(arrow_schema)
    fresh = assign_fresh_schema_ids(converted)
    fields = [_optional(f) for f in fresh.fields]
    schema = Schema(*fields, schema_id=0)
    if not id_columns:
        return schema
    required_paths = set()
    for column in id_columns:
        field = schema.find_field(column, case_sensitive=True) if _has(schema, column) else None
        if field is None:
            raise ValueError(f"{ID_COLUMNS}: column {column!r} does not exist in the table schema")
        if not isinstance(field.field_type, PrimitiveType) or isinstance(
            field.field_type, FloatType | DoubleType
        ):
            raise ValueError(
                f"{ID_COLUMNS}: column {column!r} of type {field.field_type} cannot identify rows"
            )
        required_paths.add(column)
    fields = [_require(f, "", required_paths) for f in schema.fields]
    ids = [schema.find_field(c).field_id for c in id_columns]
    return Schema(*fields, schema_id=0, identifier_field_ids=ids)


def _has(schema: Schema, column: str) -> bool:
    try:
        schema.find_field(column, case_sensitive=True)
    except ValueError:
        return False
    return True


def _optional(field: NestedField) -> NestedField:
    return NestedField(
        field.field_id, field.name, _optional_type(field.field_type), required=False, doc=field.doc
    )


def _optional_type(t: IcebergType) -> IcebergType:
    if isinstance(t, StructType):
        return StructType(*(_optional(f) for f in t.fields))
    if isinstance(t, ListType):
        return ListType(t.element_id, _optional_type(t.element_type), element_required=False)
    if isinstance(t, MapType):
        return MapType(t.key_id, t.key_type, t.value_id, _optional_type(t.value_type), value_required=False)
    return t


def _require(field: NestedField, prefix: str, paths: set[str]) -> NestedField:
    """Make the fields on the way to each identifier path required (Iceberg demands it)."""
    name = f"{prefix}{field.name}"
    wanted = any(p == name or p.startswith(name + ".") for p in paths)
    if not wanted:
        return field
    field_type = field.field_type
    if isinstance(field_type, StructType):
        field_type = StructType(*(_require(f, name + ".", paths) for f in field_type.fields))
    return NestedField(field.field_id, field.name, field_type, required=True, doc=field.doc)


def plan_schema_update(current: Schema, new: pa.Schema) -> list[SchemaChange]:
    """The changes that make ``current`` able to hold data of ``new`` (empty when none are needed).

    Raises:
        IncompatibleSchemaChange: a column's type changed in a way Iceberg cannot evolve.
    """
    incoming = Catalog._convert_schema_if_needed(new)
    planner = _Planner(set(current.identifier_field_ids))
    planner.struct(current.as_struct(), incoming.as_struct(), ())
    return planner.changes


class _Planner:
    def __init__(self, identifiers: set[int]) -> None:
        self.identifiers = identifiers
        self.changes: list[SchemaChange] = []

    def struct(self, current: StructType, new: StructType, path: tuple[str, ...]) -> None:
        existing = {f.name: f for f in current.fields}
        for field in new.fields:
            here = (*path, field.name)
            old = existing.get(field.name)
            if old is None:
                self.changes.append(SchemaChange("add", here, _optional_type(field.field_type)))
                continue
            # Identifier columns stay required (Iceberg demands it); a null id fails its row at write.
            if old.required and not field.required and old.field_id not in self.identifiers:
                self.changes.append(SchemaChange("make_optional", here))
            self.type(old.field_type, field.field_type, here)

    def type(self, old: IcebergType, new: IcebergType, path: tuple[str, ...]) -> None:
        if old == new:
            return
        if isinstance(old, StructType) and isinstance(new, StructType):
            self.struct(old, new, path)
            return
        if isinstance(old, ListType) and isinstance(new, ListType):
            self.type(old.element_type, new.element_type, (*path, "element"))
            return
        if isinstance(old, MapType) and isinstance(new, MapType):
            if old.key_type != new.key_type:
                raise IncompatibleSchemaChange(".".join(path), old, new, "map key types differ")
            self.type(old.value_type, new.value_type, (*path, "value"))
            return
        if isinstance(old, PrimitiveType) and isinstance(new, PrimitiveType):
            if _fits(new, old):
                return  # narrower data is written widened
            if _fits(old, new):
                self.changes.append(SchemaChange("widen", path, new))
                return
        raise IncompatibleSchemaChange(
            ".".join(path), old, new, "Iceberg only widens int->long, float->double, decimal precision"
        )


def _fits(narrow: IcebergType, wide: IcebergType) -> bool:
    """Whether ``narrow`` values can be stored in a ``wide`` column by Iceberg's promotion rules."""
    if narrow == wide:
        return True
    if isinstance(narrow, IntegerType) and isinstance(wide, LongType):
        return True
    if isinstance(narrow, FloatType) and isinstance(wide, DoubleType):
        return True
    return (
        isinstance(narrow, DecimalType)
        and isinstance(wide, DecimalType)
        and narrow.scale == wide.scale
        and narrow.precision <= wide.precision
    )


def apply_schema_update(table: Table, changes: Sequence[SchemaChange]) -> Table:
    """Apply planned changes in one schema commit; returns the refreshed table."""
    if not changes:
        return table
    with table.update_schema() as update:
        for change in changes:
            if change.kind == "add":
                assert change.type is not None
                update.add_column(change.path, change.type)
            elif change.kind == "widen":
                update.update_column(change.path, field_type=change.type)
            else:
                update.make_column_optional(change.path)
    return table.refresh()


def evolve_table_schema(table: Table, new: pa.Schema) -> list[SchemaChange]:
    """Plan and apply what ``new`` data needs; returns the applied changes (possibly none)."""
    changes = plan_schema_update(table.schema(), new)
    apply_schema_update(table, changes)
    return changes


# ------------------------------------------------------------------------------------ partitioning


def _transform(field: PartitionField) -> Transform:  # type: ignore[type-arg]
    kind = field.transform
    if kind is PartitionTransform.BUCKET:
        return BucketTransform(num_buckets=field.arg or 16)
    if kind is PartitionTransform.TRUNCATE:
        return TruncateTransform(width=field.arg or 1)
    return {
        PartitionTransform.IDENTITY: IdentityTransform(),
        PartitionTransform.YEAR: YearTransform(),
        PartitionTransform.MONTH: MonthTransform(),
        PartitionTransform.DAY: DayTransform(),
        PartitionTransform.HOUR: HourTransform(),
    }[kind]


def partition_field_name(field: PartitionField) -> str:
    """Iceberg's default partition field names (Java's ``PartitionSpec.Builder``, which AutoMQ uses):
    ``region``, ``ts_month``, ``name_bucket``, ``name_trunc`` — so tables created by AutoMQ and by
    us evolve alike."""
    kind = field.transform
    if kind is PartitionTransform.IDENTITY:
        return field.column
    if kind is PartitionTransform.TRUNCATE:
        return f"{field.column}_trunc"
    return f"{field.column}_{kind}"


def build_partition_spec(schema: Schema, fields: Sequence[PartitionField]) -> PartitionSpec:
    """The ``partition.by`` config as an Iceberg spec over ``schema``.

    Raises:
        ValueError: a column is missing or its type cannot take the transform (names the key).
    """
    spec_fields = []
    for i, field in enumerate(fields):
        source, transform = _resolve(schema, field)
        spec_fields.append(
            IcebergPartitionField(
                source_id=source.field_id,
                field_id=PARTITION_FIELD_ID_START + i,
                transform=transform,
                name=partition_field_name(field),
            )
        )
    return PartitionSpec(*spec_fields, spec_id=0)


def _resolve(schema: Schema, field: PartitionField) -> tuple[NestedField, Transform]:  # type: ignore[type-arg]
    if not _has(schema, field.column):
        raise ValueError(f"{PARTITION_BY}: column {field.column!r} does not exist in the table schema")
    source = schema.find_field(field.column, case_sensitive=True)
    transform = _transform(field)
    if not transform.can_transform(source.field_type):
        raise ValueError(
            f"{PARTITION_BY}: {field} cannot apply to column {field.column!r} of type {source.field_type}"
        )
    return source, transform


def evolve_partition_spec(table: Table, fields: Sequence[PartitionField]) -> bool:
    """Bring the table's spec in line with a changed ``partition.by`` (new data files use the new
    spec; old files keep theirs, as Iceberg intends). Returns whether anything changed.

    As in AutoMQ, an entry whose column the table does not have (yet) is skipped rather than
    failing every commit; it is added by a later call once data brought the column.

    Raises:
        ValueError: a transform cannot apply to its column's type (names ``partition.by``).
    """
    schema = table.schema()
    wanted = {}
    for field in fields:
        if not _has(schema, field.column):
            continue
        source, transform = _resolve(schema, field)
        wanted[(source.field_id, str(transform))] = (field, transform)
    current = {(f.source_id, str(f.transform)): f for f in table.spec().fields}
    if set(wanted) == set(current):
        return False
    with table.update_spec() as update:
        for key, old in current.items():
            if key not in wanted:
                update.remove_field(old.name)
        for key, (field, transform) in wanted.items():
            if key not in current:
                update.add_field(field.column, transform, partition_field_name(field))
    table.refresh()
    return True


def create_table_for_topic(
    catalog: Catalog,
    identifier: tuple[str, str],
    arrow_schema: pa.Schema,
    partition_by: Sequence[PartitionField] = (),
    id_columns: Sequence[str] = (),
    properties: dict[str, str] | None = None,
) -> Table:
    """Create the Iceberg table of a table topic (the namespace must exist).

    The first rows may not have every configured column yet (the table can be created from the
    ``_kafka_*`` columns alone when no record of the first batch decoded): partition fields on
    missing columns are left for :func:`evolve_partition_spec` to add later, as AutoMQ does, and
    missing id columns are left out of the identifier fields. ``[_from_debezium_key_]`` resolves to
    the record key's fields. Type problems still raise ``ValueError`` naming the config key.
    """
    preliminary = Catalog._convert_schema_if_needed(arrow_schema)
    if tuple(id_columns) == (FROM_DEBEZIUM_KEY,):
        from tabletopic.table.convert.debezium import id_columns_from_key

        try:
            id_columns = id_columns_from_key(arrow_schema)
        except ValueError:
            id_columns = ()
    present_ids = [c for c in id_columns if _has(preliminary, c)]
    missing = [c for c in id_columns if c not in present_ids]
    if missing:
        log.warning(
            "table %s: id columns %s not in the first rows; no identifier fields set", identifier, missing
        )
        present_ids = []
    schema = arrow_to_iceberg_schema(arrow_schema, present_ids)
    spec = build_partition_spec(schema, [f for f in partition_by if _has(schema, f.column)])
    return catalog.create_table(identifier, schema=schema, partition_spec=spec, properties=properties or {})
