"""Choosing a decoder for each key or value, and decoding a column of them.

``by_schema_id`` payloads are in Confluent's wire format: magic byte 0, a 4-byte big-endian schema
id, for Protobuf the message-index path, then the encoded value. ``by_latest_schema`` payloads are
bare encodings, read with the subject's latest schema (resolved once per converter).

Decoders are cached per schema id (and Protobuf message path): deriving Arrow types and building
readers costs far more than decoding one record, and a topic rarely uses more than a few ids.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.schema_registry.lookup import RegisteredSchema, SchemaLookup, SchemaNotFound
from tabletopic.table.convert.unify import SchemaConflict, conform_array, unify_types
from tabletopic.table.table_config import ConverterConfig, ConvertType

_SCHEMA_ID = struct.Struct(">I")


class ValueDecoder(Protocol):
    arrow_type: pa.DataType
    is_record: bool

    def decode(
        self, payloads: Sequence[bytes | None], skip: int = 0, column: pa.BinaryArray | None = None
    ) -> tuple[pa.Array, dict[int, str]]:
        """One array entry per payload, each read from byte ``skip`` on; failures as
        ``{index: reason}`` (null in the array). ``column``: the same payloads as an Arrow array,
        when the caller built one (native decoders then skip building it again)."""


@dataclass(frozen=True, slots=True)
class Failure:
    """Why one record could not become a row. ``invalid_data`` failures are the ones
    ``errors.tolerance=invalid_data`` skips; the others only ``all`` does."""

    reason: str
    invalid_data: bool = True


def build_decoder(
    schema: RegisteredSchema,
    indexes: Sequence[int] | None = None,
    full_name: str | None = None,
    native: bool = True,
) -> ValueDecoder:
    """A decoder for one registered schema (Protobuf: for the message at ``indexes``/``full_name``);
    ``native`` lets it decode whole columns in native code where it can."""
    kind = (schema.schema_type or "AVRO").upper()
    if kind == "AVRO":
        from tabletopic.table.convert.avro import AvroDecoder

        return AvroDecoder(schema.schema, schema.references, native=native)
    if kind == "JSON":
        from tabletopic.table.convert.jsonvalue import JsonDecoder

        return JsonDecoder(schema.schema, schema.references, native=native)
    if kind == "PROTOBUF":
        from tabletopic.table.convert.protobuf import ProtobufDecoder, message_descriptor

        return ProtobufDecoder(message_descriptor(schema, indexes, full_name), native=native)
    raise ValueError(f"unsupported schema type {schema.schema_type!r} (schema id {schema.schema_id})")


class DecoderCache:
    """Decoders by (schema id, message path), built on first use from a :class:`SchemaLookup`.

    One instance per Spark task (or per worker process); lookups that fail are cached as failures
    too, so a run of records with an unknown id costs one registry request, not one per record.
    Only ``SchemaNotFound`` becomes a record failure: any other lookup error (registry unreachable)
    propagates and fails the task, which is retried — a registry outage must never skip data.
    """

    def __init__(self, lookup: SchemaLookup | None, native: bool = True) -> None:
        self._lookup = lookup
        self._native = native
        self._by_id: dict[tuple[int, tuple[int, ...]], ValueDecoder | Failure] = {}
        self._latest: dict[tuple[str, str | None], ValueDecoder | Failure] = {}

    def for_schema_id(self, schema_id: int, indexes: tuple[int, ...] = ()) -> ValueDecoder | Failure:
        key = (schema_id, indexes)
        cached = self._by_id.get(key)
        if cached is None:
            cached = self._build(
                lambda lookup: lookup.by_id(schema_id), indexes or None, None, f"id {schema_id}"
            )
            self._by_id[key] = cached
        return cached

    def for_latest(self, subject: str, full_name: str | None) -> ValueDecoder | Failure:
        key = (subject, full_name)
        cached = self._latest.get(key)
        if cached is None:
            cached = self._build(
                lambda lookup: lookup.latest(subject), None, full_name, f"subject {subject!r}"
            )
            self._latest[key] = cached
        return cached

    def _build(self, fetch, indexes, full_name, what: str) -> ValueDecoder | Failure:  # type: ignore[no-untyped-def]
        if self._lookup is None:
            return Failure(f"no schema registry configured to resolve schema {what}", invalid_data=False)
        try:
            schema = fetch(self._lookup)
        except SchemaNotFound:
            return Failure(f"schema {what} not found in the registry")
        try:
            return build_decoder(schema, indexes, full_name, self._native)
        except Exception as exc:  # a schema we cannot map is a configuration problem, not bad data
            return Failure(f"cannot use schema {what}: {type(exc).__name__}: {exc}", invalid_data=False)


def decode_column(
    payloads: Sequence[bytes | None],
    converter: ConverterConfig,
    cache: DecoderCache,
    failures: dict[int, Failure],
) -> tuple[pa.Array, bool]:
    """Decode a key or value column according to ``converter``.

    Returns the column (null where a record failed; failures are added to ``failures``) and whether
    it holds records (structs) that ``flatten`` can spread into columns.
    """
    kind = converter.type
    if kind is ConvertType.RAW:
        return pa.array(payloads, type=pa.binary()), False
    if kind is ConvertType.STRING:
        return _strings(payloads, failures), False
    if kind is ConvertType.BY_LATEST_SCHEMA:
        if converter.subject is None:
            raise ValueError("by_latest_schema needs a subject (set the topic name or the subject config)")
        decoder = cache.for_latest(converter.subject, converter.message_full_name)
        if isinstance(decoder, Failure):
            for i, p in enumerate(payloads):
                if p is not None:
                    failures[i] = decoder
            return pa.nulls(len(payloads)), False
        array, bad = decoder.decode(payloads)
        for i, reason in bad.items():
            failures[i] = Failure(reason)
        return array, decoder.is_record
    return _by_schema_id(payloads, cache, failures)


def _strings(payloads: Sequence[bytes | None], failures: dict[int, Failure]) -> pa.Array:
    binary = pa.array(payloads, type=pa.binary())
    try:
        return binary.cast(pa.string())
    except pa.ArrowInvalid:
        values: list[str | None] = []
        for i, p in enumerate(payloads):
            try:
                values.append(None if p is None else p.decode("utf-8"))
            except UnicodeDecodeError as exc:
                failures[i] = Failure(f"not valid UTF-8: {exc}")
                values.append(None)
        return pa.array(values, type=pa.string())


def _one_prefix(
    payloads: Sequence[bytes | None], cache: DecoderCache
) -> tuple[ValueDecoder | Failure, int, pa.BinaryArray] | None:
    """The decoder, the prefix length and the payloads as an Arrow array when every payload starts
    with the same wire prefix (magic, schema id and, for Protobuf, message indexes) — the usual
    case, checked in one vectorised comparison instead of a dictionary lookup per record; None
    otherwise."""
    first = next((p for p in payloads if p is not None), None)
    if first is None or len(first) < 5 or first[0] != 0:
        return None
    (schema_id,) = _SCHEMA_ID.unpack_from(first, 1)
    decoder = cache.for_schema_id(schema_id)
    size = 5
    if _is_protobuf(decoder):
        from tabletopic.table.convert.protobuf import read_message_indexes

        try:
            indexes, size = read_message_indexes(first, 5)
        except ValueError:
            return None
        decoder = cache.for_schema_id(schema_id, indexes)
    binary = pa.array(payloads, type=pa.binary())
    same = pc.equal(pc.binary_slice(binary, 0, size), pa.scalar(bytes(first[:size]), pa.binary()))
    if not pc.all(same).as_py():
        return None
    return decoder, size, binary


def _by_schema_id(
    payloads: Sequence[bytes | None], cache: DecoderCache, failures: dict[int, Failure]
) -> tuple[pa.Array, bool]:
    single = _one_prefix(payloads, cache)
    if single is not None:
        decoder, size, binary = single
        if isinstance(decoder, Failure):
            for i, p in enumerate(payloads):
                if p is not None:
                    failures[i] = decoder
            return pa.nulls(len(payloads)), False
        array, bad = decoder.decode(payloads, size, binary)
        for i, reason in bad.items():
            failures[i] = Failure(reason)
        return array, decoder.is_record
    # Records are grouped by their 5-byte wire prefix (magic + schema id): one dict lookup per record
    # instead of parsing the header; Avro and JSON decoders then skip the prefix themselves.
    groups: dict[tuple[int, tuple[int, ...]], tuple[list[int], list[bytes], int]] = {}
    by_prefix: dict[bytes, tuple[int, bool]] = {}
    for i, p in enumerate(payloads):
        if p is None:
            continue
        prefix = p[:5]
        known = by_prefix.get(prefix)
        if known is None:
            if len(p) < 5 or p[0] != 0:
                failures[i] = Failure("not in Confluent wire format (magic byte 0 + 4-byte schema id)")
                continue
            (schema_id,) = _SCHEMA_ID.unpack_from(p, 1)
            known = by_prefix[prefix] = (schema_id, _is_protobuf(cache.for_schema_id(schema_id)))
        schema_id, is_protobuf = known
        if not is_protobuf:
            group = groups.get((schema_id, ()))
            if group is None:
                group = groups[(schema_id, ())] = ([], [], 5)
            group[0].append(i)
            group[1].append(p)
            continue
        from tabletopic.table.convert.protobuf import read_message_indexes

        try:
            indexes, pos = read_message_indexes(p, 5)
        except ValueError as exc:
            failures[i] = Failure(str(exc))
            continue
        group = groups.setdefault((schema_id, indexes), ([], [], 0))
        group[0].append(i)
        group[1].append(p[pos:])
    if not groups:
        return pa.nulls(len(payloads)), False
    parts: list[tuple[list[int], pa.Array]] = []
    is_record = True
    for (schema_id, indexes), (positions, bodies, skip) in groups.items():
        decoder = cache.for_schema_id(schema_id, indexes)
        if isinstance(decoder, Failure):
            for i in positions:
                failures[i] = decoder
            continue
        array, bad = decoder.decode(bodies, skip)
        for j, reason in bad.items():
            failures[positions[j]] = Failure(reason)
        parts.append((positions, array))
        is_record = is_record and decoder.is_record
    return _assemble(len(payloads), parts, failures), is_record and bool(parts)


def _is_protobuf(decoder: ValueDecoder | Failure) -> bool:
    return type(decoder).__name__ == "ProtobufDecoder"


def _assemble(length: int, parts: list[tuple[list[int], pa.Array]], failures: dict[int, Failure]) -> pa.Array:
    """Put per-schema arrays back in record order under one unified type."""
    if not parts:
        return pa.nulls(length)
    if len(parts) == 1 and len(parts[0][0]) == length:
        return parts[0][1]  # the common case: one schema, every record in the group, in order
    unified = parts[0][1].type
    kept: list[tuple[list[int], pa.Array]] = [parts[0]]
    for positions, array in parts[1:]:
        try:
            unified = unify_types(unified, array.type)
        except SchemaConflict as exc:
            for i in positions:
                failures[i] = Failure(f"schema conflicts with other versions in this batch: {exc}", False)
            continue
        kept.append((positions, array))
    arrays = [conform_array(array, unified) for _, array in kept]
    arrays.append(pa.nulls(1, type=unified))
    null_slot = sum(len(a) for a in arrays) - 1
    where = [null_slot] * length
    base = 0
    for positions, array in kept:
        for j, i in enumerate(positions):
            where[i] = base + j
        base += len(array)
    return pa.concat_arrays(arrays).take(pa.array(where, type=pa.int64()))
