"""Broker-side schema validation: Confluent Server's ``confluent.*.schema.validation`` topic configs.

A topic with ``confluent.value.schema.validation=true`` (or ``.key.``) accepts a record only when
its value (key) is in Confluent's wire format (magic byte 0, 4-byte schema id, Protobuf: the
message-index path), the schema id is registered under the subject its subject name strategy
names (``confluent.value.subject.name.strategy``, TopicNameStrategy by default: ``<topic>-value``),
and the payload decodes with that schema. Null keys and values pass, as on Confluent Server (a
tombstone carries no schema id). Confluent Server stops at the schema id; decoding the payload is
our addition (Bufstream does the same), so garbage behind a valid prefix is refused too.

It lives with the table pipeline because it reuses its column decoders (DataFusion for Avro,
compiled at most once per schema id), and the broker reaches it only through its
:class:`~tabletopic.broker.record_validation.RecordValidator` port. Work is per batch, never per
record in Python beyond the record framing: payloads are grouped by their 5-byte prefix, each group
checked in one call.

Schemas are cached by id (an id's schema never changes); the subjects an id is registered under
are re-read when a check fails on a cache entry older than ``refresh_s``, so a newly registered
schema is accepted at once and one bad producer costs one registry read per second, not per record.
Registry reads run in a worker thread: the metadata database must not stall the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tabletopic.broker.log_limit import RateLimitedLog
from tabletopic.broker.record_validation import RecordError, Rejection
from tabletopic.records.columns import DecodedRecords, append_records
from tabletopic.records.compression import decompress
from tabletopic.records.errors import RecordBatchError
from tabletopic.records.header import HEADER_SIZE, BatchHeader
from tabletopic.schema_registry.lookup import RegisteredSchema, SchemaLookup, SchemaNotFound

log = logging.getLogger(__name__)

PREFIX = "confluent."
VALUE_VALIDATION = "confluent.value.schema.validation"
KEY_VALIDATION = "confluent.key.schema.validation"
VALUE_STRATEGY = "confluent.value.subject.name.strategy"
KEY_STRATEGY = "confluent.key.subject.name.strategy"

# Topic keys under ``confluent.`` this node honours, with what DescribeConfigs-style docs say.
TOPIC_KEYS: dict[str, str] = {
    VALUE_VALIDATION: "true: Produce refuses records whose value is not in the wire format, names a "
    "schema id not registered under the value subject, or does not decode with that schema.",
    KEY_VALIDATION: "The same for record keys.",
    VALUE_STRATEGY: "How the value subject is named: TopicNameStrategy (<topic>-value), "
    "RecordNameStrategy (the record's full name) or TopicRecordNameStrategy (<topic>-<name>).",
    KEY_STRATEGY: "The same for keys (TopicNameStrategy: <topic>-key).",
}
_STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."
_SCHEMA_ID = struct.Struct(">I")
# A response carries at most this many per-record errors (Kafka lists them all; a 10 000-record
# batch of garbage would make a response bigger than the request for no one's benefit).
MAX_RECORD_ERRORS = 100


class SubjectNameStrategy(StrEnum):
    TOPIC = "TopicNameStrategy"
    RECORD = "RecordNameStrategy"
    TOPIC_RECORD = "TopicRecordNameStrategy"


def parse_strategy(key: str, value: str | None) -> SubjectNameStrategy:
    """A strategy from its short name or Confluent's class name.

    Raises:
        ValueError: naming ``key`` and the accepted values.
    """
    if value is None or not value.strip():
        return SubjectNameStrategy.TOPIC
    name = value.strip().removeprefix(_STRATEGY_PACKAGE)
    try:
        return SubjectNameStrategy(name)
    except ValueError:
        accepted = ", ".join(f"{_STRATEGY_PACKAGE}{s.value}" for s in SubjectNameStrategy)
        raise ValueError(f"invalid value for {key}: {value!r} is not one of {accepted}") from None


def validate_topic_configs(configs: Mapping[str, str]) -> None:
    """The broker's check of a topic's ``confluent.*`` keys (its TopicConfigExtension).

    Raises:
        ValueError: naming the key (unknown key, not true/false, unknown strategy).
    """
    for name, value in configs.items():
        if not name.startswith(PREFIX):
            continue
        if name not in TOPIC_KEYS:
            raise ValueError(f"unknown topic config {name} (known: {', '.join(sorted(TOPIC_KEYS))})")
        if name in (VALUE_VALIDATION, KEY_VALIDATION):
            if str(value).strip().lower() not in ("true", "false"):
                raise ValueError(f"invalid value for {name}: {value!r} is not true or false")
        else:
            parse_strategy(name, value)


def _on(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


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


Check = Callable[[list[bytes], int], dict[int, str]]


def build_check(schema: RegisteredSchema, indexes: Sequence[int] = (0,)) -> Check:
    """A whole-group payload check for one schema (Protobuf: one message path): called with the
    payloads and the offset their encoded value starts at, returns ``{index: reason}``."""
    kind = (schema.schema_type or "AVRO").upper()
    if kind == "AVRO":
        from tabletopic.table.convert.avro import AvroDecoder

        avro = AvroDecoder(schema.schema, schema.references, native=True)

        def check_avro(payloads: list[bytes], skip: int) -> dict[int, str]:
            return avro.decode(payloads, skip)[1]

        return check_avro
    if kind == "JSON":
        return _json_check(schema)
    if kind == "PROTOBUF":
        return _protobuf_check(schema, indexes)
    raise ValueError(f"unsupported schema type {schema.schema_type!r}")


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

    def check_json(payloads: list[bytes], skip: int) -> dict[int, str]:
        failures: dict[int, str] = {}
        for i, payload in enumerate(payloads):
            try:
                document = loads(payload[skip:])
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
    from google.protobuf import message_factory
    from google.protobuf.unknown_fields import UnknownFieldSet

    from tabletopic.schema_registry.formats.protobuf import message_descriptor_for

    parse = message_factory.GetMessageClass(message_descriptor_for(schema, list(indexes))).FromString

    def check_protobuf(payloads: list[bytes], skip: int) -> dict[int, str]:
        failures: dict[int, str] = {}
        for i, payload in enumerate(payloads):
            try:
                message = parse(payload[skip:])
            except Exception as exc:  # DecodeError, and upb's RuntimeError on bad UTF-8
                failures[i] = f"invalid Protobuf: {exc}"
                continue
            # Bytes the schema has no field for parse as "unknown fields"; a payload written with
            # this very schema has none, so they are garbage (or the wrong schema id).
            if len(UnknownFieldSet(message)):
                failures[i] = "invalid Protobuf: fields the schema does not have"
        return failures

    return check_protobuf


@dataclass(slots=True)
class _Entry:
    """What the validator knows of one schema id (``schema`` None: not registered)."""

    schema: RegisteredSchema | None
    subjects: frozenset[str]
    read_at: float
    checks: dict[tuple[int, ...], Check | str] = field(default_factory=dict)
    names: dict[tuple[int, ...], str] = field(default_factory=dict)


class SchemaValidator:
    """The node's :class:`~tabletopic.broker.record_validation.RecordValidator`.

    Args:
        lookup: the registry's cached in-process lookup (late-bound: the registry starts after the
            broker).
        subjects_of: the subjects a schema id is registered under (not deleted ones).
        refresh_s: how old a cache entry must be before a failed check re-reads the registry.
    """

    def __init__(
        self,
        lookup: Callable[[], SchemaLookup],
        subjects_of: Callable[[int], Sequence[str]],
        refresh_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lookup = lookup
        self._subjects_of = subjects_of
        self._refresh_s = refresh_s
        self._clock = clock
        self._entries: dict[int, _Entry] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._warn = RateLimitedLog(log)

    def enabled(self, configs: Mapping[str, str]) -> bool:
        return _on(configs.get(VALUE_VALIDATION)) or _on(configs.get(KEY_VALIDATION))

    async def check(
        self,
        topic: str,
        configs: Mapping[str, str],
        records: bytes | memoryview,
        headers: Sequence[BatchHeader],
    ) -> Rejection | None:
        sides: list[tuple[bool, SubjectNameStrategy]] = []
        if _on(configs.get(KEY_VALIDATION)):
            sides.append((True, parse_strategy(KEY_STRATEGY, configs.get(KEY_STRATEGY))))
        if _on(configs.get(VALUE_VALIDATION)):
            sides.append((False, parse_strategy(VALUE_STRATEGY, configs.get(VALUE_STRATEGY))))
        if not sides:
            return None
        batches: list[DecodedRecords] = []
        view = memoryview(records)
        try:
            for header in headers:
                decoded = DecodedRecords(0)
                if not header.is_control:
                    batch = view[header.position : header.position + header.size]
                    data = decompress(header.compression, batch[HEADER_SIZE:])
                    append_records(decoded, data, header, 0, 0, header.last_offset_delta + 1)
                batches.append(decoded)
        except RecordBatchError as exc:
            return Rejection(f"records cannot be decoded for schema validation: {exc}")
        # Only a registry read suspends this coroutine; while one does, later produces to the topic
        # queue behind it (asyncio's lock is FIFO), so batches reach the sequence checks and the
        # store in the order they arrived, as an idempotent producer needs.
        lock = self._locks.get(topic)
        if lock is None:
            lock = self._locks[topic] = asyncio.Lock()
        async with lock:
            return await self._check_locked(topic, batches, sides)

    async def _check_locked(
        self, topic: str, batches: list[DecodedRecords], sides: list[tuple[bool, SubjectNameStrategy]]
    ) -> Rejection | None:
        for attempt in range(2):
            missing = self._missing(batches, sides)
            if missing:
                try:
                    await asyncio.to_thread(self._read, missing)
                except Exception as exc:  # registry unreachable: nothing decided, the client retries
                    self._warn.warning("registry", "validating %s: registry unavailable: %s", topic, exc)
                    return Rejection(f"schema registry unavailable for validation: {exc}", retriable=True)
            stale: set[int] = set()
            errors = self._validate(topic, batches, sides, stale)
            if not stale or attempt:
                break
            for schema_id in stale:  # read again: the schema may have been registered since
                self._entries.pop(schema_id, None)
        if not errors:
            return None
        total = len(errors)
        shown = errors[:MAX_RECORD_ERRORS]
        first = shown[0]
        message = (
            f"{total} record(s) refused by schema validation of topic {topic}; "
            f"first, record {first.batch_index}: {first.message}"
        )
        self._warn.warning(f"refused:{topic}", "produce to %s refused: %s", topic, message)
        return Rejection(message, tuple(shown))

    # --- registry reads (worker thread) ---------------------------------------------------------
    def _missing(
        self, batches: list[DecodedRecords], sides: list[tuple[bool, SubjectNameStrategy]]
    ) -> set[int]:
        entries = self._entries
        missing: set[int] = set()
        seen: set[bytes] = set()
        for decoded in batches:
            for is_key, _ in sides:
                for payload in decoded.keys if is_key else decoded.values:
                    if payload is None or len(payload) < 5:
                        continue
                    prefix = payload[:5]
                    if prefix in seen:
                        continue
                    seen.add(prefix)
                    if prefix[0] == 0:
                        (schema_id,) = _SCHEMA_ID.unpack_from(prefix, 1)
                        if schema_id not in entries:
                            missing.add(schema_id)
        return missing

    def _read(self, ids: set[int]) -> None:
        lookup = self._lookup()
        for schema_id in ids:
            now = self._clock()
            try:
                schema: RegisteredSchema | None = lookup.by_id(schema_id)
            except SchemaNotFound:
                schema = None
            subjects = frozenset(self._subjects_of(schema_id)) if schema is not None else frozenset()
            self._entries[schema_id] = _Entry(schema, subjects, now)
        if len(self._entries) > 10_000:  # ids are few in practice; a flood of random ids is not
            for stale in list(self._entries)[: len(self._entries) // 2]:
                del self._entries[stale]

    # --- the checks (event loop; pure CPU) ------------------------------------------------------
    def _validate(
        self,
        topic: str,
        batches: list[DecodedRecords],
        sides: list[tuple[bool, SubjectNameStrategy]],
        stale: set[int],
    ) -> list[RecordError]:
        """The refused records; ids whose refusal came from an entry older than ``refresh_s`` are
        added to ``stale`` (the caller reads them again and checks once more)."""
        errors: dict[tuple[int, int], str] = {}
        for batch_no, decoded in enumerate(batches):
            for is_key, strategy in sides:
                what = "key" if is_key else "value"
                payloads = decoded.keys if is_key else decoded.values
                for index, reason in self._check_column(topic, what, strategy, payloads, stale).items():
                    errors.setdefault((batch_no, index), f"{what}: {reason}")
        return [RecordError(index, reason) for (_, index), reason in sorted(errors.items())]

    def _check_column(
        self,
        topic: str,
        what: str,
        strategy: SubjectNameStrategy,
        payloads: list[bytes | None],
        stale: set[int],
    ) -> dict[int, str]:
        failures: dict[int, str] = {}
        # Group by the 5-byte prefix (magic + id) and, for Protobuf, the message path.
        groups: dict[tuple[int, tuple[int, ...], int], tuple[list[int], list[bytes]]] = {}
        verdicts: dict[bytes, tuple[int, _Entry] | str] = {}
        for i, payload in enumerate(payloads):
            if payload is None:
                continue
            prefix = payload[:5]
            verdict = verdicts.get(prefix)
            if verdict is None:
                verdict = verdicts[prefix] = self._entry_for(prefix)
            if isinstance(verdict, str):
                failures[i] = verdict
                continue
            schema_id, entry = verdict
            skip = 5
            path: tuple[int, ...] = ()
            if entry.schema is not None and entry.schema.schema_type.upper() == "PROTOBUF":
                try:
                    path, skip = _message_path(payload)
                except ValueError as exc:
                    failures[i] = f"bad Protobuf message indexes: {exc}"
                    continue
            group = groups.get((schema_id, path, skip))
            if group is None:
                group = groups[(schema_id, path, skip)] = ([], [])
            group[0].append(i)
            group[1].append(payload)
        now = self._clock()
        for (schema_id, path, skip), (positions, bodies) in groups.items():
            entry = self._entries[schema_id]
            reason = self._subject_problem(topic, what, strategy, schema_id, entry, path)
            if reason is not None and now - entry.read_at > self._refresh_s:
                stale.add(schema_id)
            if reason is None:
                check = entry.checks.get(path)
                if check is None:
                    check = entry.checks[path] = self._build(schema_id, entry, path)
                if isinstance(check, str):
                    reason = check
                else:
                    for j, why in check(bodies, skip).items():
                        failures[positions[j]] = f"schema id {schema_id}: {why}"
                    continue
            for i in positions:
                failures[i] = reason
        return failures

    def _entry_for(self, prefix: bytes) -> tuple[int, _Entry] | str:
        if len(prefix) < 5 or prefix[0] != 0:
            return "not in the schema registry wire format (magic byte 0 and a 4-byte schema id)"
        (schema_id,) = _SCHEMA_ID.unpack_from(prefix, 1)
        entry = self._entries.get(schema_id)
        if entry is None:  # pragma: no cover - _missing read every id first
            return f"schema id {schema_id} could not be looked up"
        return schema_id, entry

    def _subject_problem(
        self,
        topic: str,
        what: str,
        strategy: SubjectNameStrategy,
        schema_id: int,
        entry: _Entry,
        path: tuple[int, ...],
    ) -> str | None:
        if entry.schema is None:
            return f"schema id {schema_id} is not registered"
        if strategy is SubjectNameStrategy.TOPIC:
            subject = f"{topic}-{what}"
        else:
            name = entry.names.get(path)
            if name is None:
                try:
                    name = entry.names[path] = record_name(entry.schema, path or (0,))
                except Exception as exc:  # a schema we cannot name cannot match any subject
                    return f"schema id {schema_id} has no record name: {exc}"
            subject = name if strategy is SubjectNameStrategy.RECORD else f"{topic}-{name}"
        if subject in entry.subjects:
            return None
        return f"schema id {schema_id} is not registered under subject {subject} ({strategy.value})"

    def _build(self, schema_id: int, entry: _Entry, path: tuple[int, ...]) -> Check | str:
        assert entry.schema is not None
        try:
            return build_check(entry.schema, path or (0,))
        except Exception as exc:  # the registry accepted it, so this is our limitation: say so
            self._warn.warning(f"schema:{schema_id}", "cannot validate with schema id %d: %s", schema_id, exc)
            return f"schema id {schema_id} cannot be used for validation: {type(exc).__name__}: {exc}"


def _message_path(payload: bytes) -> tuple[tuple[int, ...], int]:
    """A Protobuf payload's message-index path and where its message starts (almost always the
    single byte 0 for the first message)."""
    if len(payload) > 5 and payload[5] == 0:
        return (0,), 6
    from tabletopic.schema_registry.formats.protobuf import read_message_indexes

    indexes, pos = read_message_indexes(payload, 5)
    return tuple(indexes) or (0,), pos
