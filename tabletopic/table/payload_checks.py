"""Payload checks of broker-side schema validation, one per format, each over a whole group of
payloads written with one schema (and, for Protobuf, one message path).

Avro is checked for the whole group at once by :mod:`tabletopic.table.avro_columns` (positions
only, no values); the datums it refuses are decoded again one by one with the table pipeline's
per-record decoder, which says why (and has the last word: a datum it reads is accepted). JSON
Schema documents are read as one newline-delimited block by Arrow when the schema is a plain record
shape (:mod:`tabletopic.table.json_columns`), else (and to find the culprits) per record with
``jsonschema``. Protobuf is parsed per record by upb (C) after the broker has done the framing for
the whole batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tabletopic.schema_registry.lookup import RegisteredSchema

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
    from tabletopic.table.avro_columns import compile_validator
    from tabletopic.table.convert.avro import AvroDecoder, parse_avro_schema

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

    from tabletopic.table.json_columns import compile_all_valid

    # Whole-group answer "all valid" in one Arrow read where the schema allows it.
    all_valid = None if schema.references else compile_all_valid(root)

    def check_json(payloads: Payloads) -> dict[int, str]:
        documents = payloads.as_bytes()
        if all_valid is not None and all_valid(documents):
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


def _protobuf_check(schema: RegisteredSchema, indexes: Sequence[int]) -> Check:
    # upb parses a small message in about half a microsecond: a NumPy walk of the same tags
    # (as for Avro) measured three to ten times slower, so Protobuf stays per record, in C.
    from google.protobuf import message_factory
    from google.protobuf.unknown_fields import UnknownFieldSet

    from tabletopic.schema_registry.formats.protobuf import message_descriptor_for

    # One message object, parsed into again and again: no allocation per record.
    message = message_factory.GetMessageClass(message_descriptor_for(schema, list(indexes)))()
    parse = message.ParseFromString

    def check_protobuf(payloads: Payloads) -> dict[int, str]:
        failures: dict[int, str] = {}
        for i, payload in enumerate(payloads.as_bytes()):
            try:
                parse(payload)
            except Exception as exc:  # DecodeError, and upb's RuntimeError on bad UTF-8
                failures[i] = f"invalid Protobuf: {exc}"
                continue
            # Bytes the schema has no field for parse as "unknown fields"; a payload written with
            # this very schema has none, so they are garbage (or the wrong schema id).
            if len(UnknownFieldSet(message)):
                failures[i] = "invalid Protobuf: fields the schema does not have"
        message.Clear()
        return failures

    return check_protobuf
