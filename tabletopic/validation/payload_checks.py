"""Payload checks of broker-side schema validation, one per format, each over a whole group of
payloads written with one schema (and, for Protobuf, one message path).

Avro is checked for the whole group at once by :mod:`tabletopic.validation.avro_columns` (positions only,
no values); the datums it refuses are decoded again one by one with the table pipeline's per-record
decoder, which says why (and has the last word: a datum it reads is accepted). JSON Schema documents
are decoded as one newline-delimited block by msgspec when the schema is a plain record shape
(:mod:`tabletopic.validation.json_columns`), else (and to find the culprits) per record with
``jsonschema``. Protobuf payloads of a group of more than a few hundred are parsed as the items of
one wrapper message in a single upb call, and per record when fewer or when that does not come out
clean. That read takes the payloads in place in the records block
(:mod:`tabletopic.validation.payload_streams`), never one ``bytes`` each.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tabletopic.schema_registry.lookup import RegisteredSchema
from tabletopic.validation.payload_streams import protobuf_items

Ints = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Payloads:
    """A group of encoded values (wire prefix already cut off): ``raw[starts[i]:ends[i]]``;
    ``data`` is ``raw`` as NumPy bytes with 16 bytes of padding after it."""

    raw: bytes
    data: npt.NDArray[np.uint8]
    starts: Ints
    ends: Ints

    def __len__(self) -> int:
        return len(self.starts)

    def as_bytes(self, rows: Sequence[int] | None = None) -> list[bytes]:
        """The payloads (or those at ``rows``) as ``bytes`` objects."""
        raw = self.raw
        starts, ends = (self.starts, self.ends) if rows is None else (self.starts[rows], self.ends[rows])
        return [raw[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


# ``{index in the group: reason}`` for the payloads that do not decode.
Check = Callable[[Payloads], dict[int, str]]


def record_name(schema: RegisteredSchema, indexes: Sequence[int] = (0,)) -> str:
    """The name RecordNameStrategy gives a schema: Avro's full name, JSON Schema's ``title``,
    the Protobuf message's full name."""
    kind = (schema.schema_type or "AVRO").upper()
    if kind == "PROTOBUF":
        from tabletopic.schema_registry.formats.protobuf import message_descriptor_for

        return str(message_descriptor_for(schema, list(indexes)).full_name)
    parsed = json.loads(schema.schema)
    if kind == "JSON":
        title = parsed.get("title") if isinstance(parsed, dict) else None
        return str(title) if title else "JsonSchema"
    if isinstance(parsed, dict):
        name = str(parsed.get("name", parsed.get("type", "")))
        namespace = parsed.get("namespace")
        return f"{namespace}.{name}" if namespace and "." not in name else name
    return str(parsed)


def build_check(schema: RegisteredSchema, indexes: Sequence[int] = (0,)) -> Check:
    """A whole-group payload check for one schema (Protobuf: one message path)."""
    kind = (schema.schema_type or "AVRO").upper()
    if kind == "AVRO":
        return _avro_check(schema)
    if kind == "JSON":
        return _json_check(schema)
    if kind == "PROTOBUF":
        return _protobuf_check(schema, indexes)
    raise ValueError(f"unsupported schema type {schema.schema_type!r}")


def _avro_check(schema: RegisteredSchema) -> Check:
    from tabletopic.table.convert.avro import AvroDecoder, parse_avro_schema
    from tabletopic.validation.avro_columns import compile_validator

    per_record = AvroDecoder(schema.schema, schema.references, native=False)
    validate = compile_validator(parse_avro_schema(schema.schema, schema.references))

    def check_avro(payloads: Payloads) -> dict[int, str]:
        if validate is None:
            return per_record.decode(payloads.as_bytes())[1]
        suspects = np.flatnonzero(validate(payloads.data, payloads.starts, payloads.ends)).tolist()
        if not suspects:
            return {}
        failures = per_record.decode(payloads.as_bytes(suspects))[1]
        return {suspects[j]: reason for j, reason in failures.items()}

    return check_avro


def _json_check(schema: RegisteredSchema) -> Check:
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7

    root = json.loads(schema.schema)
    resources = [
        (name, Resource.from_contents(json.loads(text), default_specification=DRAFT7))
        for name, text in schema.references
    ]
    registry: Registry[Any] = Registry().with_resources(resources)
    cls = jsonschema.validators.validator_for(root, default=jsonschema.Draft7Validator)
    validator = cls(root, registry=registry)
    loads = json.loads
    is_valid = validator.is_valid

    from tabletopic.validation.json_columns import compile_all_valid

    # Whole-group answer "all valid" in one msgspec decode where the schema allows it.
    all_valid = None if schema.references else compile_all_valid(root)

    def check_json(payloads: Payloads) -> dict[int, str]:
        documents = payloads.as_bytes()
        # Joined: blanking the framing between them in place measured no cheaper than a join.
        if all_valid is not None and all_valid(b"\n".join(documents), len(documents)):
            return {}
        failures: dict[int, str] = {}
        for i, payload in enumerate(documents):
            try:
                document = loads(payload)
            except (ValueError, UnicodeDecodeError) as exc:
                failures[i] = f"invalid JSON: {exc}"
                continue
            if not is_valid(document):
                error = jsonschema.exceptions.best_match(validator.iter_errors(document))
                where = "/".join(str(p) for p in error.absolute_path) if error is not None else ""
                reason = error.message if error is not None else "does not match"
                failures[i] = f"JSON does not match the schema at /{where}: {reason}"
        return failures

    return check_json


_FEW = 256


def _protobuf_check(schema: RegisteredSchema, indexes: Sequence[int]) -> Check:
    from google.protobuf import message_factory
    from google.protobuf.unknown_fields import UnknownFieldSet

    from tabletopic.schema_registry.formats.protobuf import message_descriptor_for

    descriptor = message_descriptor_for(schema, list(indexes))
    # One message object, parsed into again and again: no allocation per record.
    message = message_factory.GetMessageClass(descriptor)()
    parse = message.ParseFromString
    wrapper = _protobuf_wrapper(descriptor)
    required = _has_required(descriptor, set())
    nested = any(field.message_type is not None for field in descriptor.fields)

    def all_valid(payloads: Payloads) -> bool:
        """The whole group in one upb parse (see :mod:`tabletopic.validation.payload_streams`): all
        valid when it parses, every message is initialised and, with unknown fields (at any depth)
        dropped, re-encodes to exactly as many bytes as it was given. False: look per record (a
        non-canonical but valid encoding also lands there)."""
        if wrapper is None:
            return False
        body = protobuf_items(payloads.data, payloads.starts, payloads.ends)
        if body is None:
            return False
        try:
            wrapper.ParseFromString(body)
        except Exception:  # DecodeError, upb's RuntimeError on bad UTF-8
            return False
        try:
            if required and not wrapper.IsInitialized():  # proto2 ``required`` fields
                return False
            wrapper.DiscardUnknownFields()
            return bool(wrapper.ByteSize() == len(body))
        finally:
            wrapper.Clear()

    def check_protobuf(payloads: Payloads) -> dict[int, str]:
        # Up to a few hundred messages, one by one costs less than laying out and parsing the
        # wrapper (~0.35 µs a flat message against ~0.25 µs + 40 µs).
        if len(payloads) > _FEW and all_valid(payloads):
            return {}
        failures: dict[int, str] = {}
        for i, payload in enumerate(payloads.as_bytes()):
            try:
                parse(payload)
            except Exception as exc:  # DecodeError, and upb's RuntimeError on bad UTF-8
                failures[i] = f"invalid Protobuf: {exc}"
                continue
            # Bytes the schema has no field for parse as "unknown fields" (at any depth); a payload
            # written with this very schema has none, so they are garbage (or the wrong schema id).
            where = _unknown_fields_at(message, "", top=True) if nested else None
            if len(UnknownFieldSet(message)) or where is not None:
                failures[i] = f"invalid Protobuf: fields the schema does not have{where or ''}"
        message.Clear()
        return failures

    return check_protobuf


def _unknown_fields_at(message: Any, path: str, top: bool = False) -> str | None:
    """`` in <path>`` of the first message below ``message`` holding unknown fields, else None
    (``message`` itself is the caller's to check)."""
    from google.protobuf.unknown_fields import UnknownFieldSet

    if not top and len(UnknownFieldSet(message)):
        return f" in {path}"
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            values = value.values() if field.message_type.fields_by_name["value"].message_type else ()
        elif field.is_repeated:
            values = value
        else:
            values = (value,)
        for number, item in enumerate(values):
            name = f"{path}.{field.name}" if path else field.name
            where = _unknown_fields_at(item, f"{name}[{number}]" if field.is_repeated else name)
            if where is not None:
                return where
    return None


def _has_required(descriptor: Any, seen: set[str]) -> bool:
    """Whether a message type or any it contains has a proto2 ``required`` field."""
    if descriptor.full_name in seen:
        return False
    seen.add(descriptor.full_name)
    for field in descriptor.fields:
        if field.is_required:
            return True
        if field.message_type is not None and _has_required(field.message_type, seen):
            return True
    return False


def _protobuf_wrapper(descriptor: Any) -> Any:
    """A message ``{repeated <descriptor> items = 1; repeated bytes filler = 2;}`` in a pool of
    its own holding the schema's files (None if they cannot be copied there)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file: Any) -> None:
        if file.name in added:
            return
        added.add(file.name)
        for dependency in file.dependencies:
            add(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        pool.Add(proto)

    kinds = descriptor_pb2.FieldDescriptorProto
    name = "tabletopic_validation_wrapper"
    wrapper = descriptor_pb2.FileDescriptorProto(
        name=f"{name}.proto", package=name, syntax="proto2", dependency=[descriptor.file.name]
    )
    message = wrapper.message_type.add(name="Items")
    message.field.add(
        name="items",
        number=1,
        type=kinds.TYPE_MESSAGE,
        label=kinds.LABEL_REPEATED,
        type_name=f".{descriptor.full_name}",
    )
    message.field.add(name="filler", number=2, type=kinds.TYPE_BYTES, label=kinds.LABEL_REPEATED)
    try:
        add(descriptor.file)
        pool.Add(wrapper)
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{name}.Items"))()
    except Exception:  # a file layout this cannot copy: the per-record path still works
        return None
