"""``transform.value.type=flatten_debezium``: Debezium change events -> row images plus ``_cdc``.

A Debezium value is an envelope ``{before, after, source, op, ts_ms, transaction}`` with ``op`` one of
``c`` (create), ``r`` (snapshot read), ``u`` (update), ``d`` (delete), ``t`` (truncate) or ``m``
(message). The row written is ``after``, or ``before`` for deletes; ``_cdc.op`` is I, U or D (so
``cdc.field=_cdc.op`` drives upserts), ``_cdc.ts`` the event time (``ts_ms``), ``_cdc.offset`` the
Kafka offset and ``_cdc.source`` ``db.table`` (schema included when present) from the source block.

Tombstones (null values, which Debezium sends after a delete for log compaction) and truncate/message
events carry no row and are dropped silently; an envelope missing the row image it needs fails.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.table.convert.unify import SchemaConflict, conform_array, unify_types

CDC_TYPE = pa.struct(
    [
        pa.field("op", pa.string()),
        pa.field("ts", pa.int64()),
        pa.field("offset", pa.int64()),
        pa.field("source", pa.string()),
    ]
)
_OPS = {"c": "I", "r": "I", "u": "U", "d": "D"}
_SILENT = {"t", "m"}


def flatten_debezium(
    envelopes: pa.StructArray, offsets: pa.Array
) -> tuple[pa.Array, pa.Array, list[bool], dict[int, str]]:
    """Split envelopes into row images and ``_cdc`` values.

    Returns:
        ``(rows, cdc, drop, failures)``: rows (a struct array) and cdc aligned with the input;
        ``drop[i]`` marks rows to leave out silently; ``failures`` maps index to reason.
    """
    n = len(envelopes)
    names = {envelopes.type.field(i).name for i in range(envelopes.type.num_fields)}
    if "op" not in names or not ({"after", "before"} & names):
        reason = "value is not a Debezium envelope (needs op and before/after)"
        return pa.nulls(n, pa.struct([])), pa.nulls(n, CDC_TYPE), [False] * n, dict.fromkeys(range(n), reason)
    image_type = envelopes.type.field("after" if "after" in names else "before").type
    if {"after", "before"} <= names and envelopes.type.field("before").type != image_type:
        # Schemas that declare the two images separately (JSON Schema) may differ slightly.
        try:
            image_type = unify_types(envelopes.type.field("before").type, image_type, "before/after")
        except SchemaConflict as exc:
            reason = f"Debezium before and after images have conflicting types: {exc}"
            return (
                pa.nulls(n, pa.struct([])),
                pa.nulls(n, CDC_TYPE),
                [False] * n,
                dict.fromkeys(range(n), reason),
            )
    after = conform_array(_child(envelopes, "after", image_type, names), image_type)
    before = conform_array(_child(envelopes, "before", image_type, names), image_type)
    ops: list[Any] = _child(envelopes, "op", pa.string(), names).to_pylist()
    valid = envelopes.is_valid().to_pylist()
    after_ok = after.is_valid().to_pylist()
    before_ok = before.is_valid().to_pylist()

    drop = [False] * n
    failures: dict[int, str] = {}
    cdc_ops: list[str | None] = [None] * n
    is_delete = [False] * n
    for i in range(n):
        if not valid[i]:
            drop[i] = True
            continue
        op = ops[i]
        if op in _SILENT:
            drop[i] = True
            continue
        mapped = _OPS.get(op) if isinstance(op, str) else None
        if mapped is None:
            failures[i] = f"unknown Debezium op {op!r}"
            continue
        cdc_ops[i] = mapped
        if mapped == "D":
            is_delete[i] = True
            if not before_ok[i]:
                failures[i] = "Debezium delete event without 'before' (enable REPLICA IDENTITY FULL or keys)"
        elif not after_ok[i]:
            failures[i] = f"Debezium '{op}' event without 'after'"

    rows = pc.if_else(pa.array(is_delete, pa.bool_()), before, after)
    ts = _timestamps(envelopes, names, n)
    cdc = pa.StructArray.from_arrays(
        [pa.array(cdc_ops, pa.string()), ts, offsets.cast(pa.int64()), _sources(envelopes, names, n)],
        fields=list(CDC_TYPE),
    )
    return rows, cdc, drop, failures


def _child(envelopes: pa.StructArray, name: str, type_: pa.DataType, names: set[str]) -> pa.Array:
    if name not in names:
        return pa.nulls(len(envelopes), type_)
    return envelopes.field(name)


def _timestamps(envelopes: pa.StructArray, names: set[str], n: int) -> pa.Array:
    for name in ("ts_ms", "ts_us", "ts_ns"):
        if name in names:
            try:
                values = envelopes.field(name).cast(pa.int64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return pa.nulls(n, pa.int64())  # an odd ts field must not cost the rows
            if name == "ts_us":
                values = pc.divide(values, 1000)
            elif name == "ts_ns":
                values = pc.divide(values, 1_000_000)
            return values
    return pa.nulls(n, pa.int64())


def _sources(envelopes: pa.StructArray, names: set[str], n: int) -> pa.Array:
    if "source" not in names or not pa.types.is_struct(envelopes.type.field("source").type):
        return pa.nulls(n, pa.string())
    out: list[str | None] = []
    for src in envelopes.field("source").to_pylist():
        if not src:
            out.append(None)
            continue
        parts = [str(src[k]) for k in ("db", "schema", "table") if src.get(k) is not None]
        out.append(".".join(parts) if parts else (str(src.get("name")) if src.get("name") else None))
    return pa.array(out, pa.string())


def id_columns_from_key(schema: pa.Schema, key_column: str = "_kafka_key") -> tuple[str, ...]:
    """``id.columns=[_from_debezium_key_]``: Debezium keys are a struct of the source table's
    primary-key columns, which also appear in the flattened row — those become the id columns.

    Raises:
        ValueError: the key column is missing or not a struct (the key converter is not schema-based).
    """
    index = schema.get_field_index(key_column)
    if index < 0 or not pa.types.is_struct(schema.field(index).type):
        raise ValueError(
            "automq.table.topic.id.columns=[_from_debezium_key_] needs a schema-based record key, "
            f"got {schema.field(index).type if index >= 0 else 'no key column'}"
        )
    key_type = schema.field(index).type
    names = tuple(key_type.field(i).name for i in range(key_type.num_fields))
    missing = [n for n in names if schema.get_field_index(n) < 0]
    if missing:
        raise ValueError(f"Debezium key columns {missing} are not columns of the row")
    return names
