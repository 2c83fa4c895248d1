"""Table-topic configuration: AutoMQ's ``automq.table.topic.*`` topic configs, parsed and validated.

Users move topics over from AutoMQ unchanged, so the key names, values and defaults are AutoMQ's
(``TopicConfig`` in AutoMQ's fork of Kafka). A few keys are ours and say so in their docs:
``.table.name``, ``.errors.dlq.topic`` and ``.commit.max.bytes``.

The broker calls :func:`validate_table_topic_configs` on CreateTopics / AlterConfigs / IncrementalAlterConfigs
and answers ``INVALID_CONFIG`` with the exception's message, which always names the offending key. The
coordinator and the Spark job build a :class:`TableTopicConfig` with
:meth:`TableTopicConfig.from_topic_configs` and never look at the raw strings again.

Checks that need the table schema (partition and id columns exist, have partitionable types) happen
later in :mod:`tabletopic.table.schema_evolution` because the schema is only known once data arrives.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from tabletopic.catalog.adapters import DEFAULT_NAMESPACE
from tabletopic.config import nearest_name

PREFIX = "automq.table.topic."

ENABLE = PREFIX + "enable"
COMMIT_INTERVAL_MS = PREFIX + "commit.interval.ms"
COMMIT_MAX_BYTES = PREFIX + "commit.max.bytes"
NAMESPACE = PREFIX + "namespace"
TABLE_NAME = PREFIX + "table.name"
SCHEMA_TYPE = PREFIX + "schema.type"
CONVERT_VALUE_TYPE = PREFIX + "convert.value.type"
CONVERT_KEY_TYPE = PREFIX + "convert.key.type"
VALUE_LATEST_SUBJECT = PREFIX + "convert.value.by_latest_schema.subject"
VALUE_LATEST_MESSAGE = PREFIX + "convert.value.by_latest_schema.message.full.name"
KEY_LATEST_SUBJECT = PREFIX + "convert.key.by_latest_schema.subject"
KEY_LATEST_MESSAGE = PREFIX + "convert.key.by_latest_schema.message.full.name"
TRANSFORM_VALUE_TYPE = PREFIX + "transform.value.type"
ID_COLUMNS = PREFIX + "id.columns"
PARTITION_BY = PREFIX + "partition.by"
UPSERT_ENABLE = PREFIX + "upsert.enable"
CDC_FIELD = PREFIX + "cdc.field"
ERRORS_TOLERANCE = PREFIX + "errors.tolerance"
ERRORS_DLQ_TOPIC = PREFIX + "errors.dlq.topic"
EXPIRE_SNAPSHOT_ENABLED = PREFIX + "expire.snapshot.enabled"
EXPIRE_SNAPSHOT_OLDER_THAN_HOURS = PREFIX + "expire.snapshot.older.than.hours"
EXPIRE_SNAPSHOT_RETAIN_LAST = PREFIX + "expire.snapshot.retain.last"
ICEBERG_AUTO_CREATE_PROPERTIES = PREFIX + "iceberg.auto-create.properties"
FORMAT_VERSION = PREFIX + "format.version"

# What one partition's next offset weighs in a snapshot's summary, as the metadata file holds it
# (``"123":4567890,`` escaped inside a JSON string), and the metadata weight worth a warning.
OFFSET_BYTES_PER_PARTITION = 17
HEAVY_HISTORY_BYTES = 32_000_000

# Iceberg table format versions the pipeline writes. Version 3 (deletion vectors) is refused: every
# commit is written by pyiceberg, and pyiceberg 0.12 writes no v3 manifest or manifest list (see
# docs/table-topics.md, "Iceberg format version 3").
FORMAT_VERSIONS = ("2",)

# Broker-level keys share the prefix; setting them on a topic is a mistake worth naming.
BROKER_LEVEL_PREFIXES = (PREFIX + "catalog.", PREFIX + "schema.registry.")

# AutoMQ's special id.columns value: take the identifier columns from the Debezium key schema.
FROM_DEBEZIUM_KEY = "_from_debezium_key_"

_E = TypeVar("_E", bound=StrEnum)

MAX_COMMIT_INTERVAL_MS = 15 * 60 * 1000
DEFAULT_AUTO_CREATE_PROPERTIES = (
    ("write.metadata.delete-after-commit.enabled", "true"),
    ("write.object-storage.enabled", "true"),
)


class ConvertType(StrEnum):
    """How a record key or value becomes table columns."""

    RAW = "raw"
    STRING = "string"
    BY_SCHEMA_ID = "by_schema_id"
    BY_LATEST_SCHEMA = "by_latest_schema"

    @property
    def uses_schema(self) -> bool:
        return self in (ConvertType.BY_SCHEMA_ID, ConvertType.BY_LATEST_SCHEMA)


class TransformType(StrEnum):
    NONE = "none"
    FLATTEN = "flatten"
    FLATTEN_DEBEZIUM = "flatten_debezium"


class ErrorsTolerance(StrEnum):
    """``none`` fails the commit on any bad record; ``invalid_data`` skips records that cannot be
    decoded; ``all`` skips every per-record failure (decode and conversion alike)."""

    NONE = "none"
    INVALID_DATA = "invalid_data"
    ALL = "all"


class PartitionTransform(StrEnum):
    IDENTITY = "identity"
    YEAR = "year"
    MONTH = "month"
    DAY = "day"
    HOUR = "hour"
    BUCKET = "bucket"
    TRUNCATE = "truncate"


_TRANSFORM_ALIASES = {
    "years": "year",
    "months": "month",
    "days": "day",
    "hours": "hour",
    "date": "day",
    "date_hour": "hour",
    "date_hours": "hour",
}


@dataclass(frozen=True, slots=True)
class PartitionField:
    """One ``partition.by`` entry: ``bucket(name, 16)`` is ``(BUCKET, "name", 16)``."""

    transform: PartitionTransform
    column: str
    arg: int | None = None

    def __str__(self) -> str:
        if self.transform is PartitionTransform.IDENTITY:
            return self.column
        if self.arg is not None:
            return f"{self.transform}({self.column}, {self.arg})"
        return f"{self.transform}({self.column})"


@dataclass(frozen=True, slots=True)
class ConverterConfig:
    """Key or value converter. ``subject``/``message_full_name`` matter only for by_latest_schema;
    ``subject`` is already defaulted to ``<topic>-key`` / ``<topic>-value`` when the topic is known."""

    type: ConvertType
    subject: str | None = None
    message_full_name: str | None = None


@dataclass(frozen=True, slots=True)
class TableTopicConfig:
    """Validated, typed table-topic settings of one topic. Build with :meth:`from_topic_configs`."""

    enabled: bool = False
    commit_interval_ms: int = 60_000
    commit_max_bytes: int = 256 * 1024 * 1024
    namespace: str = DEFAULT_NAMESPACE
    table_name: str | None = None
    value_converter: ConverterConfig = field(default_factory=lambda: ConverterConfig(ConvertType.RAW))
    key_converter: ConverterConfig = field(default_factory=lambda: ConverterConfig(ConvertType.STRING))
    value_transform: TransformType = TransformType.NONE
    id_columns: tuple[str, ...] = ()
    partition_by: tuple[PartitionField, ...] = ()
    upsert_enable: bool = False
    cdc_field: str | None = None
    errors_tolerance: ErrorsTolerance = ErrorsTolerance.INVALID_DATA
    dlq_topic: str | None = None
    expire_snapshot_enabled: bool = True
    expire_snapshot_older_than_hours: int = 1
    expire_snapshot_retain_last: int = 1
    iceberg_auto_create_properties: tuple[tuple[str, str], ...] = DEFAULT_AUTO_CREATE_PROPERTIES

    def history_warning(self, partitions: int) -> str | None:
        """What to tell an operator whose commit interval makes the table's metadata heavy for a
        topic this wide, else None.

        Every snapshot's summary lists the next offset of every partition, and every commit
        rewrites the metadata file with every snapshot kept (``docs/table-topics.md``): a
        one-second interval on 1,000 partitions keeps about 61 MB of offsets in it."""
        if not self.expire_snapshot_enabled:
            return None  # nothing bounds the history: the operator chose that
        kept = max(
            self.expire_snapshot_retain_last,
            self.expire_snapshot_older_than_hours * 3_600_000 // self.commit_interval_ms,
        )
        weight = kept * partitions * OFFSET_BYTES_PER_PARTITION
        if weight < HEAVY_HISTORY_BYTES:
            return None
        return (
            f"a commit every {self.commit_interval_ms / 1000:g} s keeps about {kept:,} snapshots "
            f"({EXPIRE_SNAPSHOT_OLDER_THAN_HOURS}={self.expire_snapshot_older_than_hours}), each listing "
            f"the offsets of {partitions:,} partitions: the table's metadata file grows to about "
            f"{weight / 1e6:,.0f} MB, written whole at every commit; raise {COMMIT_INTERVAL_MS} for a "
            f"topic this wide"
        )

    @property
    def id_columns_from_debezium_key(self) -> bool:
        return self.id_columns == (FROM_DEBEZIUM_KEY,)

    @property
    def writes_deletes(self) -> bool:
        """Whether commits need equality deletes (upsert, CDC, or Debezium delete events)."""
        return self.upsert_enable or self.cdc_field is not None

    @classmethod
    def from_topic_configs(
        cls, configs: Mapping[str, str | None], topic: str | None = None
    ) -> TableTopicConfig:
        """Parse a topic's configs (only the ``automq.table.topic.*`` keys are looked at).

        Args:
            configs: the topic's config map as strings (None values count as unset).
            topic: the topic name, used for the default table name and by_latest_schema subjects.

        Raises:
            ValueError: a value is malformed or out of range, or keys contradict each other; the
                message names the key.
        """
        raw = {k: v.strip() for k, v in configs.items() if k.startswith(PREFIX) and v is not None}
        for key in raw:
            if key.startswith(BROKER_LEVEL_PREFIXES):
                raise ValueError(f"{key} is a broker-level setting, not a topic config")
            if key not in _KNOWN_KEYS:
                meant = nearest_name(key, _KNOWN_KEYS)
                hint = f"; did you mean {meant}?" if meant else f" (known: {', '.join(sorted(_KNOWN_KEYS))})"
                raise ValueError(f"{key} is not a known table topic config{hint}")

        value_type, transform = _legacy_schema_type(raw)
        value_type = _enum(raw, CONVERT_VALUE_TYPE, ConvertType, value_type)
        key_type = _enum(raw, CONVERT_KEY_TYPE, ConvertType, ConvertType.STRING)
        transform = _enum(raw, TRANSFORM_VALUE_TYPE, TransformType, transform)
        id_columns = _id_columns(raw)
        dlq_topic = raw.get(ERRORS_DLQ_TOPIC) or None
        if dlq_topic is not None:
            _check_topic_name(ERRORS_DLQ_TOPIC, dlq_topic)
            if dlq_topic == topic:
                raise ValueError(f"{ERRORS_DLQ_TOPIC} cannot be the table topic itself")
        cdc_field = raw.get(CDC_FIELD) or None
        if cdc_field is not None:
            _check_column_name(CDC_FIELD, cdc_field)

        config = cls(
            enabled=_bool(raw, ENABLE, False),
            commit_interval_ms=_int(raw, COMMIT_INTERVAL_MS, 60_000, 1, MAX_COMMIT_INTERVAL_MS),
            commit_max_bytes=_int(raw, COMMIT_MAX_BYTES, 256 * 1024 * 1024, 1024 * 1024, 1 << 40),
            namespace=_namespace(raw),
            table_name=_table_name(raw, topic),
            value_converter=_converter(
                raw, value_type, VALUE_LATEST_SUBJECT, VALUE_LATEST_MESSAGE, topic, "value"
            ),
            key_converter=_converter(raw, key_type, KEY_LATEST_SUBJECT, KEY_LATEST_MESSAGE, topic, "key"),
            value_transform=transform,
            id_columns=id_columns,
            partition_by=parse_partition_by(raw.get(PARTITION_BY, "")),
            upsert_enable=_bool(raw, UPSERT_ENABLE, False),
            cdc_field=cdc_field,
            errors_tolerance=_enum(raw, ERRORS_TOLERANCE, ErrorsTolerance, ErrorsTolerance.INVALID_DATA),
            dlq_topic=dlq_topic,
            expire_snapshot_enabled=_bool(raw, EXPIRE_SNAPSHOT_ENABLED, True),
            expire_snapshot_older_than_hours=_int(raw, EXPIRE_SNAPSHOT_OLDER_THAN_HOURS, 1, 1, 24 * 365 * 10),
            expire_snapshot_retain_last=_int(raw, EXPIRE_SNAPSHOT_RETAIN_LAST, 1, 1, 1_000_000),
            iceberg_auto_create_properties=_properties(raw),
        )
        _format_version(raw)
        config._check_cross_field()
        return config

    def _check_cross_field(self) -> None:
        if self.upsert_enable and not self.id_columns:
            raise ValueError(f"{UPSERT_ENABLE}=true requires {ID_COLUMNS}")
        if self.cdc_field is not None and not self.id_columns:
            raise ValueError(f"{CDC_FIELD} requires {ID_COLUMNS}")
        if self.value_transform is not TransformType.NONE and not self.value_converter.type.uses_schema:
            raise ValueError(
                f"{TRANSFORM_VALUE_TYPE}={self.value_transform} requires {CONVERT_VALUE_TYPE} "
                f"by_schema_id or by_latest_schema, not {self.value_converter.type}"
            )
        if self.id_columns_from_debezium_key and (
            self.value_transform is not TransformType.FLATTEN_DEBEZIUM
            or not self.key_converter.type.uses_schema
        ):
            raise ValueError(
                f"{ID_COLUMNS}=[{FROM_DEBEZIUM_KEY}] requires {TRANSFORM_VALUE_TYPE}=flatten_debezium and a "
                f"schema-based {CONVERT_KEY_TYPE}"
            )
        if self.value_transform is TransformType.NONE:
            # Without flatten the only columns are _kafka_*; partition/id columns must be among them.
            cdc = (self.cdc_field,) if self.cdc_field else ()
            for col in (*self.id_columns, *(p.column for p in self.partition_by), *cdc):
                root = col.split(".", 1)[0]
                if not root.startswith("_kafka_"):
                    raise ValueError(
                        f"column {col!r} in {ID_COLUMNS}/{PARTITION_BY}/{CDC_FIELD} does not exist without "
                        f"{TRANSFORM_VALUE_TYPE}=flatten; only _kafka_* columns exist then"
                    )
            for part in self.partition_by:
                if not self._kafka_column_exists(part.column):
                    raise ValueError(
                        f"{PARTITION_BY}: column {part.column!r} does not exist; without "
                        f"{TRANSFORM_VALUE_TYPE}=flatten the columns are _kafka_key, _kafka_value, "
                        "_kafka_header and _kafka_metadata.partition/offset/timestamp (fields of "
                        "_kafka_key/_kafka_value when their converter uses a schema)"
                    )

    def _kafka_column_exists(self, column: str) -> bool:
        """Whether ``column`` is one of the ``_kafka_*`` columns (or, for a schema-typed key or
        value, a field path below one, which only the schema can confirm)."""
        head, _, rest = column.partition(".")
        if not rest:
            return head in ("_kafka_key", "_kafka_value", "_kafka_header", "_kafka_metadata")
        if head == "_kafka_metadata":
            return rest in ("partition", "offset", "timestamp")
        if head == "_kafka_key":
            return self.key_converter.type.uses_schema
        if head == "_kafka_value":
            return self.value_converter.type.uses_schema
        return False


def validate_table_topic_configs(configs: Mapping[str, str | None], topic: str | None = None) -> None:
    """Raise ``ValueError`` naming the key when the table-topic configs of a topic are invalid.

    The broker calls this on CreateTopics and AlterConfigs with the topic's full resulting config map
    and answers ``INVALID_CONFIG`` with ``str(exc)``.
    """
    TableTopicConfig.from_topic_configs(configs, topic)


def sanitize_table_name(topic: str) -> str:
    """A topic name as an Iceberg/Spark-friendly table name: ``orders.v1-eu`` -> ``orders_v1_eu``.

    Dots would be read as namespace separators and dashes need quoting in Spark SQL, so every
    character outside ``[A-Za-z0-9_]`` becomes ``_``.
    """
    name = re.sub(r"[^A-Za-z0-9_]", "_", topic)
    return name or "_"


def parse_partition_by(text: str) -> tuple[PartitionField, ...]:
    """Parse ``[bucket(name, 16), month(ts), region]`` (brackets optional).

    Accepts both AutoMQ's column-first order ``bucket(name, 16)`` and Iceberg/Spark's
    ``bucket(16, name)``; plural aliases (``months``) and ``identity(col)`` too.

    Raises:
        ValueError: naming ``automq.table.topic.partition.by`` and the bad entry.
    """
    fields: list[PartitionField] = []
    for entry in _split_list(PARTITION_BY, text):
        match = re.fullmatch(r"([A-Za-z_]+)\s*\((.*)\)", entry)
        if match is None:
            _check_column_name(PARTITION_BY, entry)
            fields.append(PartitionField(PartitionTransform.IDENTITY, entry))
            continue
        name = match.group(1).lower()
        name = _TRANSFORM_ALIASES.get(name, name)
        try:
            transform = PartitionTransform(name)
        except ValueError:
            choices = ", ".join(t.value for t in PartitionTransform)
            raise ValueError(
                f"{PARTITION_BY}: unknown transform {match.group(1)!r} in {entry!r} ({choices})"
            ) from None
        args = [a.strip() for a in match.group(2).split(",")]
        if transform in (PartitionTransform.BUCKET, PartitionTransform.TRUNCATE):
            if len(args) != 2:
                raise ValueError(
                    f"{PARTITION_BY}: {entry!r} needs a column and a width, e.g. {name}(col, 16)"
                )
            if args[0].isdigit() and not args[1].isdigit():
                args.reverse()
            column, width = args
            if not width.isdigit() or not 0 < int(width) <= 1_000_000:
                raise ValueError(f"{PARTITION_BY}: width in {entry!r} must be a positive integer")
            _check_column_name(PARTITION_BY, column)
            fields.append(PartitionField(transform, column, int(width)))
        else:
            if len(args) != 1:
                raise ValueError(f"{PARTITION_BY}: {entry!r} takes exactly one column")
            _check_column_name(PARTITION_BY, args[0])
            fields.append(PartitionField(transform, args[0]))
    seen: set[tuple[str, str]] = set()
    for f in fields:
        ident = (str(f.transform), f.column)
        if ident in seen:
            raise ValueError(f"{PARTITION_BY}: {f} appears twice")
        seen.add(ident)
    return tuple(fields)


# ---------------------------------------------------------------------------------------------- helpers

_KNOWN_KEYS = frozenset(
    {
        ENABLE, COMMIT_INTERVAL_MS, COMMIT_MAX_BYTES, NAMESPACE, TABLE_NAME, SCHEMA_TYPE,
        CONVERT_VALUE_TYPE, CONVERT_KEY_TYPE, VALUE_LATEST_SUBJECT, VALUE_LATEST_MESSAGE,
        KEY_LATEST_SUBJECT, KEY_LATEST_MESSAGE, TRANSFORM_VALUE_TYPE, ID_COLUMNS, PARTITION_BY,
        UPSERT_ENABLE, CDC_FIELD, ERRORS_TOLERANCE, ERRORS_DLQ_TOPIC, EXPIRE_SNAPSHOT_ENABLED,
        EXPIRE_SNAPSHOT_OLDER_THAN_HOURS, EXPIRE_SNAPSHOT_RETAIN_LAST, ICEBERG_AUTO_CREATE_PROPERTIES,
        FORMAT_VERSION,
    }
)  # fmt: skip

_COLUMN_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-]*")
_TOPIC_RE = re.compile(r"[A-Za-z0-9._\-]{1,249}")


def _bool(raw: Mapping[str, str], key: str, default: bool) -> bool:
    text = raw.get(key, "")
    if text == "":
        return default
    lowered = text.lower()
    # Kafka's ConfigDef accepts only true/false for BOOLEAN; so do we.
    if lowered not in ("true", "false"):
        raise ValueError(f"{key} must be true or false, not {text!r}")
    return lowered == "true"


def _int(raw: Mapping[str, str], key: str, default: int, low: int, high: int) -> int:
    text = raw.get(key, "")
    if text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{key} must be an integer, not {text!r}") from None
    if not low <= value <= high:
        raise ValueError(f"{key} must be between {low} and {high}, not {value}")
    return value


def _enum(raw: Mapping[str, str], key: str, enum: type[_E], default: _E) -> _E:
    text = raw.get(key, "")
    if text == "":
        return default
    try:
        return enum(text.lower())
    except ValueError:
        choices = ", ".join(e.value for e in enum)
        raise ValueError(f"{key} must be one of {choices}, not {text!r}") from None


def _legacy_schema_type(raw: Mapping[str, str]) -> tuple[ConvertType, TransformType]:
    """Map the deprecated ``schema.type`` as AutoMQ documents it: ``schemaless`` -> raw + none,
    ``schema`` -> by_schema_id + flatten. The explicit new keys, when also set, win."""
    text = raw.get(SCHEMA_TYPE, "").lower()
    if text in ("", "none", "schemaless"):
        return ConvertType.RAW, TransformType.NONE
    if text == "schema":
        return ConvertType.BY_SCHEMA_ID, TransformType.FLATTEN
    raise ValueError(f"{SCHEMA_TYPE} must be one of none, schemaless, schema, not {raw[SCHEMA_TYPE]!r}")


def _converter(
    raw: Mapping[str, str],
    kind: ConvertType,
    subject_key: str,
    message_key: str,
    topic: str | None,
    side: str,
) -> ConverterConfig:
    # Validated whatever the converter type, so a typo is caught before the type is switched over.
    message = raw.get(message_key) or None
    if message is not None and not re.fullmatch(
        r"\.?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", message
    ):
        raise ValueError(f"{message_key} must be a fully-qualified message name, not {message!r}")
    if kind is not ConvertType.BY_LATEST_SCHEMA:
        return ConverterConfig(kind)
    subject = raw.get(subject_key) or (f"{topic}-{side}" if topic else None)
    return ConverterConfig(kind, subject, message.lstrip(".") if message else None)


def _namespace(raw: Mapping[str, str]) -> str:
    text = raw.get(NAMESPACE, "") or DEFAULT_NAMESPACE
    for part in text.split("."):
        if not _NAME_RE.fullmatch(part):
            raise ValueError(
                f"{NAMESPACE} must be dot-separated names of letters, digits, _ and -, not {text!r}"
            )
    return text


def _table_name(raw: Mapping[str, str], topic: str | None) -> str | None:
    text = raw.get(TABLE_NAME, "")
    if text == "":
        return sanitize_table_name(topic) if topic else None
    if not _NAME_RE.fullmatch(text):
        raise ValueError(f"{TABLE_NAME} must consist of letters, digits, _ and -, not {text!r}")
    return text


def _split_list(key: str, text: str) -> list[str]:
    """Split ``[a, f(b, 2), c]`` at top-level commas; brackets are optional."""
    text = text.strip()
    if text.startswith("["):
        if not text.endswith("]"):
            raise ValueError(f"{key}: unbalanced brackets in {text!r}")
        text = text[1:-1]
    items: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise ValueError(f"{key}: unbalanced parentheses in {text!r}")
        if ch == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if depth != 0:
        raise ValueError(f"{key}: unbalanced parentheses in {text!r}")
    items.append("".join(current).strip())
    if items == [""]:
        return []
    if any(item == "" for item in items):
        raise ValueError(f"{key}: empty entry in {text!r}")
    return items


def _check_column_name(key: str, name: str) -> None:
    if not _COLUMN_RE.fullmatch(name):
        raise ValueError(f"{key}: {name!r} is not a column name (letters, digits, _; dots for nested fields)")


def _check_topic_name(key: str, name: str) -> None:
    if not _TOPIC_RE.fullmatch(name) or name in (".", ".."):
        raise ValueError(f"{key}: {name!r} is not a valid topic name")


def _id_columns(raw: Mapping[str, str]) -> tuple[str, ...]:
    columns = _split_list(ID_COLUMNS, raw.get(ID_COLUMNS, ""))
    for col in columns:
        _check_column_name(ID_COLUMNS, col)
    if len(set(columns)) != len(columns):
        raise ValueError(f"{ID_COLUMNS}: duplicate column in {raw[ID_COLUMNS]!r}")
    if FROM_DEBEZIUM_KEY in columns and len(columns) != 1:
        raise ValueError(f"{ID_COLUMNS}: {FROM_DEBEZIUM_KEY} cannot be combined with other columns")
    return tuple(columns)


def _format_version(raw: Mapping[str, str]) -> None:
    """Refuse a table format version the pipeline cannot write, whether asked by ``format.version``
    or by ``format-version`` among the auto-create properties."""
    asked = raw.get(FORMAT_VERSION, "").strip() or "2"
    from_properties = dict(_properties(raw)).get("format-version")
    for key, value in ((FORMAT_VERSION, asked), (ICEBERG_AUTO_CREATE_PROPERTIES, from_properties)):
        if value is None or value.strip() in FORMAT_VERSIONS:
            continue
        if value.strip() == "3":
            raise ValueError(
                f"{key}: format version 3 (deletion vectors) is not written yet: the commits are "
                "written by pyiceberg, which writes no version 3 manifests; keep 2 (the default)"
            )
        raise ValueError(f"{key}: format version {value!r} is not one of {', '.join(FORMAT_VERSIONS)}")


def _properties(raw: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    if ICEBERG_AUTO_CREATE_PROPERTIES not in raw:
        return DEFAULT_AUTO_CREATE_PROPERTIES
    pairs: list[tuple[str, str]] = []
    for item in raw[ICEBERG_AUTO_CREATE_PROPERTIES].split(","):
        item = item.strip()
        if not item:
            continue
        if item.count("=") != 1 or not item.split("=", 1)[0].strip():
            raise ValueError(f"{ICEBERG_AUTO_CREATE_PROPERTIES}: {item!r} must be key=value")
        k, v = (p.strip() for p in item.split("=", 1))
        if any(k == existing for existing, _ in pairs):
            raise ValueError(f"{ICEBERG_AUTO_CREATE_PROPERTIES}: duplicate key {k!r}")
        pairs.append((k, v))
    return tuple(pairs)
