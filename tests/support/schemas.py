"""An in-memory SchemaLookup and encoders producing real Confluent wire-format payloads."""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import fastavro

from tabletopic.schema_registry.lookup import RegisteredSchema, SchemaNotFound


class MemoryLookup:
    def __init__(self) -> None:
        self.by_id_calls = 0
        self._ids: dict[int, RegisteredSchema] = {}
        self._subjects: dict[str, list[RegisteredSchema]] = {}

    def register(self, subject: str, schema_type: str, text: str | dict[str, Any]) -> int:
        if not isinstance(text, str):
            text = json.dumps(text)
        schema_id = len(self._ids) + 1
        versions = self._subjects.setdefault(subject, [])
        schema = RegisteredSchema(schema_id, schema_type, text, (), subject, len(versions) + 1)
        self._ids[schema_id] = schema
        versions.append(schema)
        return schema_id

    def by_id(self, schema_id: int) -> RegisteredSchema:
        self.by_id_calls += 1
        try:
            return self._ids[schema_id]
        except KeyError:
            raise SchemaNotFound(f"schema {schema_id}") from None

    def subjects_of(self, schema_id: int) -> list[str]:
        return [
            s for s, versions in self._subjects.items() if any(v.schema_id == schema_id for v in versions)
        ]

    def latest(self, subject: str) -> RegisteredSchema:
        try:
            return self._subjects[subject][-1]
        except KeyError:
            raise SchemaNotFound(subject) from None


def avro_bytes(schema: dict[str, Any], record: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def wire(schema_id: int, body: bytes, indexes: bytes = b"") -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + indexes + body


TIMESTAMP_MILLIS = {"type": "long", "logicalType": "timestamp-millis"}


def avro_record(
    name: str,
    fields: Mapping[str, Any],
    namespace: str | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An Avro record schema from ``{field name: Avro type}`` in field order, so a test states its
    fields in a line instead of a block of ``{"name": ..., "type": ...}`` dicts.

    Args:
        name: the record's name.
        fields: each field's name and Avro type (a primitive name, a union list, or a schema dict).
        namespace: the record's namespace, if any.
        defaults: default values of the fields that have one.

    Returns:
        The schema as the JSON-like dict fastavro and the registry take.
    """
    defaults = defaults or {}
    schema: dict[str, Any] = {"type": "record", "name": name}
    if namespace is not None:
        schema["namespace"] = namespace
    schema["fields"] = [
        {"name": field, "type": kind, **({"default": defaults[field]} if field in defaults else {})}
        for field, kind in fields.items()
    ]
    return schema


def debezium_envelope(row: dict[str, Any], namespace: str, null_defaults: bool = True) -> dict[str, Any]:
    """A Debezium change-event envelope (Avro) around the record schema ``row``: the before and
    after images, the source, ``op`` and ``ts_ms``.

    Args:
        row: the row's record schema (its name is what ``after`` refers to).
        namespace: the envelope's namespace (Debezium's: server.database.table).
        null_defaults: whether the optional fields default to null, as Debezium's converter writes
            them (some hand-written envelopes leave the defaults out).
    """
    source = avro_record("Source", {"db": "string", "table": "string"})
    fields = {"before": ["null", row], "after": ["null", row["name"]], "source": source, "op": "string"}
    fields["ts_ms"] = ["null", "long"]
    defaults = {"before": None, "after": None, "ts_ms": None} if null_defaults else None
    return avro_record("Envelope", fields, namespace=namespace, defaults=defaults)


def proto_message_classes(
    files: Sequence[tuple[str, str, Mapping[str, Mapping[str, str]]]],
) -> dict[str, type]:
    """Protobuf message classes built from descriptors in code (no protoc), as an application
    holding generated classes would have them.

    Args:
        files: ``(file name, package, {message: {field: type}})`` in dependency order (a file may
            use the messages of the files before it); fields are optional proto3 fields numbered
            from 1 in order, a type is a scalar name (``int64``, ``string``...) or ``.package.Message``.

    Returns:
        ``{"package.Message": class}`` of every message.
    """
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    kinds = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    names: list[str] = []
    earlier: list[str] = []
    for file_name, package, messages in files:
        proto = descriptor_pb2.FileDescriptorProto(name=file_name, package=package, syntax="proto3")
        proto.dependency.extend(earlier)
        for message_name, fields in messages.items():
            message = proto.message_type.add(name=message_name)
            for number, (field, kind) in enumerate(fields.items(), start=1):
                typed = (
                    {"type": kinds.TYPE_MESSAGE, "type_name": kind}
                    if kind.startswith(".")
                    else {"type": getattr(kinds, f"TYPE_{kind.upper()}")}
                )
                message.field.add(name=field, number=number, label=kinds.LABEL_OPTIONAL, **typed)
            names.append(f"{package}.{message_name}")
        pool.Add(proto)
        earlier.append(file_name)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name)) for name in names}


# A Debezium change-event envelope (Avro) around a two-column row, as Debezium's Avro converter
# writes it.
DEBEZIUM_ROW = avro_record(
    "Value", {"id": "int", "email": "string"}, namespace="dbserver.inventory.customers"
)
DEBEZIUM_ENVELOPE = debezium_envelope(DEBEZIUM_ROW, "dbserver.inventory.customers")


# A user record and its evolution (id widened to long, an optional email, a decimal balance): what
# the conversion and schema-evolution tests evolve a table through.
USER_V1 = avro_record("User", {"id": "int", "name": "string", "created": TIMESTAMP_MILLIS}, namespace="shop")
USER_V2 = {
    **USER_V1,
    "fields": [
        {"name": "id", "type": "long"},
        *USER_V1["fields"][1:],
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "balance", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    ],
}
