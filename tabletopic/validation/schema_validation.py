"""Broker-side schema validation: Confluent Server's ``confluent.*.schema.validation`` topic configs.

A topic with ``confluent.value.schema.validation=true`` (or ``.key.``) accepts a record only when
its value (key) is in Confluent's wire format (magic byte 0, 4-byte schema id, Protobuf: the
message-index path), the schema id is registered under the subject its subject name strategy
names (``confluent.value.subject.name.strategy``, TopicNameStrategy by default: ``<topic>-value``),
and the payload decodes with that schema. Null keys and values pass, as on Confluent Server (a
tombstone carries no schema id). Confluent Server stops at the schema id; decoding the payload is
our addition, so garbage behind a valid prefix is refused too.

It lives with the table pipeline because it uses its decoders (to explain a refusal) and sits above
the registry; the broker reaches it only through its
:class:`~tabletopic.broker.record_validation.RecordValidator` port. Work is per batch, not per
record: the framing is read with NumPy (:mod:`tabletopic.records.spans`), payloads are grouped by
schema id, and each group is checked in one call (:mod:`tabletopic.validation.payload_checks`).

Schemas are cached by id (an id's schema never changes); the subjects an id is registered under
are re-read when a check fails on a cache entry older than ``refresh_s``, so a newly registered
schema is accepted at once and one bad producer costs one registry read per second, not per record.
Registry reads run in a worker thread: the metadata database must not stall the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from tabletopic.broker.record_validation import RecordError, Rejection
from tabletopic.config import nearest_name
from tabletopic.log_limit import RateLimitedLog
from tabletopic.records.compression import decompress
from tabletopic.records.errors import RecordBatchError
from tabletopic.records.header import HEADER_SIZE, BatchHeader
from tabletopic.records.spans import Ints, RecordSpans, record_spans
from tabletopic.schema_registry.lookup import RegisteredSchema, SchemaLookup, SchemaNotFound
from tabletopic.validation.payload_checks import Check, Payloads, build_check, record_name

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
            meant = nearest_name(name, TOPIC_KEYS)
            hint = f"did you mean {meant}?" if meant else f"known: {', '.join(sorted(TOPIC_KEYS))}"
            raise ValueError(f"unknown topic config {name} ({hint})")
        if name in (VALUE_VALIDATION, KEY_VALIDATION):
            if str(value).strip().lower() not in ("true", "false"):
                raise ValueError(f"invalid value for {name}: {value!r} is not true or false")
        else:
            parse_strategy(name, value)


def _on(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


@dataclass(slots=True)
class _Entry:
    """What the validator knows of one schema id (``schema`` None: not registered)."""

    schema: RegisteredSchema | None
    subjects: frozenset[str]
    read_at: float
    checks: dict[tuple[int, ...], Check | str] = field(default_factory=dict)
    names: dict[tuple[int, ...], str] = field(default_factory=dict)


@dataclass(slots=True)
class _Column:
    """The keys or values of one batch, in wire-format terms: which records are null, which are
    not in the wire format, and the schema id of the rest (-1 where there is none)."""

    spans: RecordSpans
    is_key: bool
    starts: Ints
    ends: Ints
    ids: Ints
    not_wire: Ints  # record indexes

    @classmethod
    def of(cls, spans: RecordSpans, is_key: bool) -> _Column:
        data = spans.data
        starts = spans.starts(is_key)
        lengths = spans.lengths(is_key)
        ends = starts + np.maximum(lengths, 0)
        last = len(data) - 1
        head = [data[np.minimum(starts + k, last)].astype(np.int64) for k in range(5)]
        wire = (lengths >= 5) & (head[0] == 0)
        ids = np.where(wire, (head[1] << 24) | (head[2] << 16) | (head[3] << 8) | head[4], -1)
        return cls(spans, is_key, starts, ends, ids, np.flatnonzero((lengths >= 0) & ~wire))


@dataclass(eq=False)
class SchemaValidator:
    """The node's :class:`~tabletopic.broker.record_validation.RecordValidator`."""

    # The registry's cached in-process lookup, late-bound: the registry starts after the broker.
    lookup: Callable[[], SchemaLookup]
    # The subjects a schema id is registered under (not deleted ones).
    subjects_of: Callable[[int], Sequence[str]]
    # How old a cache entry must be before a failed check reads the registry again.
    refresh_s: float = 1.0
    clock: Callable[[], float] = time.monotonic
    _entries: dict[int, _Entry] = field(default_factory=dict, init=False)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict, init=False)
    _warn: RateLimitedLog = field(default_factory=lambda: RateLimitedLog(log), init=False)

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
        view = memoryview(records)
        columns: list[tuple[int, _Column, SubjectNameStrategy]] = []
        try:
            for number, header in enumerate(headers):
                if header.is_control:
                    continue
                start = header.position + HEADER_SIZE
                block = decompress(header.compression, view[start : header.position + header.size])
                spans = record_spans(block, header.record_count)
                columns += [(number, _Column.of(spans, is_key), strategy) for is_key, strategy in sides]
        except RecordBatchError as exc:
            return Rejection(f"records cannot be decoded for schema validation: {exc}")
        # Only a registry read suspends this coroutine; while one does, later produces to the topic
        # queue behind it (asyncio's lock is FIFO), so batches reach the sequence checks and the
        # store in the order they arrived, as an idempotent producer needs.
        lock = self._locks.get(topic)
        if lock is None:
            lock = self._locks[topic] = asyncio.Lock()
        async with lock:
            return await self._check_locked(topic, columns)

    async def _check_locked(
        self, topic: str, columns: list[tuple[int, _Column, SubjectNameStrategy]]
    ) -> Rejection | None:
        errors: list[RecordError] = []
        for attempt in range(2):
            ids = {int(i) for _, column, _ in columns for i in np.unique(column.ids) if i >= 0}
            missing = ids - self._entries.keys()
            if missing:
                try:
                    await asyncio.to_thread(self._read, missing)
                except Exception as exc:  # registry unreachable: nothing decided, the client retries
                    self._warn.warning("registry", "validating %s: registry unavailable: %s", topic, exc)
                    return Rejection(f"schema registry unavailable for validation: {exc}", retriable=True)
            stale: set[int] = set()
            errors = self._validate(topic, columns, stale)
            if not stale or attempt:
                break
            for schema_id in stale:  # read again: the schema may have been registered since
                self._entries.pop(schema_id, None)
        if not errors:
            return None
        shown = errors[:MAX_RECORD_ERRORS]
        first = shown[0]
        message = (
            f"{len(errors)} record(s) refused by schema validation of topic {topic}; "
            f"first, record {first.batch_index}: {first.message}"
        )
        self._warn.warning(f"refused:{topic}", "produce to %s refused: %s", topic, message)
        return Rejection(message, tuple(shown))

    # --- registry reads (worker thread) ---------------------------------------------------------
    def _read(self, ids: set[int]) -> None:
        lookup = self.lookup()
        for schema_id in ids:
            now = self.clock()
            try:
                schema: RegisteredSchema | None = lookup.by_id(schema_id)
            except SchemaNotFound:
                schema = None
            subjects = frozenset(self.subjects_of(schema_id)) if schema is not None else frozenset()
            self._entries[schema_id] = _Entry(schema, subjects, now)
        if len(self._entries) > 10_000:  # ids are few in practice; a flood of random ids is not
            for old in list(self._entries)[: len(self._entries) // 2]:
                del self._entries[old]

    # --- the checks (event loop; pure CPU) ------------------------------------------------------
    def _validate(
        self, topic: str, columns: list[tuple[int, _Column, SubjectNameStrategy]], stale: set[int]
    ) -> list[RecordError]:
        """The refused records; ids whose refusal came from an entry older than ``refresh_s`` are
        added to ``stale`` (the caller reads them again and checks once more)."""
        errors: dict[tuple[int, int], str] = {}
        for batch, column, strategy in columns:
            what = "key" if column.is_key else "value"
            for index, reason in self._check_column(topic, what, strategy, column, stale).items():
                errors.setdefault((batch, index), f"{what}: {reason}")
        return [RecordError(index, reason) for (_, index), reason in sorted(errors.items())]

    def _check_column(
        self, topic: str, what: str, strategy: SubjectNameStrategy, column: _Column, stale: set[int]
    ) -> dict[int, str]:
        failures: dict[int, str] = {}
        wire = "not in the schema registry wire format (magic byte 0 and a 4-byte schema id)"
        for i in column.not_wire.tolist():
            failures[i] = wire
        raw = column.spans.raw
        now = self.clock()
        for value in np.unique(column.ids).tolist():
            if value < 0:
                continue
            schema_id = int(value)
            rows = np.flatnonzero(column.ids == schema_id)
            entry = self._entries[schema_id]
            protobuf = entry.schema is not None and entry.schema.schema_type.upper() == "PROTOBUF"
            groups = (
                _protobuf_groups(raw, column, rows, failures)
                if protobuf
                else {(): (rows, column.starts[rows] + 5)}
            )
            for path, (members, bodies_at) in groups.items():
                reason = self._subject_problem(topic, what, strategy, schema_id, entry, path)
                if reason is not None and now - entry.read_at > self.refresh_s:
                    stale.add(schema_id)
                check: Check | str | None = None
                if reason is None:
                    check = entry.checks.get(path)
                    if check is None:
                        check = entry.checks[path] = self._build(schema_id, entry, path)
                    if isinstance(check, str):
                        reason = check
                if reason is not None or isinstance(check, str) or check is None:
                    for i in members.tolist():
                        failures[i] = reason or ""
                    continue
                bodies = Payloads(raw, column.spans.data, bodies_at, column.ends[members])
                for j, why in check(bodies).items():
                    failures[int(members[j])] = f"schema id {schema_id}: {why}"
        return failures

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


def _protobuf_groups(
    raw: bytes, column: _Column, rows: Ints, failures: dict[int, str]
) -> dict[tuple[int, ...], tuple[Ints, Ints]]:
    """Rows of one Protobuf schema id by message path, with where each message starts. The path
    is almost always the single byte 0 (the first message), recognised for all rows at once."""
    starts = column.starts[rows]
    shorthand = (column.spans.data[starts + 5] == 0) & (column.ends[rows] > starts + 5)
    groups: dict[tuple[int, ...], tuple[list[int], list[int]]] = {}
    if shorthand.all():
        return {(0,): (rows, starts + 6)}
    from tabletopic.schema_registry.formats.protobuf import read_message_indexes

    for row, start, short in zip(rows.tolist(), starts.tolist(), shorthand.tolist(), strict=True):
        path: tuple[int, ...] = (0,)
        if short:
            at = start + 6
        else:
            try:
                indexes, at = read_message_indexes(raw[: int(column.ends[row])], start + 5)
            except ValueError as exc:
                failures[row] = f"bad Protobuf message indexes: {exc}"
                continue
            path = tuple(indexes) or (0,)
        members, positions = groups.setdefault(path, ([], []))
        members.append(row)
        positions.append(at)
    return {p: (np.array(m, dtype=np.int64), np.array(a, dtype=np.int64)) for p, (m, a) in groups.items()}
